package workload

import (
	"fmt"
	"net"
	"regexp"
	"strings"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/console"
)

// vmGuest is a KubeVirt VM seen through its serial console. Its VLAN NIC is
// the one whose MAC the VMI status gives for the NAD's network, found in
// the guest by that MAC, never by name.
type vmGuest struct {
	spec       platform.VMSpec
	node       platform.Node
	vmName     string
	status     platform.VMStatus
	vlanIface  string
	podIface   string // the launcher pod's interface for the NAD
	launcher   string // the launcher pod's UID
	con        *console.Console
	serialLog  string // path of the raw serial log
	attachment platform.Attachment
	ownCluster bool // the suite built the cluster: its nodes' netns are the suite's to see
}

func (g *vmGuest) Name() string                    { return g.spec.Name }
func (g *vmGuest) Node() platform.Node             { return g.node }
func (g *vmGuest) MAC() net.HardwareAddr           { return g.status.VLANMAC }
func (g *vmGuest) VLANInterface() string           { return g.vlanIface }
func (g *vmGuest) Attachment() platform.Attachment { return g.attachment }
func (g *vmGuest) Spec() platform.VMSpec           { return g.spec }

// In is the guest's serial console: a shell in its OS (none before its
// login).
func (g *vmGuest) In() platform.Inside {
	if g.con == nil {
		return platform.Inside{}
	}
	return platform.Inside{Shell: g.con}
}

// VLANPoint is the launcher pod's tap for the VLAN NIC: it carries exactly
// the guest's frames, both ways, and the pod's netns is the host's to open
// (a kind node's processes are the host's). KubeVirt names the tap after
// the pod interface (GenerateTapDeviceName: "tap" + the name after "pod"
// or "net").
func (g *vmGuest) VLANPoint() evidence.Point {
	label := "guest " + g.spec.Name + " " + g.vlanIface + ", on its launcher's tap"
	ns, err := podNetns(g.launcher)
	if err != nil || len(g.podIface) < 4 {
		why := fmt.Errorf("launcher pod %q, pod interface %q: %v", g.launcher, g.podIface, err)
		if !g.ownCluster {
			why = fmt.Errorf("%w: %v", evidence.ErrNotObservable, why)
		}
		// On a cluster the suite built, the launcher's netns is a node's
		// and must be found: not finding it fails the spec.
		return evidence.Point{Label: label, Err: why}
	}
	return evidence.Point{Netns: ns, Iface: "tap" + g.podIface[3:], Label: label}
}

// ifaceByMAC finds the guest's interface name for mac in `ip -o link`.
func ifaceByMAC(ipLink string, mac net.HardwareAddr) (string, error) {
	re := regexp.MustCompile(`^\d+:\s+([^:@\s]+)[:@].*link/ether\s+([0-9a-f:]{17})`)
	for _, l := range strings.Split(ipLink, "\n") {
		if m := re.FindStringSubmatch(strings.TrimSpace(l)); m != nil && strings.EqualFold(m[2], mac.String()) {
			return m[1], nil
		}
	}
	return "", fmt.Errorf("no interface with MAC %s in the guest:\n%s", mac, ipLink)
}
