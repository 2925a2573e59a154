package hops

import (
	"strings"
	"testing"

	"github.com/cozystack/vlan-conformance/framework/evidence"
)

// lab is the lab's five hops to the gateway, every one observable.
func lab() Trace {
	return Trace{
		{Hop: Hop{Name: "the guest's NIC"}},
		{Hop: Hop{Name: "its port on br100"}},
		{Hop: Hop{Name: "uplink.100"}},
		{Hop: Hop{Name: "the trunk", Trunk: true}},
		{Hop: Hop{Name: "the gateway"}},
	}
}

func frames(vlan int) evidence.Frames { return evidence.Frames{{VLAN: vlan, Tagged: vlan != 0}} }

// Each line names the hop where the frames stopped, as the controls of
// VLAN-01 place a fault there.
func TestWhereItStopped(t *testing.T) {
	for name, tc := range map[string]struct {
		trace func(Trace) Trace
		want  string
	}{
		"the node tags the VLAN wrongly": {func(t Trace) Trace {
			for i := range 4 {
				t[i].ARP = frames(0)
			}
			t[3].ARP = frames(101)
			return t
		}, "the ARP request for the gateway reached the trunk tagged 101, not tagged 100; nothing of it reached the gateway"},
		"br100 enslaves no sub-interface": {func(t Trace) Trace {
			t[0].ARP, t[1].ARP = frames(0), frames(0)
			t[2].Hop.Missing = "br100 on node-a enslaves no VLAN sub-interface"
			return t
		}, "the ARP request for the gateway reached its port on br100; br100 on node-a enslaves no VLAN sub-interface"},
		"the gateway answers no ping": {func(t Trace) Trace {
			for i := range t {
				t[i].ARP, t[i].ARPReplies, t[i].Echo = frames(0), frames(0), frames(0)
			}
			t[3].Echo = frames(100)
			return t
		}, "the echo request reached the gateway; no reply left it"},
		"a reply lost on the way back": {func(t Trace) Trace {
			for i := range t {
				t[i].Echo = frames(0)
			}
			t[4].EchoReplies, t[3].EchoReplies = frames(0), frames(100)
			return t
		}, "the echo request crossed every hop observed; the reply reached the trunk, but not uplink.100"},
		"an unobservable trunk is passed over": {func(t Trace) Trace {
			for i := range t {
				t[i].Echo = frames(0)
			}
			t[4].Echo = nil
			t[3].Err = evidence.NotObservableOn("capture", "node-a")
			return t
		}, "the echo request reached uplink.100; nothing of it reached the gateway [passed over: the trunk (not observable)]"},
		"the guest sends nothing": {func(t Trace) Trace { return t },
			"nothing any hop saw was sent: nothing of it reached the guest's NIC"},
		"every hop both ways": {func(t Trace) Trace {
			for i := range t {
				t[i].Echo, t[i].EchoReplies = frames(0), frames(0)
			}
			t[3].Echo, t[3].EchoReplies = frames(100), frames(100)
			return t
		}, "the echo request and its reply crossed every hop observed"},
	} {
		t.Run(name, func(t *testing.T) {
			got := tc.trace(lab()).Where(100, "the gateway")
			if got != tc.want {
				t.Fatalf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// An untagged trunk (a kind lane without 8021q) is not faulted for it.
func TestAnUntaggedTrunkIsNamedAsSeen(t *testing.T) {
	tr := lab()
	for i := range tr {
		tr[i].Echo = frames(0)
	}
	tr[4].Echo = nil
	if got := tr.Where(0, "the gateway"); !strings.Contains(got, "reached the trunk untagged; nothing of it reached the gateway") {
		t.Fatalf("got %q", got)
	}
}

// The gateway's request to the guest crosses the hops the other way; the
// line names the guest as its target.
func TestWhereTheGatewaysRequestStopped(t *testing.T) {
	tr := lab()
	for i := range tr {
		tr[i].ARP = frames(0)
	}
	tr[3].ARP = frames(100)
	tr[0].ARP = nil // the guest's NIC, last on the way from the gateway
	rev := Trace{tr[4], tr[3], tr[2], tr[1], tr[0]}
	want := "the ARP request for the guest reached its port on br100; nothing of it reached the guest's NIC"
	if got := rev.Where(100, "the guest"); got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

// The node's own address off br100 (VLAN-05's control) is where the
// node's request to the guest stops: it never enters the bridge.
func TestWhereTheNodesRequestStopped(t *testing.T) {
	missing := "br100 on node-a does not carry the node's address 203.0.113.2: uplink.100 holds it"
	node := Trace{
		{Hop: Hop{Name: "br100 of node-a", Missing: missing}},
		{Hop: Hop{Name: "its port on br100"}},
		{Hop: Hop{Name: "the guest's NIC"}},
	}
	if got, want := node.Where(0, "the guest"), "nothing any hop saw was sent: "+missing; got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	// The guest's request the other way reaches its port, and no further.
	guest := Trace{node[2], node[1], node[0]}
	guest[0].Echo, guest[1].Echo = frames(0), frames(0)
	if got, want := guest.Where(0, "the node"), "the echo request reached its port on br100; "+missing; got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}
