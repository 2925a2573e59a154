// Package nsguest is a guest seen from inside its network namespace: what
// the lab's VM stand-ins and the cluster tier's pod workloads have in
// common. Every observation goes through netlink or a socket opened in
// that namespace (framework/probe), never through a shell in it.
package nsguest

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/probe"
)

// Inside implements the in-namespace half of platform.Guest.
type Inside struct {
	Netns  string          // path of the guest's network namespace
	Handle *netlink.Handle // netlink handle into it
	NIC    string          // the VLAN NIC's name in it
	Label  string          // how evidence names the guest ("guest vm-a")
}

func (g *Inside) VLANInterface() string { return g.NIC }

func (g *Inside) VLANPoint() evidence.Point {
	return evidence.Point{Netns: g.Netns, Iface: g.NIC, Label: g.Label + " " + g.NIC}
}

func (g *Inside) LinkMAC(_ context.Context, iface string) (net.HardwareAddr, error) {
	l, err := g.Handle.LinkByName(iface)
	if err != nil {
		return nil, err
	}
	return l.Attrs().HardwareAddr, nil
}

func (g *Inside) Addresses(_ context.Context, iface string) ([]netip.Prefix, error) {
	l, err := g.Handle.LinkByName(iface)
	if err != nil {
		return nil, err
	}
	addrs, err := g.Handle.AddrList(l, netlink.FAMILY_V4)
	if err != nil {
		return nil, err
	}
	var out []netip.Prefix
	for _, a := range addrs {
		out = append(out, PrefixOf(a.IPNet))
	}
	return out, nil
}

func (g *Inside) MTU(_ context.Context, iface string) (int, error) {
	l, err := g.Handle.LinkByName(iface)
	if err != nil {
		return 0, err
	}
	return l.Attrs().MTU, nil
}

func (g *Inside) Routes(_ context.Context) ([]platform.Route, error) {
	rs, err := g.Handle.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		return nil, err
	}
	var out []platform.Route
	for _, r := range rs {
		pr := platform.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Scope: r.Scope.String()}
		if r.Dst != nil {
			pr.Dst = PrefixOf(r.Dst)
		}
		if gw, ok := netip.AddrFromSlice(r.Gw); ok {
			pr.Gw = gw.Unmap()
		}
		if l, err := g.Handle.LinkByIndex(r.LinkIndex); err == nil {
			pr.Iface = l.Attrs().Name
		}
		out = append(out, pr)
	}
	return out, nil
}

func (g *Inside) Ping(ctx context.Context, dst netip.Addr, opts ...probe.PingOption) (probe.PingResult, error) {
	return probe.Ping(ctx, g.Netns, dst, opts...)
}

func (g *Inside) Dial(ctx context.Context, dst netip.AddrPort, timeout time.Duration) (probe.DialResult, error) {
	return probe.Dial(ctx, g.Netns, dst, timeout)
}

// VLANAddr is the first IPv4 address on the VLAN NIC.
func (g *Inside) VLANAddr() (netip.Addr, error) {
	addrs, err := g.Addresses(context.Background(), g.NIC)
	if err != nil || len(addrs) == 0 {
		return netip.Addr{}, fmt.Errorf("%s has no address on %s (%v)", g.Label, g.NIC, err)
	}
	return addrs[0].Addr(), nil
}

func (g *Inside) ARPProbe(_ context.Context, ip netip.Addr, timeout time.Duration) (net.HardwareAddr, error) {
	src, err := g.VLANAddr()
	if err != nil {
		return nil, err
	}
	return probe.ARPProbe(g.Netns, g.NIC, src, ip, timeout)
}

func (g *Inside) SpoofARP(_ context.Context, src net.HardwareAddr, target netip.Addr) error {
	sender, err := g.VLANAddr()
	if err != nil {
		return err
	}
	return probe.SpoofedARP(g.Netns, g.NIC, src, sender, target)
}

// Announce sends a gratuitous ARP for the VLAN address.
func (g *Inside) Announce() error {
	src, err := g.VLANAddr()
	if err != nil {
		return err
	}
	return probe.GratuitousARP(g.Netns, g.NIC, src)
}

func (g *Inside) Neighbor(_ context.Context, ip netip.Addr) (evidence.Neighbor, error) {
	return evidence.ReadNeighbor(g.Handle, g.NIC, ip)
}

// PrefixOf converts a netlink address to a prefix.
func PrefixOf(n *net.IPNet) netip.Prefix {
	a, _ := netip.AddrFromSlice(n.IP)
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), ones)
}
