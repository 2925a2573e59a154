package fabric

import (
	"fmt"
	"net"
	"sort"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/cozystack/vlan-conformance/framework/dump"
)

// HostSnapshot describes this namespace's links, addresses and routes (not
// counters), so a run can prove it left the host as it found it.
func HostSnapshot() (string, error) {
	links, err := dump.Consistent(netlink.LinkList)
	if err != nil {
		return "", err
	}
	var lines []string
	for _, l := range links {
		a := l.Attrs()
		// Carrier (running) and IPv6 link-local state follow the wire, not us.
		lines = append(lines, fmt.Sprintf("link %s type %s mtu %d flags %s master %d mac %s", a.Name, l.Type(), a.MTU, a.Flags&^net.FlagRunning, a.MasterIndex, a.HardwareAddr))
		addrs, err := dump.Consistent(func() ([]netlink.Addr, error) { return netlink.AddrList(l, netlink.FAMILY_ALL) })
		if err != nil {
			return "", err
		}
		for _, ad := range addrs {
			if ad.IP.IsLinkLocalUnicast() {
				continue
			}
			lines = append(lines, fmt.Sprintf("addr %s dev %s", ad.IPNet, a.Name))
		}
	}
	routes, err := dump.Consistent(func() ([]netlink.Route, error) {
		return netlink.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: 0}, netlink.RT_FILTER_TABLE)
	})
	if err != nil {
		return "", err
	}
	for _, r := range routes {
		if r.Dst != nil && (r.Dst.IP.IsLinkLocalUnicast() || r.Dst.IP.IsMulticast()) {
			continue
		}
		lines = append(lines, "route "+r.String())
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n"), nil
}

// DiffSnapshots lists lines only in before ("-") or only in after ("+").
func DiffSnapshots(before, after string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	b, a := in(before), in(after)
	var out []string
	for l := range b {
		if !a[l] {
			out = append(out, "- "+l)
		}
	}
	for l := range a {
		if !b[l] {
			out = append(out, "+ "+l)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}
