package cloudinit

// The netplan cross-check (issue 16): the lab's guests and the cluster
// tier's pods cannot run systemd, so framework/cloudinit applies the
// userData's netplan itself. Here every userData the specs and controls use
// also goes through Debian's real cloud-init (schema validation, its own
// write_files module) and real `netplan generate`, in a root built by
// images/guest-debian/netplan-root.sh; the addresses, routes and MTU that
// netplan renders for systemd-networkd must equal what Apply configures in
// a scratch network namespace. `make netplan-check` runs it.

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cozystack/vlan-conformance/fixtures"
)

// netState is what the cross-check compares, per interface name.
type netState struct {
	Addresses []string // CIDR, sorted
	Routes    []string // "DST via GW metric N", sorted
	MTU       int      // 0: left as it was
}

// consoleLogin is what the cluster tier appends to every userData
// (WithConsolePassword): the real cloud-init must accept it too.
func consoleLogin(userData string) string { return WithConsolePassword(userData, "secret") }

// defaultRouteOnVLAN is the userData of control VLAN-07/default-route-on-vlan-nic:
// the very edit the lab's subject makes (AddDefaultRoute), not a copy of it.
func defaultRouteOnVLAN(t *testing.T, ud string) string {
	t.Helper()
	out, err := AddDefaultRoute(ud, "203.0.113.1")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// mtuAndRoutes exercises the rest of the subset framework/cloudinit claims
// (mtu, routes with a metric, gateway4) on the guide's file.
func mtuAndRoutes(ud string) string {
	return strings.Replace(ud, "            addresses:", "            mtu: 1400\n            gateway4: 203.0.113.1\n            routes:\n              - to: 198.51.100.0/24\n                via: 203.0.113.254\n                metric: 100\n            addresses:", 1)
}

// crossCheckCases: the guide's userData at addresses of the kind the specs
// give their guests (framework/addresses: --guest-address and up, a block
// per tenant), with and without the cluster tier's console login, and each
// control's variant of it.
func crossCheckCases(t *testing.T) map[string]string {
	guide := fixtures.CloudInit("203.0.113.10/24")
	cases := map[string]string{
		"guide":                             guide,
		"guide+console-login":               consoleLogin(guide),
		"VLAN-07/default-route-on-vlan-nic": consoleLogin(defaultRouteOnVLAN(t, guide)),
		"subset:mtu+gateway4+metric-route":  mtuAndRoutes(guide),
	}
	for _, n := range []int{1, 2, 10, 20, 31} {
		a := netip.MustParseAddr("203.0.113.10")
		for i := 0; i < n; i++ {
			a = a.Next()
		}
		cases[fmt.Sprintf("spec-address+%d", n)] = consoleLogin(fixtures.CloudInit(a.String() + "/24"))
	}
	return cases
}

func TestNetplanCrossCheck(t *testing.T) {
	root := netplanRoot(t)
	for name, ud := range crossCheckCases(t) {
		t.Run(strings.ReplaceAll(name, "/", "_"), func(t *testing.T) {
			rendered := render(t, root, ud)
			applied := apply(t, ud, rendered)
			if diffs := compareStates(rendered, applied); len(diffs) > 0 {
				t.Errorf("real netplan and framework/cloudinit disagree:\n  %s", strings.Join(diffs, "\n  "))
			}
			t.Logf("netplan rendered %+v; framework/cloudinit applied the same", rendered)
		})
	}
}

// TestNetplanCrossCheckDetects shows that the check has teeth: when what
// the guest really renders differs from what the suite applies (a control
// changed the userData on one side only), the check fails and names the
// field.
func TestNetplanCrossCheckDetects(t *testing.T) {
	root := netplanRoot(t)
	guide := fixtures.CloudInit("203.0.113.10/24")
	for _, c := range []struct{ name, real, field string }{
		{"VLAN-07/default-route-on-vlan-nic", defaultRouteOnVLAN(t, guide), "routes"},
		{"mtu", mtuAndRoutes(guide), "mtu"},
		{"address", fixtures.CloudInit("203.0.113.11/24"), "addresses"},
	} {
		rendered := render(t, root, c.real)
		applied := apply(t, guide, rendered)
		diffs := compareStates(rendered, applied)
		found := false
		for _, d := range diffs {
			found = found || strings.Contains(d, "enp2s0 "+c.field+":")
		}
		if !found {
			t.Errorf("%s: the real guest's network differs from the guide's, but the check reported %q, not the field %s", c.name, diffs, c.field)
		}
		t.Logf("%s: detected: %s", c.name, strings.Join(diffs, "; "))
	}
}

// route formats a route the same way on both sides; an empty or "0.0.0.0/0"
// destination is the default route.
func route(gw, dst string, metric int) string {
	if dst == "" || dst == "default" {
		dst = "0.0.0.0/0"
	}
	if gw == "" {
		gw = "-"
	}
	return fmt.Sprintf("%s via %s metric %d", dst, gw, metric)
}

// apply runs framework/cloudinit's Apply on ud in a scratch network
// namespace holding the pod NIC enp1s0 and one NIC per interface netplan
// configured, and reads back what it set.
func apply(t *testing.T, ud string, like map[string]netState) map[string]netState {
	t.Helper()
	got := map[string]netState{}
	inNetns(t, func(h *netlink.Handle) {
		names := []string{"enp1s0"}
		for n := range like {
			if n != "enp1s0" {
				names = append(names, n)
			}
		}
		const baseMTU = 1500
		for i, n := range names {
			la := netlink.NewLinkAttrs()
			la.Name, la.MTU = n, baseMTU
			if err := h.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: fmt.Sprintf("peer%d", i)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := Apply(h, ud); err != nil {
			t.Fatalf("framework/cloudinit.Apply: %v", err)
		}
		for _, n := range names {
			l, err := h.LinkByName(n)
			if err != nil {
				t.Fatal(err)
			}
			var s netState
			if m := l.Attrs().MTU; m != baseMTU {
				s.MTU = m
			}
			addrs, _ := h.AddrList(l, netlink.FAMILY_V4)
			a6, _ := h.AddrList(l, netlink.FAMILY_V6)
			for _, a := range append(addrs, a6...) {
				if a.IP.IsLinkLocalUnicast() {
					continue
				}
				s.Addresses = append(s.Addresses, a.IPNet.String())
			}
			rs, _ := h.RouteList(l, netlink.FAMILY_ALL)
			for _, r := range rs {
				if r.Protocol == unix.RTPROT_KERNEL {
					continue // the connected route of an address: the kernel's, on both sides
				}
				dst := "0.0.0.0/0"
				if r.Dst != nil {
					dst = r.Dst.String()
				}
				gw := ""
				if r.Gw != nil {
					gw = r.Gw.String()
				}
				s.Routes = append(s.Routes, route(gw, dst, r.Priority))
			}
			sort.Strings(s.Addresses)
			sort.Strings(s.Routes)
			if len(s.Addresses)+len(s.Routes) > 0 || s.MTU != 0 {
				got[n] = s
			}
		}
	})
	return got
}

// compareStates lists the differences, one line per interface and field.
func compareStates(rendered, applied map[string]netState) []string {
	names := map[string]bool{}
	for n := range rendered {
		names[n] = true
	}
	for n := range applied {
		names[n] = true
	}
	var sorted []string
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	var diffs []string
	for _, n := range sorted {
		r, a := rendered[n], applied[n]
		if !equalPrefixes(r.Addresses, a.Addresses) {
			diffs = append(diffs, fmt.Sprintf("%s addresses: netplan %v, framework/cloudinit %v", n, r.Addresses, a.Addresses))
		}
		if strings.Join(r.Routes, ",") != strings.Join(a.Routes, ",") {
			diffs = append(diffs, fmt.Sprintf("%s routes: netplan %v, framework/cloudinit %v", n, r.Routes, a.Routes))
		}
		if r.MTU != a.MTU {
			diffs = append(diffs, fmt.Sprintf("%s mtu: netplan %d, framework/cloudinit %d (0: unchanged)", n, r.MTU, a.MTU))
		}
	}
	return diffs
}

// equalPrefixes compares address lists as prefixes (netplan may write an
// address in another spelling than the kernel reports it).
func equalPrefixes(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		pa, ea := netip.ParsePrefix(a[i])
		pb, eb := netip.ParsePrefix(b[i])
		if ea != nil || eb != nil || pa != pb {
			return false
		}
	}
	return true
}
