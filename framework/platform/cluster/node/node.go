// Package node is a Kubernetes node of the cluster tier. In a kind cluster
// it is a node container: its network namespace and file system are reached
// from the host through /proc/<pid> of its init process. On an existing
// cluster the suite has no such access: only what the API shows, and what
// a node agent on it observes (framework/platform/cluster/nodeagent).
package node

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/nodenet"
	"github.com/cozystack/vlan-conformance/framework/platform"
)

// Node is the cluster tier's platform.Node: a kind node container reached
// through its init process (Cabled), or an existing cluster's node known by
// name only (Named). The lab tier's is platform/lab's node.
type Node struct {
	name string
	pid  int               // 0: not reachable from here (an existing cluster)
	fab  *fabric.NodeNetns // the guide's step 1 in this node (kind only)
	addr netip.Prefix
	// agent makes nodenet's observations on a node the suite cannot enter
	// (an existing cluster's, with --node-agent-image), and captures there
	// (tap); parent and uplink are step 1's links as it found them
	// (Observed).
	agent          nodenet.Agent
	tap            evidence.Tap
	parent, uplink string
}

var _ platform.Node = (*Node)(nil)

// Cabled is a kind node container the cabling built the guide's step 1 in.
func Cabled(pid int, nn *fabric.NodeNetns) *Node {
	return &Node{name: nn.Spec.Name, pid: pid, fab: nn, addr: nn.Spec.Address}
}

// Named is a node known only by name (an existing cluster's).
func Named(name string) *Node { return &Node{name: name} }

func (n *Node) Name() string          { return n.name }
func (n *Node) CNIBinDir() string     { return "/opt/cni/bin" }
func (n *Node) Address() netip.Prefix { return n.addr }

// Reachable reports whether the host reaches the node's namespaces (a kind
// node container).
func (n *Node) Reachable() bool { return n.pid != 0 }

// NetnsPath is the node's network namespace as the host sees it.
func (n *Node) NetnsPath() string { return Netns(n.pid) }

// Netns is the network namespace of a host process.
func Netns(pid int) string { return fmt.Sprintf("/proc/%d/ns/net", pid) }

// HostPath is a path of the node's file system as the host sees it.
func (n *Node) HostPath(p string) string {
	return filepath.Join(fmt.Sprintf("/proc/%d/root", n.pid), p)
}

func (n *Node) ParentPoint() evidence.Point {
	if n.pid == 0 && n.tap != nil && n.parent != "" {
		return evidence.Point{Iface: n.parent, Via: n.tap, Label: n.parent + " on " + n.name + " (its agent's capture)"}
	}
	if n.pid == 0 {
		return evidence.Point{Label: "uplink.100 on " + n.name + " (not observable)"}
	}
	return evidence.Point{Netns: n.NetnsPath(), Iface: n.fab.Parent, Label: n.fab.Parent + " on " + n.name}
}

// WithoutPlugin hides a plugin of the node's /opt/cni/bin under another
// name in the same directory until restore.
func (n *Node) WithoutPlugin(_ context.Context, plugin string) (func() error, error) {
	if n.pid == 0 {
		return nil, evidence.NotObservableOn("removing a plugin", n.name)
	}
	p := n.HostPath(filepath.Join(n.CNIBinDir(), plugin))
	hidden := n.HostPath(filepath.Join(n.CNIBinDir(), ".vcf-hidden-"+plugin))
	if err := os.Rename(p, hidden); err != nil {
		return nil, err
	}
	return func() error { return os.Rename(hidden, p) }, nil
}

// Through gives the node the agent running on it.
func (n *Node) Through(a nodenet.Agent) {
	n.agent = a
	n.tap, _ = a.(evidence.Tap)
}

// Observed records what the agent found of step 1: br100's VLAN port and
// the uplink under it, and br100's address where the node's was unknown.
func (n *Node) Observed(links map[string]evidence.Link) error {
	if br, ok := links[fabric.BridgeName]; ok && !n.addr.IsValid() {
		for _, a := range br.Addrs {
			if a.Addr().Is4() {
				n.addr = a
				break
			}
		}
	}
	parent, uplink, err := nodenet.Step1Links(links)
	if err != nil {
		return fmt.Errorf("node %s: %w", n.name, err)
	}
	n.parent, n.uplink = parent, uplink
	return nil
}

// Uplink is where the node's VLAN frames leave it, seen through its agent
// (an existing cluster's node: the node's side of the vendor's switch
// port); ok false without one.
func (n *Node) Uplink() (at evidence.Point, ok bool) {
	if n.tap == nil || n.uplink == "" {
		return evidence.Point{}, false
	}
	return evidence.Point{Iface: n.uplink, Via: n.tap, Label: "uplink " + n.uplink + " of " + n.name + " (its agent's capture)"}, true
}

// Agent is the node agent on the node (nil: none, or a kind node the
// suite enters itself).
func (n *Node) Agent() nodenet.Agent { return n.agent }

// Step1 is the guide's step 1 in the node (nil on an existing cluster).
func (n *Node) Step1() *fabric.NodeNetns { return n.fab }
