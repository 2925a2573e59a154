package cloudinit

// The real side of the netplan cross-check (crosscheck_test.go): Debian's
// cloud-init and `netplan generate` run in the chroot, and the
// systemd-networkd files they render read back into netState. Kept apart
// from the suite's side (apply) and the comparison, which stay there.

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

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
