// Package cabling is the guide's step 1 on kind nodes: a veth trunk from
// the gateway netns on the host into each node container's network
// namespace (opened through the PID its container runtime reports), and
// inside it uplink -> uplink.100 -> br100, built through netlink by
// framework/fabric as in the lab.
//
//	 host: gateway netns vcf-gw                      kind node container vcf-worker
//	+---------------------------+   veth trunk   +-----------------------------------+
//	| trunk.100 203.0.113.1/24  |<==============>| uplink -> uplink.100 -> br100 .2  |
//	| trunk.200 198.51.100.1/24 |   802.1Q       +-----------------------------------+
//	+---------------------------+ ==============> vcf-worker2: the same, br100 .3
//	                              ==============> vcf-control-plane: uplink.100 .4, no bridge (macvlan)
package cabling

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/cozystack/vlan-conformance/framework/addresses"
	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/gateway"
	"github.com/cozystack/vlan-conformance/framework/kernel"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/node"
)

// Cabling is the trunks of a run and the mode they carry the VLAN in.
type Cabling struct {
	cfg      *config.Config
	fab      *fabric.Fabric
	untagged bool // the trunk carries the VLAN in access mode (why says why)
	why      string
}

var _ platform.AccessTrunk = (*Cabling)(nil)

func New(cfg *config.Config) *Cabling { return &Cabling{cfg: cfg} }

// Untagged reports whether the trunk runs in access mode.
func (c *Cabling) Untagged() (bool, string) { return c.untagged, c.why }

// Mode decides whether the trunk carries the VLAN untagged: kind nodes
// share the host's kernel, and without 8021q there is no uplink.100.
func (c *Cabling) Mode() (untagged bool, why string) {
	switch c.cfg.Cluster.Trunk {
	case "tagged":
		return false, "802.1Q, --trunk=tagged"
	case "untagged":
		return true, "access mode, --trunk=untagged"
	}
	if c.cfg.Cluster.DryRun {
		return false, "802.1Q; --trunk=auto decides at run time: untagged access mode when the kernel lacks 8021q"
	}
	if kernel.Has8021Q() {
		return false, "802.1Q, the kernel has 8021q"
	}
	return true, "access mode: this kernel lacks 8021q (CONFIG_VLAN_8021Q), which kind nodes share"
}

// NodeAddr is the n-th node's address on the VLAN (framework/addresses).
func NodeAddr(subnet netip.Prefix, i int) netip.Prefix { return addresses.Node(subnet, i) }

// StandbyAddr is the standby router's address on the gateway's VLAN
// (framework/addresses).
func StandbyAddr(gw netip.Prefix) netip.Prefix { return addresses.Standby(gw.Masked()) }

// Cable builds the gateway netns on the host and cables every node of
// specs into the netns of its PID in nodes; the cabled nodes replace
// nodes' bridge and macvlan nodes.
// A reused cluster (`make kind-up`, a killed run) may be cabled already: its
// nodes' uplinks and bridges go first, as Down takes them.
func (c *Cabling) Cable(specs []fabric.NodeSpec, gw, otherGW netip.Prefix, untagged bool, nodes *node.Set) (platform.Gateway, error) {
	pids := make([]int, 0, len(specs))
	for i := range specs {
		pid, ok := nodes.PIDs[specs[i].Name]
		if !ok {
			return nil, fmt.Errorf("node %s: no PID from the container runtime", specs[i].Name)
		}
		specs[i].Netns = node.Netns(pid)
		pids = append(pids, pid)
	}
	if err := Down(pids); err != nil {
		return nil, fmt.Errorf("take out an earlier run's cabling: %w", err)
	}
	f, err := fabric.Build(fabric.Spec{VLAN: c.cfg.VLAN, OtherVLAN: c.cfg.OtherVLAN, Gateway: gw, OtherGateway: otherGW, Standby: StandbyAddr(gw), Nodes: specs, Untagged: untagged})
	if err != nil {
		return nil, err
	}
	c.fab = f
	c.untagged = untagged
	g, err := gateway.New(f, c.cfg.ARPProfile, c.cfg.SelectedControl().Timers)
	if err != nil {
		return nil, err
	}
	nodes.Bridge, nodes.Macvlan = nil, nil
	for _, nn := range f.Nodes {
		n := node.Cabled(nodes.PIDs[nn.Spec.Name], nn)
		if nn.Spec.Wiring == fabric.MacvlanParent {
			nodes.Macvlan = n
			continue
		}
		nodes.Bridge = append(nodes.Bridge, n)
	}
	return g, nil
}

// Trunk is where a node's VLAN traffic leaves it: the gateway's switch port.
func (c *Cabling) Trunk(pn platform.Node) evidence.Point {
	if c.fab == nil || c.fab.Gateway == nil {
		return evidence.Point{Label: "trunk of " + pn.Name() + " (not observable: the vendor's switch)"}
	}
	return evidence.Point{Netns: c.fab.Gateway.Path, Iface: fabric.PortName(pn.Name()), Label: "trunk (switch port of " + pn.Name() + ")"}
}

// GatewayNetns is the gateway netns's path ("" when the suite made none).
func (c *Cabling) GatewayNetns() string {
	if c.fab == nil || c.fab.Gateway == nil {
		return ""
	}
	return c.fab.Gateway.Path
}

// Close takes the trunks out: the links in the nodes and the gateway netns.
func (c *Cabling) Close() error {
	if c.fab == nil {
		return nil
	}
	err := c.fab.Destroy()
	c.fab = nil
	return err
}

// Down takes out what an earlier run left in node containers (by PID) and
// on the host.
func Down(pids []int) error {
	var errs []error
	for _, pid := range pids {
		errs = append(errs, fabric.Uncable(node.Netns(pid)))
	}
	return errors.Join(append(errs, fabric.Sweep())...)
}
