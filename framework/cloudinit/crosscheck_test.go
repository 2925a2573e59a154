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
	"bufio"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
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
// (framework/platform/cluster/render.go, withConsoleLogin): the real
// cloud-init must accept it too.
const consoleLogin = "# Added by the conformance suite: a password for the serial console.\npassword: secret\nchpasswd:\n  expire: false\n"

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
		"guide+console-login":               guide + consoleLogin,
		"VLAN-07/default-route-on-vlan-nic": defaultRouteOnVLAN(t, guide) + consoleLogin,
		"subset:mtu+gateway4+metric-route":  mtuAndRoutes(guide),
	}
	for _, n := range []int{1, 2, 10, 20, 31} {
		a := netip.MustParseAddr("203.0.113.10")
		for i := 0; i < n; i++ {
			a = a.Next()
		}
		cases[fmt.Sprintf("spec-address+%d", n)] = fixtures.CloudInit(a.String()+"/24") + consoleLogin
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

// netplanRoot is the Debian root with netplan.io and cloud-init, or a skip
// (a fatal error when VCF_NETPLAN_REQUIRED is set, as `make netplan-check` does).
func netplanRoot(t *testing.T) string {
	root := os.Getenv("VCF_NETPLAN_ROOT")
	skip := t.Skipf
	if os.Getenv("VCF_NETPLAN_REQUIRED") != "" {
		skip = t.Fatalf
	}
	if root == "" {
		skip("VCF_NETPLAN_ROOT unset: run `make netplan-check` (builds the Debian root)")
	}
	if os.Geteuid() != 0 {
		skip("needs root (chroot, a scratch network namespace)")
	}
	if _, err := os.Stat(filepath.Join(root, "usr/sbin/netplan")); err != nil {
		t.Fatalf("VCF_NETPLAN_ROOT=%s has no netplan: %v", root, err)
	}
	return root
}

// inRoot runs a command chrooted into root, in a mount namespace of its own
// with /dev/null, /dev/urandom and /proc there (the root has no /dev; nothing
// mounted leaks to the host).
func inRoot(t *testing.T, root string, args ...string) (string, error) {
	t.Helper()
	script := `set -e; r=$1; shift; mkdir -p "$r/dev" "$r/proc"
for d in null zero urandom random; do [ -e "$r/dev/$d" ] || : >"$r/dev/$d"; mount --bind "/dev/$d" "$r/dev/$d"; done
mount -t proc proc "$r/proc"
exec chroot "$r" "$@"`
	cmd := exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "--pid", "--fork", "sh", "-c", script, "sh", root}, args...)...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "HOME=/root"}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// writeFilesPy writes the userData's write_files under a prefix with
// cloud-init's own module (decoding, permissions), as the guest would.
const writeFilesPy = `
import sys, yaml
from cloudinit.config import cc_write_files
ud, prefix = sys.argv[1], sys.argv[2]
cfg = yaml.safe_load(open(ud))
files = [dict(f, path=prefix + f["path"]) for f in cfg.get("write_files", []) if not f.get("defer")]
cc_write_files.write_files("write_files", files, "root:root")
runs = any("netplan apply" in (c if isinstance(c, str) else " ".join(c)) for c in cfg.get("runcmd", []))
print("netplan-apply" if runs else "no-netplan-apply")
`

// render feeds ud to the real cloud-init (schema, write_files) and the real
// `netplan generate`, and reads the systemd-networkd files it wrote.
func render(t *testing.T, root, ud string) map[string]netState {
	t.Helper()
	dir, err := os.MkdirTemp(filepath.Join(root, "tmp"), "xcheck-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	in := "/tmp/" + filepath.Base(dir) // the same directory, seen from the chroot
	if err := os.WriteFile(filepath.Join(dir, "user-data"), []byte(ud), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := inRoot(t, root, "cloud-init", "schema", "--config-file", in+"/user-data")
	if err != nil || !strings.Contains(out, "Valid cloud-config") {
		t.Fatalf("cloud-init schema rejects the userData (%v):\n%s\n--- userData ---\n%s", err, out, ud)
	}
	if err := os.WriteFile(filepath.Join(dir, "wf.py"), []byte(writeFilesPy), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = inRoot(t, root, "python3", in+"/wf.py", in+"/user-data", in+"/tree")
	if err != nil {
		t.Fatalf("cloud-init's write_files: %v\n%s", err, out)
	}
	if !strings.Contains(out, "netplan-apply") || strings.Contains(out, "no-netplan-apply") {
		t.Fatalf("the userData's runcmd does not run netplan apply: the guest would not apply its file until a reboot")
	}
	if out, err = inRoot(t, root, "netplan", "generate", "--root-dir", in+"/tree"); err != nil {
		t.Fatalf("netplan generate: %v\n%s", err, out)
	}
	st, err := readNetworkd(filepath.Join(dir, "tree/run/systemd/network"))
	if err != nil {
		t.Fatal(err)
	}
	if len(st) == 0 {
		t.Fatal("netplan generate rendered no systemd-networkd configuration")
	}
	return st
}

// readNetworkd reads netplan's *.network and *.link files (systemd.network(5),
// systemd.link(5)) into netState. A key the comparison does not cover is an
// error, so a rendering the suite cannot mirror is not silently passed.
func readNetworkd(dir string) (map[string]netState, error) {
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	st := map[string]netState{}
	linkMTU := map[string]int{}
	for _, f := range files {
		ext := filepath.Ext(f)
		if ext != ".network" && ext != ".link" {
			return nil, fmt.Errorf("%s: netplan rendered a file the check does not read", filepath.Base(f))
		}
		secs, err := parseUnit(f)
		if err != nil {
			return nil, err
		}
		var name string
		var s netState
		for _, sec := range secs {
			for _, kv := range sec.kvs {
				k, v := kv[0], kv[1]
				switch sec.name + "." + k {
				case "Match.Name", "Match.OriginalName":
					name = v
				case "Link.MTUBytes":
					n, err := strconv.Atoi(v)
					if err != nil {
						return nil, fmt.Errorf("%s: MTUBytes=%s", f, v)
					}
					s.MTU = n
				case "Network.Address":
					s.Addresses = append(s.Addresses, v)
				case "Network.Gateway":
					s.Routes = append(s.Routes, route(v, "", 0))
				case "Network.LinkLocalAddressing", "Network.ConfigureWithoutCarrier",
					"Link.NamePolicy", "Link.WakeOnLan":
					// IPv6 link-local (the kernel does it in the netns too), and
					// the link-level defaults netplan always writes.
				case "Route.Destination", "Route.Gateway", "Route.Metric":
					// read per section below
				default:
					return nil, fmt.Errorf("%s: [%s] %s=%s: the cross-check does not compare it (extend it)", filepath.Base(f), sec.name, k, v)
				}
			}
			if sec.name == "Route" {
				m, _ := strconv.Atoi(sec.get("Metric"))
				s.Routes = append(s.Routes, route(sec.get("Gateway"), sec.get("Destination"), m))
			}
		}
		if name == "" {
			return nil, fmt.Errorf("%s: no [Match] Name", filepath.Base(f))
		}
		if ext == ".link" {
			linkMTU[name] = s.MTU
			continue
		}
		sort.Strings(s.Addresses)
		sort.Strings(s.Routes)
		st[name] = s
	}
	for n, m := range linkMTU {
		if s, ok := st[n]; ok && m != 0 {
			s.MTU = m
			st[n] = s
		}
	}
	return st, nil
}

type section struct {
	name string
	kvs  [][2]string
}

func (s section) get(k string) string {
	for _, kv := range s.kvs {
		if kv[0] == k {
			return kv[1]
		}
	}
	return ""
}

func parseUnit(path string) ([]section, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var secs []section
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		switch {
		case l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, ";"):
		case strings.HasPrefix(l, "[") && strings.HasSuffix(l, "]"):
			secs = append(secs, section{name: l[1 : len(l)-1]})
		default:
			k, v, ok := strings.Cut(l, "=")
			if !ok || len(secs) == 0 {
				return nil, fmt.Errorf("%s: bad line %q", path, l)
			}
			secs[len(secs)-1].kvs = append(secs[len(secs)-1].kvs, [2]string{strings.TrimSpace(k), strings.TrimSpace(v)})
		}
	}
	return secs, sc.Err()
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
