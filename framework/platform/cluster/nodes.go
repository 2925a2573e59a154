package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/vlan-conformance/framework/platform"
)

// existingNodes takes the schedulable workers of an existing cluster as its
// VLAN nodes, in name order; their addresses on the VLAN are unknown.
func (c *Cluster) existingNodes(ctx context.Context) error {
	list, err := c.c.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	c.nodes = nil
	for _, n := range list.Items {
		if _, cp := n.Labels["node-role.kubernetes.io/control-plane"]; cp || n.Spec.Unschedulable {
			continue
		}
		c.nodes = append(c.nodes, &node{name: n.Name})
	}
	sort.Slice(c.nodes, func(i, j int) bool { return c.nodes[i].name < c.nodes[j].name })
	if len(c.nodes) == 0 {
		return fmt.Errorf("no schedulable worker node")
	}
	return nil
}

// ptpPodNetwork gives a node of a cluster without a default CNI a pod
// network: a ptp conflist over its podCIDR, and a route to every other
// node's podCIDR via that node.
func (c *Cluster) ptpPodNetwork(ctx context.Context, name string) error {
	nodes, err := c.c.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var self *corev1.Node
	for i := range nodes.Items {
		if nodes.Items[i].Name == name {
			self = &nodes.Items[i]
		}
	}
	if self == nil || self.Spec.PodCIDR == "" {
		return fmt.Errorf("node %s has no podCIDR yet", name)
	}
	conf := fmt.Sprintf(`{"cniVersion":"0.3.1","name":"vcf-pod","plugins":[{"type":"ptp","ipMasq":true,"ipam":{"type":"host-local","ranges":[[{"subnet":%q}]],"routes":[{"dst":"0.0.0.0/0"}]}},{"type":"portmap","capabilities":{"portMappings":true}}]}`, self.Spec.PodCIDR)
	pid := c.pids[name]
	dir := fmt.Sprintf("/proc/%d/root/etc/cni/net.d", pid)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := writeAside(filepath.Join(dir, "10-vcf-ptp.conflist"), strings.NewReader(conf+"\n"), 0o644); err != nil {
		return err
	}
	h, err := netns.GetFromPath(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return err
	}
	defer h.Close()
	nh, err := netlink.NewHandleAt(h, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer nh.Close()
	for _, o := range nodes.Items {
		if o.Name == name || o.Spec.PodCIDR == "" {
			continue
		}
		_, dst, err := net.ParseCIDR(o.Spec.PodCIDR)
		if err != nil {
			return err
		}
		for _, a := range o.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				if ip, err := netip.ParseAddr(a.Address); err == nil && ip.Is4() {
					if err := nh.RouteReplace(&netlink.Route{Dst: dst, Gw: ip.AsSlice()}); err != nil {
						return fmt.Errorf("route %s via %s on %s: %w", dst, ip, name, err)
					}
				}
			}
		}
	}
	return nil
}

// installPlugins is the plain installer: every file of src written next to
// its place in dst, then renamed over it.
func installPlugins(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		f, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		err = writeAside(filepath.Join(dst, e.Name()), f, 0o755)
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func writeAside(path string, r io.Reader, mode os.FileMode) error {
	tmp := filepath.Join(filepath.Dir(path), ".vcf-"+filepath.Base(path)+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// snapshotDir reads a directory's regular files: content hash, mode, mtime.
func snapshotDir(dir string) (map[string]platform.FileState, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]platform.FileState{}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		fi, err := os.Lstat(p)
		if err != nil {
			return nil, err
		}
		st := platform.FileState{Mode: uint32(fi.Mode()), MTime: fi.ModTime(), Size: fi.Size()}
		if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
			st.Inode = sys.Ino
		}
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, err
			}
			sum := sha256.Sum256(b)
			st.SHA256 = hex.EncodeToString(sum[:])
		}
		out[e.Name()] = st
	}
	return out, nil
}

// networkStatus reads Multus's k8s.v1.cni.cncf.io/network-status
// annotation: the IPs and MTU the CNI plugin returned for a network.
func networkStatus(annotation, network string) ([]netip.Prefix, int) {
	var entries []struct {
		Name string   `json:"name"`
		IPs  []string `json:"ips"`
		MTU  int      `json:"mtu"`
	}
	if json.Unmarshal([]byte(annotation), &entries) != nil {
		return nil, 0
	}
	for _, e := range entries {
		if e.Name != network {
			continue
		}
		var ps []netip.Prefix
		for _, s := range e.IPs {
			if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
				ps = append(ps, netip.PrefixFrom(a, 32))
			}
		}
		return ps, e.MTU
	}
	return nil, 0
}
