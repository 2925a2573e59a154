package fabric

import (
	"errors"
	"net/netip"
	"os"
	"syscall"
	"testing"

	"github.com/vishvananda/netlink"
)

// VLAN-13's step 1 on a real kernel: refused while a macvlan child holds
// the sub-interface, the node left as it was; done once the child is gone;
// undone back to the macvlan wiring. The sub-interface is a veth of that
// name (the host may lack 8021q).
func TestBridgeParentRefusedWhileAMacvlanChildHoldsTheParent(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: makes a network namespace")
	}
	ns, err := NewNamespace("test-bridge-parent")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Delete() })
	h := ns.Handle
	addr := netip.MustParsePrefix("192.0.2.4/24")
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "uplink.100"}, PeerName: "uplink-peer"}); err != nil {
		t.Fatal(err)
	}
	parent, err := h.LinkByName("uplink.100")
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(h.LinkSetUp(parent), addAddr(h, "uplink.100", addr)); err != nil {
		t.Fatal(err)
	}
	child := &netlink.Macvlan{LinkAttrs: netlink.LinkAttrs{Name: "consumer", ParentIndex: parent.Attrs().Index}, Mode: netlink.MACVLAN_MODE_BRIDGE}
	if err := h.LinkAdd(child); err != nil {
		t.Fatal(err)
	}
	n := &NodeNetns{Spec: NodeSpec{Name: "node-m", Address: addr}, Handle: h, Parent: "uplink.100"}

	if _, err := BridgeParent(n); !errors.Is(err, syscall.EBUSY) {
		t.Fatalf("with a macvlan child on uplink.100: got %v, want EBUSY", err)
	}
	if _, err := h.LinkByName(BridgeName); err == nil {
		t.Fatalf("a refused step 1 left %s behind", BridgeName)
	}
	assertAddrOn(t, h, "uplink.100", addr)

	if err := h.LinkDel(child); err != nil {
		t.Fatal(err)
	}
	undo, err := BridgeParent(n)
	if err != nil {
		t.Fatalf("with the child gone: %v", err)
	}
	br, err := h.LinkByName(BridgeName)
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := h.LinkByName("uplink.100"); p.Attrs().MasterIndex != br.Attrs().Index {
		t.Fatalf("uplink.100's master is %d, want %s (%d)", p.Attrs().MasterIndex, BridgeName, br.Attrs().Index)
	}
	assertAddrOn(t, h, BridgeName, addr)

	if err := undo(); err != nil {
		t.Fatalf("undo: %v", err)
	}
	if _, err := h.LinkByName(BridgeName); err == nil {
		t.Fatalf("undo left %s", BridgeName)
	}
	assertAddrOn(t, h, "uplink.100", addr)
}

// assertAddrOn fails unless want is on iface and on no other link.
func assertAddrOn(t *testing.T, h *netlink.Handle, iface string, want netip.Prefix) {
	t.Helper()
	addrs, err := h.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	var on []string
	for _, a := range addrs {
		p, _ := netip.AddrFromSlice(a.IP)
		if p.Unmap() == want.Addr() {
			l, err := h.LinkByIndex(a.LinkIndex)
			if err != nil {
				t.Fatal(err)
			}
			on = append(on, l.Attrs().Name)
		}
	}
	if len(on) != 1 || on[0] != iface {
		t.Fatalf("%s is on %v, want on %s alone", want, on, iface)
	}
}
