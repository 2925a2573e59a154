package evidence

import (
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cozystack/vlan-conformance/framework/dump"
	"github.com/cozystack/vlan-conformance/framework/nsexec"
)

// Link is one interface of a namespace as netlink reports it: what the
// guide's step 1 is made of (CLAIMS.md NODE-01..03).
type Link struct {
	Name   string
	Kind   string // netlink's link type: "bridge", "vlan", "veth", "dummy", ...
	MTU    int
	Master string // the bridge it is a port of; "" if none
	// Parent is the link a VLAN sub-interface (or macvlan child) sits on,
	// in the same namespace; "" for other kinds.
	Parent string
	VLANID int            // a VLAN sub-interface's id; 0 for other kinds
	Addrs  []netip.Prefix // its IPv4 and global IPv6 addresses
}

// Driver is what `ethtool -i` says of a link: the driver behind it, its
// version, the NIC's firmware and bus address ("" where the driver has
// none, as a veth). A certification's product file names the uplink's.
type Driver struct {
	Name, Version, Firmware, Bus string
}

// ReadDriver asks the kernel for iface's driver information in the
// namespace at netns (ETHTOOL_GDRVINFO, read-only; "" = this process's).
func ReadDriver(netns, iface string) (Driver, error) {
	var d Driver
	err := nsexec.Do(netns, func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		info, err := unix.IoctlGetEthtoolDrvinfo(fd, iface)
		if err != nil {
			return err
		}
		d = Driver{
			Name:     unix.ByteSliceToString(info.Driver[:]),
			Version:  unix.ByteSliceToString(info.Version[:]),
			Firmware: unix.ByteSliceToString(info.Fw_version[:]),
			Bus:      unix.ByteSliceToString(info.Bus_info[:]),
		}
		return nil
	})
	if err != nil {
		return d, fmt.Errorf("driver of %s: %w", iface, err)
	}
	return d, nil
}

func (d Driver) String() string {
	or := func(s string) string {
		if s == "" {
			return "none"
		}
		return s
	}
	return fmt.Sprintf("driver %s (version %s), firmware %s, bus %s", d.Name, or(d.Version), or(d.Firmware), or(d.Bus))
}

// Route is a route of the namespace's main IPv4 table.
type Route struct {
	Dst string     // "default" or the prefix
	Dev string     // the link it leaves by
	Via netip.Addr // its gateway; invalid for a route on the link
}

// ReadLinks is every link of the namespace h is in, by name.
func ReadLinks(h *netlink.Handle) (map[string]Link, error) {
	links, err := dump.Consistent(h.LinkList)
	if err != nil {
		return nil, err
	}
	names := linkNames(links)
	out := map[string]Link{}
	for _, l := range links {
		a := l.Attrs()
		k := Link{Name: a.Name, Kind: l.Type(), MTU: a.MTU, Master: names[a.MasterIndex]}
		switch v := l.(type) {
		case *netlink.Vlan:
			k.VLANID, k.Parent = v.VlanId, names[a.ParentIndex]
		case *netlink.Macvlan:
			k.Parent = names[a.ParentIndex]
		}
		addrs, err := dump.Consistent(func() ([]netlink.Addr, error) { return h.AddrList(l, netlink.FAMILY_ALL) })
		if err != nil {
			return nil, fmt.Errorf("addresses of %s: %w", a.Name, err)
		}
		for _, ad := range addrs {
			ip, ok := netip.AddrFromSlice(ad.IP)
			ip = ip.Unmap()
			if !ok || ip.Is6() && !ip.IsGlobalUnicast() {
				continue // an IPv6 link-local address is every link's own
			}
			bits, _ := ad.Mask.Size()
			k.Addrs = append(k.Addrs, netip.PrefixFrom(ip, bits))
		}
		out[a.Name] = k
	}
	return out, nil
}

// linkNames is each link's name by its index.
func linkNames(links []netlink.Link) map[int]string {
	names := map[int]string{}
	for _, l := range links {
		names[l.Attrs().Index] = l.Attrs().Name
	}
	return names
}

// ReadRoutes is the main IPv4 table of the namespace h is in.
func ReadRoutes(h *netlink.Handle) ([]Route, error) {
	links, err := dump.Consistent(h.LinkList)
	if err != nil {
		return nil, err
	}
	names := linkNames(links)
	routes, err := dump.Consistent(func() ([]netlink.Route, error) { return h.RouteList(nil, netlink.FAMILY_V4) })
	if err != nil {
		return nil, err
	}
	var out []Route
	for _, r := range routes {
		rt := Route{Dst: "default", Dev: names[r.LinkIndex]}
		if r.Dst != nil {
			if ones, _ := r.Dst.Mask.Size(); ones > 0 || !r.Dst.IP.IsUnspecified() {
				rt.Dst = r.Dst.String()
			}
		}
		if gw, ok := netip.AddrFromSlice(r.Gw); ok {
			rt.Via = gw.Unmap()
		}
		out = append(out, rt)
	}
	return out, nil
}
