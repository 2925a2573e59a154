package node

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/cozystack/vlan-conformance/framework/atomicfile"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// PTPPodNetwork gives a node of a cluster without a default CNI a pod
// network: a ptp conflist over its podCIDR, and a route to every other
// node's podCIDR via that node. pid is the node container's.
func PTPPodNetwork(ctx context.Context, kube kubernetes.Interface, name string, pid int) error {
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
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
	dir := fmt.Sprintf("/proc/%d/root/etc/cni/net.d", pid)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, "10-vcf-ptp.conflist"), strings.NewReader(conf+"\n"), 0o644); err != nil {
		return err
	}
	h, err := netns.GetFromPath(Netns(pid))
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
