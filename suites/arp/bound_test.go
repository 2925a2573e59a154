package arp

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/gateway"
	"github.com/cozystack/vlan-conformance/framework/probe"
)

func TestBoundFollowsTheStateMachine(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name   string
		timers evidence.NeighTimers
		want   time.Duration
	}{
		// 45 s REACHABLE at most, 5 s DELAY, 3 × 1 s PROBE, two 50 ms
		// intervals, 0.5 s slack, and 8/63 of each timer + 10 ms for the
		// timer wheel: 45/7.875+0.01 + 5/7.875+0.01 + 3 × (1/7.875+0.01).
		{"default", evidence.NeighTimers{BaseReachable: 30000 * ms, DelayFirstProbe: 5 * time.Second, RetransTime: time.Second, UcastSolicit: 3}, 53600*ms + wheel(45000, 5000, 1000, 1000, 1000)},
		{"tuned", evidence.NeighTimers{BaseReachable: 2000 * ms, DelayFirstProbe: time.Second, RetransTime: time.Second, UcastSolicit: 3}, 7600*ms + wheel(3000, 1000, 1000, 1000, 1000)},
		// Broadcast re-probes in PROBE count as probes too.
		{"resolicit", evidence.NeighTimers{BaseReachable: 2000 * ms, DelayFirstProbe: time.Second, RetransTime: time.Second, UcastSolicit: 3, McastResolicit: 2}, 9600*ms + wheel(3000, 1000, 1000, 1000, 1000, 1000, 1000)},
	} {
		if got := boundFor(tc.timers, 50*ms).Total(); got != tc.want {
			t.Errorf("%s: bound %s, want %s", tc.name, got, tc.want)
		}
	}
}

// wheel is the timer-wheel term for timers of the given milliseconds.
func wheel(ms ...int) time.Duration {
	var d time.Duration
	for _, m := range ms {
		d += time.Duration(m)*time.Millisecond*8/63 + 10*time.Millisecond
	}
	return d
}

func TestExpectedFailover(t *testing.T) {
	tm := evidence.NeighTimers{ReachableTime: 2500 * time.Millisecond, DelayFirstProbe: time.Second, RetransTime: time.Second, UcastSolicit: 3}
	confirmed := time.Unix(1000, 0)
	early, late, ok := expectedFailover(tm, confirmed, confirmed.Add(time.Second))
	if !ok || early != 5500*time.Millisecond || late != 5500*time.Millisecond+wheel(2500, 1000, 1000, 1000, 1000) {
		t.Errorf("failover %s..%s %v, want 5.5s and later", early, late, ok)
	}
	// A gateway quiet through a minute-long boot (ARP-03 on VMs) finds its
	// entry STALE: the delay and the probes start with its first packet.
	if early, late, _ := expectedFailover(tm, confirmed, confirmed.Add(time.Minute)); early != 4*time.Second || late != 4*time.Second+wheel(2500, 1000, 1000, 1000, 1000) {
		t.Errorf("a STALE entry: %s..%s, want 4s (delay 1 s + 3 probes × 1 s) and later", early, late)
	}
	if _, _, ok := expectedFailover(evidence.NeighTimers{}, confirmed, confirmed); ok {
		t.Error("unknown reachable time must not predict")
	}
}

func TestOutageEdges(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	probes := []probe.Probe{
		{Seq: 1, Sent: at(0), Reply: at(1)},
		{Seq: 2, Sent: at(50)},
		{Seq: 3, Sent: at(100)},
		{Seq: 4, Sent: at(150), Reply: at(160)},
		{Seq: 5, Sent: at(200), Reply: at(201)},
	}
	o := outageOf(probes)
	if o.Lost != 2 || o.FirstLost.Seq != 2 || o.LastLost.Seq != 3 {
		t.Errorf("outage %+v", o)
	}
	if p, ok := firstReplyAfter(probes, at(100)); !ok || p.Seq != 4 {
		t.Errorf("first reply after 100 ms: %+v %v", p, ok)
	}
	if l := lostSentAfter(probes, at(100)); len(l) != 1 || l[0].Seq != 3 {
		t.Errorf("lost after 100 ms: %+v", l)
	}
}

func TestFlaps(t *testing.T) {
	s := func(ports ...string) []fdbSample {
		var out []fdbSample
		for _, p := range ports {
			out = append(out, fdbSample{port: p})
		}
		return out
	}
	if m, ps := flaps(s("vethA", "uplink.100", "vethA", "uplink.100")); m != 3 || len(ps) != 2 {
		t.Errorf("collision: %d moves over %v", m, ps)
	}
	if m, _ := flaps(s("vethA", "vethA", "", "vethA")); m != 0 {
		t.Errorf("one owner: %d moves", m)
	}
}

// A gateway that declares no timers (a vendor's) is waited for as long as
// --gateway-wait says, not bounded, and a miss names the longer wait and
// ARP-04's gratuitous ARP as the way out.
func TestVendorGatewayIsWaitedForGatewayWait(t *testing.T) {
	gw := gateway.Vendor{Addr: netip.MustParseAddr("203.0.113.1")}
	tl := newTimeline("test")
	e, err := expectRecovery(context.Background(), gw, 4*time.Hour+10*time.Minute, tl)
	if err != nil {
		t.Fatal(err)
	}
	if e.limit != 4*time.Hour+10*time.Minute || e.bounded {
		t.Errorf("limit %s, bounded %v; want 4h10m, unbounded", e.limit, e.bounded)
	}
	if why := e.why(); !strings.Contains(why, "--gateway-wait") || !strings.Contains(why, "ARP-04") {
		t.Errorf("a miss says %q: want the longer wait and ARP-04 named", why)
	}
	if md := tl.Markdown(); !strings.Contains(md, "(--gateway-wait), not bounded") {
		t.Errorf("the timeline says nothing of the wait: %s", md)
	}
}
