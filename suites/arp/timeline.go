package arp

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/probe"
)

// timeline is an outage told as dated events, relative to an origin
// (t = 0, the moment the re-created VM is up).
type timeline struct {
	title  string
	origin time.Time
	notes  []string
	events []event
}

type event struct {
	at   time.Time
	what string
}

func newTimeline(title string) *timeline { return &timeline{title: title} }

func (t *timeline) note(format string, a ...any) {
	t.notes = append(t.notes, fmt.Sprintf(format, a...))
}

func (t *timeline) add(at time.Time, format string, a ...any) {
	t.events = append(t.events, event{at: at, what: fmt.Sprintf(format, a...)})
}

// Markdown renders the notes, then the events in time order with their
// offset from the origin in milliseconds.
func (t *timeline) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", t.title)
	for _, n := range t.notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	evs := append([]event(nil), t.events...)
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].at.Before(evs[j].at) })
	b.WriteString("\n| t (ms) | event |\n|---:|---|\n")
	for _, e := range evs {
		fmt.Fprintf(&b, "| %+d | %s |\n", e.at.Sub(t.origin).Milliseconds(), strings.ReplaceAll(e.what, "|", "\\|"))
	}
	return b.String()
}

// write saves the timeline as the claim's artifact at path.
func (t *timeline) write(path string) error {
	return os.WriteFile(path, []byte(t.Markdown()), 0o644)
}

// outage summarises a ping stream: the first and last unanswered probes,
// and the first reply after a moment.
type outage struct {
	Sent, Lost          int
	FirstLost, LastLost probe.Probe // zero Seq when nothing was lost
}

func outageOf(probes []probe.Probe) outage {
	o := outage{Sent: len(probes)}
	for _, p := range probes {
		if p.Answered() {
			continue
		}
		o.Lost++
		if o.FirstLost.Seq == 0 {
			o.FirstLost = p
		}
		o.LastLost = p
	}
	return o
}

// firstReplyAfter is the probe whose reply came back first after t.
func firstReplyAfter(probes []probe.Probe, t time.Time) (probe.Probe, bool) {
	var best probe.Probe
	found := false
	for _, p := range probes {
		if p.Answered() && p.Reply.After(t) && (!found || p.Reply.Before(best.Reply)) {
			best, found = p, true
		}
	}
	return best, found
}

// lostSentAfter lists the unanswered probes sent at or after t.
func lostSentAfter(probes []probe.Probe, t time.Time) []probe.Probe {
	var out []probe.Probe
	for _, p := range probes {
		if !p.Answered() && !p.Sent.Before(t) {
			out = append(out, p)
		}
	}
	return out
}

// addProbes puts a stream's outage edges on the timeline.
func (t *timeline) addProbes(probes []probe.Probe, who string) outage {
	o := outageOf(probes)
	t.note("%s: %d echo requests, %d unanswered", who, o.Sent, o.Lost)
	if o.Lost == 0 {
		return o
	}
	t.add(o.FirstLost.Sent, "first failure: echo #%d sent, never answered", o.FirstLost.Seq)
	t.add(o.LastLost.Sent, "last failure: echo #%d sent, never answered", o.LastLost.Seq)
	if p, ok := firstReplyAfter(probes, o.LastLost.Sent); ok {
		t.add(p.Reply, "first success after the outage: echo #%d (sent %+d ms) answered", p.Seq, p.Sent.Sub(t.origin).Milliseconds())
	}
	return o
}

// addNeighbor puts the gateway entry's changes on the timeline, naming
// the old and new MACs.
func (t *timeline) addNeighbor(changes []neighChange, oldMAC, newMAC net.HardwareAddr) {
	t.addEntry("gateway", changes, oldMAC, newMAC)
}

// addEntry is addNeighbor for the entry of the router who names.
func (t *timeline) addEntry(who string, changes []neighChange, oldMAC, newMAC net.HardwareAddr) {
	for _, c := range changes {
		if c.err != nil {
			t.add(c.at, "%s entry unreadable: %v", who, c.err)
			continue
		}
		t.add(c.at, "%s entry: %s", who, describeNeighbor(c.n, oldMAC, newMAC))
	}
}

func describeNeighbor(n evidence.Neighbor, oldMAC, newMAC net.HardwareAddr) string {
	if n.State == "" {
		return "absent"
	}
	who := ""
	switch {
	case len(n.MAC) == 0:
		who = "(no MAC)"
	case bytes.Equal(n.MAC, newMAC) && bytes.Equal(n.MAC, oldMAC):
		who = "(the MAC, unchanged)"
	case bytes.Equal(n.MAC, newMAC):
		who = "(new MAC)"
	case bytes.Equal(n.MAC, oldMAC):
		who = "(old MAC)"
	}
	return strings.Join(strings.Fields(fmt.Sprintf("%s %s %s", n.State, n.MAC, who)), " ")
}

// neighWatch samples the gateway's entry for one address and keeps the
// changes (MAC or state), with the time each was first seen.
type neighWatch struct {
	stop    chan struct{}
	done    chan struct{}
	changes []neighChange
}

type neighChange struct {
	at  time.Time
	n   evidence.Neighbor
	err error
}

func watchNeighbor(gw platform.Gateway, ip netip.Addr, every time.Duration) *neighWatch {
	w := &neighWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(every)
		defer t.Stop()
		last := ""
		for {
			n, err := gw.Neighbor(context.Background(), ip)
			key := fmt.Sprintf("%s %s %v", n.MAC, n.State, err)
			if key != last {
				w.changes = append(w.changes, neighChange{at: time.Now(), n: n, err: err})
				last = key
			}
			select {
			case <-w.stop:
				return
			case <-t.C:
			}
		}
	}()
	return w
}

// Stop ends the watch and returns the changes; it may be called again.
func (w *neighWatch) Stop() []neighChange {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
	return w.changes
}

// firstWith is when the watch first saw the entry hold mac.
func firstWith(changes []neighChange, mac net.HardwareAddr, after time.Time) (time.Time, bool) {
	for _, c := range changes {
		if c.err == nil && bytes.Equal(c.n.MAC, mac) && !c.at.Before(after) {
			return c.at, true
		}
	}
	return time.Time{}, false
}
