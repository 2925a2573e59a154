// Package hops follows a guest's echo request to the gateway, or to its
// node's address, and its reply back, hop by hop, and says in one line
// where they stopped: the first question when a datapath claim fails on a
// vendor's setup (issue 25). The hops are those of the guide's step 1, in
// the order a request from the guest crosses them:
//
//	guest's NIC ──> its port on br100 ──> uplink.100 ──> the trunk ──> the gateway's VLAN interface
//	(a VM's: its    (the port br100's  │  (the VLAN      (tagged;      (where the suite
//	 launcher's tap) FDB learned its MAC)│  sub-interface) the uplink)   made the gateway)
//	                                   └──> br100 itself: the node's own address (VLAN-05)
//
// A capture on br100 itself sees only the bridge's own traffic, not what
// it forwards between ports: the guest's port is where a frame enters it.
// A hop the platform cannot observe (a vendor's switch, an existing
// cluster's node) is named as such and passed over.
package hops

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/failures"
	"github.com/cozystack/vlan-conformance/framework/nodenet"
	"github.com/cozystack/vlan-conformance/framework/platform"
)

// Hop is one place on the path where the suite can capture.
type Hop struct {
	Name  string // as the verdict names it: "the guest's NIC", "uplink.100", ...
	Point evidence.Point
	// Trunk: frames here carry the VLAN's tag, and the verdict says which.
	Trunk bool
	// Missing says why the hop has nothing to capture on although the
	// platform can see there: what is missing is itself where the frames
	// stopped ("br100 never learned the guest's MAC").
	Missing string
}

// Direction is which way the followed request goes.
type Direction bool

const (
	FromGuest Direction = false // the guest's request to the gateway, or to its node
	ToGuest   Direction = true  // the gateway's request, or the node's, to the guest
)

// Path is the hops between g and the gateway, in the order a request
// going d crosses them.
func Path(ctx context.Context, p platform.Platform, g platform.Guest, d Direction) []Hop {
	return going(d, path(ctx, p, g))
}

// NodePath is the hops between g and its node's own address, which the
// guide puts on br100 (VLAN-05), in the order a request going d crosses
// them.
func NodePath(ctx context.Context, g platform.Guest, d Direction) []Hop {
	return going(d, append(guestSide(ctx, g), nodeAddress(ctx, g.Node())))
}

// going orders hops listed from the guest outwards for a request going d.
func going(d Direction, hops []Hop) []Hop {
	if d == ToGuest {
		slices.Reverse(hops)
	}
	return hops
}

// guestSide is the first two hops from g: its NIC and its port on br100.
func guestSide(ctx context.Context, g platform.Guest) []Hop {
	n := g.Node()
	port := Hop{Name: "its port on " + fabric.BridgeName}
	switch fdb, err := nodenet.BridgeFDB(ctx, n); {
	case err != nil:
		port.Point = evidence.Point{Label: fabric.BridgeName + " on " + n.Name(), Err: err}
	default:
		i := slices.IndexFunc(fdb, func(e evidence.FDBEntry) bool { return !e.Local && e.MAC.String() == g.MAC().String() })
		if i < 0 {
			port.Missing = fmt.Sprintf("%s on %s never learned the guest's MAC %s on any port", fabric.BridgeName, n.Name(), g.MAC())
			break
		}
		nn := n.Step1()
		port.Point = evidence.Point{Netns: nn.Netns, Iface: fdb[i].Port, Label: fdb[i].Port + ", the guest's port on " + fabric.BridgeName + " of " + n.Name()}
	}
	return []Hop{{Name: "the guest's NIC", Point: g.VLANPoint()}, port}
}

// nodeAddress is br100 itself as the hop where the node's own address
// sends and answers. A capture there sees the node's traffic (not what
// the bridge forwards). An address the node holds elsewhere is where the
// frames stop: a request from the guest reaches br100, which does not
// answer for it, and the node's own request never enters the bridge.
func nodeAddress(ctx context.Context, n platform.Node) Hop {
	h := Hop{Name: fabric.BridgeName + " of " + n.Name()}
	links, err := nodenet.Links(ctx, n)
	if err != nil {
		h.Point = evidence.Point{Label: h.Name, Err: err}
		return h
	}
	addr := n.Address().Addr()
	holder := ""
	for _, name := range slices.Sorted(maps.Keys(links)) {
		if slices.ContainsFunc(links[name].Addrs, func(p netip.Prefix) bool { return p.Addr() == addr }) {
			holder = name
			break
		}
	}
	switch holder {
	case fabric.BridgeName:
		h.Point = evidence.Point{Netns: n.Step1().Netns, Iface: fabric.BridgeName, Label: fabric.BridgeName + " on " + n.Name() + ", the node's address " + addr.String()}
	case "":
		h.Missing = fmt.Sprintf("%s on %s %s %s: no link of the node holds it", fabric.BridgeName, n.Name(), failures.NotTheNodeAddress, addr)
	default:
		h.Missing = fmt.Sprintf("%s on %s %s %s: %s holds it", fabric.BridgeName, n.Name(), failures.NotTheNodeAddress, addr, holder)
	}
	return h
}

// path is the hops from g to the gateway.
func path(ctx context.Context, p platform.Platform, g platform.Guest) []Hop {
	n := g.Node()
	parent := Hop{Name: "the VLAN sub-interface", Point: n.ParentPoint()}
	switch {
	case parent.Point.Iface != "":
		parent.Name = parent.Point.Iface
	case parent.Point.Err == nil && n.Step1() != nil:
		parent.Missing = fmt.Sprintf("%s on %s enslaves no VLAN sub-interface", fabric.BridgeName, n.Name())
	case parent.Point.Err == nil:
		parent.Point.Err = evidence.NotObservableOn("the VLAN sub-interface", n.Name())
	}
	return append(guestSide(ctx, g),
		parent,
		Hop{Name: "the trunk", Point: p.Trunk(n), Trunk: true},
		Hop{Name: "the gateway", Point: p.Gateway().VLANPoint()},
	)
}

// Seen is what one hop saw while the requests were sent.
type Seen struct {
	Hop Hop
	// Echo requests from the guest to the gateway and the gateway's echo
	// replies; ARP requests from the guest for the gateway's address and
	// the gateway's ARP replies: a guest that never resolves the gateway
	// sends no echo request, so its ARP request is what is followed.
	Echo, EchoReplies, ARP, ARPReplies evidence.Frames
	// Err is why the hop was not captured on (wrapping
	// evidence.ErrNotObservable where the platform cannot see there).
	Err error
}

func (s Seen) observed() bool { return s.Err == nil && s.Hop.Missing == "" }

// Trace is what every hop saw, in path order.
type Trace []Seen

// Follow captures at every hop while send runs and keeps what each saw of
// src's requests to dst and of dst's replies;
// hop i's capture (from 1) is written to pcap(i).
func Follow(hops []Hop, pcap func(i int) string, src, dst netip.Addr, send func()) Trace {
	t := make(Trace, len(hops))
	caps := make([]*evidence.Capture, len(hops))
	for i, h := range hops {
		t[i].Hop = h
		if h.Missing != "" {
			continue
		}
		c, err := evidence.StartCapture(h.Point, pcap(i+1))
		if err != nil {
			t[i].Err = err
			continue
		}
		caps[i] = c
	}
	send()
	for i, c := range caps {
		if c == nil {
			continue
		}
		frames, err := c.Stop()
		if err != nil {
			t[i].Err = err
			continue
		}
		t[i].Echo, t[i].EchoReplies = frames.EchoRequests(src, dst), frames.EchoReplies(dst, src)
		t[i].ARP, t[i].ARPReplies = frames.ARPSentBy(src).ARPRequestsFor(dst), frames.ARPRepliesFrom(dst)
	}
	return t
}

// Where says in one line where the sender's requests or their replies
// stopped, given the VLAN the trunk should carry them on and how the
// target is named ("the gateway"): its echo requests, or its ARP requests
// for the target where it sent none.
func (t Trace) Where(vlan int, target string) string {
	what, req, rep := "the echo request", func(s Seen) evidence.Frames { return s.Echo }, func(s Seen) evidence.Frames { return s.EchoReplies }
	if !slices.ContainsFunc(t, func(s Seen) bool { return len(s.Echo) > 0 }) {
		what, req, rep = "the ARP request for "+target, func(s Seen) evidence.Frames { return s.ARP }, func(s Seen) evidence.Frames { return s.ARPReplies }
	}
	last := -1 // the last hop that saw a request
	for i, s := range t {
		if s.Hop.Missing != "" {
			return t.stopped(what, last, vlan, req, s.Hop.Missing)
		}
		if !s.observed() {
			continue
		}
		if len(req(s)) == 0 {
			return t.stopped(what, last, vlan, req, failures.NothingReached+" "+s.Hop.Name)
		}
		last = i
	}
	if last < 0 {
		return "no hop could be observed" + t.unobserved()
	}
	// The requests reached the last hop observed: now the replies, back.
	if len(rep(t[last])) == 0 {
		return fmt.Sprintf("%s reached %s; %s it", what, t.crossed(last, vlan, req), failures.NoReplyLeft) + t.unobserved()
	}
	prev := last
	for i := last - 1; i >= 0; i-- {
		if !t[i].observed() {
			continue
		}
		if len(rep(t[i])) == 0 {
			return fmt.Sprintf("%s crossed every hop observed; the reply reached %s, but not %s", what, t[prev].Hop.Name, t[i].Hop.Name) + t.unobserved()
		}
		prev = i
	}
	return what + " and its reply crossed every hop observed" + t.unobserved()
}

// stopped is the line for requests last seen at hop last (-1: nowhere).
func (t Trace) stopped(what string, last, vlan int, req func(Seen) evidence.Frames, then string) string {
	if last < 0 {
		return "nothing any hop saw was sent: " + then + t.unobserved()
	}
	return fmt.Sprintf("%s reached %s; %s", what, t.crossed(last, vlan, req), then) + t.unobserved()
}

// crossed names hop i as the requests crossed it: on the trunk, with
// their tag, against the VLAN expected.
func (t Trace) crossed(i, vlan int, req func(Seen) evidence.Frames) string {
	s := t[i]
	if !s.Hop.Trunk {
		return s.Hop.Name
	}
	tags := map[int]bool{}
	for _, f := range req(s) {
		tags[f.VLAN] = true
	}
	var ids []string
	for id := range tags {
		if id == 0 {
			ids = append(ids, "untagged")
		} else {
			ids = append(ids, fmt.Sprintf("tagged %d", id))
		}
	}
	slices.Sort(ids)
	line := s.Hop.Name + " " + strings.Join(ids, " and ")
	if vlan != 0 && (len(tags) != 1 || !tags[vlan]) {
		line += fmt.Sprintf(", not tagged %d", vlan)
	}
	return line
}

// unobserved lists the hops passed over, with why.
func (t Trace) unobserved() string {
	var names []string
	for _, s := range t {
		if s.Err != nil {
			why := "not observable"
			if !errors.Is(s.Err, evidence.ErrNotObservable) {
				why = "not captured: " + s.Err.Error()
			}
			names = append(names, s.Hop.Name+" ("+why+")")
		}
	}
	if len(names) == 0 {
		return ""
	}
	return " [passed over: " + strings.Join(names, "; ") + "]"
}
