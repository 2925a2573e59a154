package hops

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/platform"
)

// nodeIn is a node whose step 1 is the namespace nn (nil: a node the suite
// cannot enter, as an existing cluster's).
type nodeIn struct {
	platform.Node
	nn *fabric.NodeNetns
}

func (nodeIn) Name() string               { return "node-a" }
func (nodeIn) Address() netip.Prefix      { return netip.MustParsePrefix("203.0.113.2/24") }
func (n nodeIn) Step1() *fabric.NodeNetns { return n.nn }

// The node's end of VLAN-05's path is br100 while it carries the node's
// address: a capture point in the node's namespace. Elsewhere, the line
// names the link that holds it, or none.
func TestTheNodesAddressIsItsHop(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: makes a network namespace")
	}
	ns, err := fabric.NewNamespace("test-hops")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Delete() })
	h := ns.Handle
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// A veth stands for uplink.100 (this kernel may lack 8021q).
	must(h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "uplink.100"}, PeerName: "uplink-peer"}))
	up, err := h.LinkByName("uplink.100")
	must(err)
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: fabric.BridgeName}}
	must(h.LinkAdd(br))
	must(h.LinkSetMaster(up, br))
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: net.IPv4(203, 0, 113, 2), Mask: net.CIDRMask(24, 32)}}
	n := nodeIn{nn: &fabric.NodeNetns{Netns: ns.Path, Handle: h}}
	ctx := context.Background()

	must(h.AddrAdd(br, addr))
	if hop := nodeAddress(ctx, n); hop.Missing != "" || hop.Point.Err != nil || hop.Point.Iface != fabric.BridgeName || hop.Point.Netns != ns.Path {
		t.Errorf("the address on br100: %+v, want a capture on br100 in the node's namespace", hop)
	}
	must(h.AddrDel(br, addr))
	must(h.AddrAdd(up, addr))
	if hop, want := nodeAddress(ctx, n), "br100 on node-a does not carry the node's address 203.0.113.2: uplink.100 holds it"; hop.Missing != want {
		t.Errorf("the address on uplink.100: %q, want %q", hop.Missing, want)
	}
	must(h.AddrDel(up, addr))
	if hop, want := nodeAddress(ctx, n), "br100 on node-a does not carry the node's address 203.0.113.2: no link of the node holds it"; hop.Missing != want {
		t.Errorf("no address: %q, want %q", hop.Missing, want)
	}
	if hop := nodeAddress(ctx, nodeIn{}); !errors.Is(hop.Point.Err, evidence.ErrNotObservable) {
		t.Errorf("a node the suite cannot enter: %+v, want not observable", hop.Point)
	}
}
