package evidence_test

import (
	"net"
	"net/netip"
	"os"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/fabric"
)

// What netlink says of a namespace's links and routes, as NODE-01..03
// read a node: kinds, masters, parents, MTUs, addresses (not IPv6
// link-local ones), and the default route's device and gateway.
func TestReadLinksAndRoutes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: makes a network namespace")
	}
	ns, err := fabric.NewNamespace("test-links")
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
	// A veth stands for the uplink: this kernel may lack CONFIG_DUMMY.
	must(h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "uplink", MTU: 1400}, PeerName: "uplink-peer"}))
	up, err := h.LinkByName("uplink")
	must(err)
	// A macvlan child stands for the VLAN sub-interface: this kernel may
	// lack 8021q, and both are a link on a parent.
	child := &netlink.Macvlan{LinkAttrs: netlink.LinkAttrs{Name: "child", ParentIndex: up.Attrs().Index}, Mode: netlink.MACVLAN_MODE_BRIDGE}
	must(h.LinkAdd(child))
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br100"}}
	must(h.LinkAdd(br))
	must(h.LinkSetMaster(child, br))
	for _, l := range []netlink.Link{up, child, br} {
		must(h.LinkSetUp(l))
	}
	must(h.AddrAdd(br, &netlink.Addr{IPNet: &net.IPNet{IP: net.IPv4(203, 0, 113, 2), Mask: net.CIDRMask(24, 32)}}))
	must(h.RouteAdd(&netlink.Route{LinkIndex: br.Attrs().Index, Dst: &net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}, Gw: net.IPv4(203, 0, 113, 1)}))

	drv, err := evidence.ReadDriver(ns.Path, "uplink")
	must(err)
	if drv.Name != "veth" {
		t.Errorf("uplink's driver: %+v; want veth, as ethtool -i says", drv)
	}
	if _, err := evidence.ReadDriver(ns.Path, "no-such-link"); err == nil {
		t.Error("a link the namespace lacks has a driver")
	}

	links, err := evidence.ReadLinks(h)
	must(err)
	if c := links["child"]; c.Kind != "macvlan" || c.Master != "br100" || c.Parent != "uplink" || len(c.Addrs) != 0 || c.MTU != 1400 {
		t.Errorf("child: %+v; want a macvlan on uplink, port of br100, MTU 1400, no address", c)
	}
	if b := links["br100"]; b.Kind != "bridge" || len(b.Addrs) != 1 || b.Addrs[0] != netip.MustParsePrefix("203.0.113.2/24") {
		t.Errorf("br100: %+v; want a bridge with 203.0.113.2/24 alone", b)
	}
	routes, err := evidence.ReadRoutes(h)
	must(err)
	var def []evidence.Route
	for _, r := range routes {
		if r.Dst == "default" {
			def = append(def, r)
		}
	}
	if len(def) != 1 || def[0].Dev != "br100" || def[0].Via != netip.MustParseAddr("203.0.113.1") {
		t.Errorf("default routes %+v; want one via 203.0.113.1 on br100 (all: %+v)", def, routes)
	}
}
