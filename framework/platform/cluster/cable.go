package cluster

import (
	"fmt"
	"net/netip"

	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/gateway"
)

// cable builds the gateway netns on the host and cables every worker: the
// node side of each trunk is the node container's network namespace,
// opened through the PID its container runtime reports; then the guide's
// step 1 runs inside it through netlink (framework/fabric, as in the lab).
func (c *Cluster) cable(specs []fabric.NodeSpec, gw, otherGW netip.Prefix, untagged bool) error {
	if err := fabric.Sweep(); err != nil {
		return fmt.Errorf("sweep leftovers of an earlier run: %w", err)
	}
	for i := range specs {
		pid, ok := c.pids[specs[i].Name]
		if !ok {
			return fmt.Errorf("node %s: no PID from the container runtime", specs[i].Name)
		}
		specs[i].Netns = fmt.Sprintf("/proc/%d/ns/net", pid)
	}
	f, err := fabric.Build(fabric.Spec{VLAN: c.cfg.VLAN, OtherVLAN: c.cfg.OtherVLAN, Gateway: gw, OtherGateway: otherGW, Nodes: specs, Untagged: untagged})
	if err != nil {
		return err
	}
	c.fab = f
	g, err := gateway.New(f, c.cfg.ARPProfile, nil)
	if err != nil {
		return err
	}
	c.gw = g
	c.nodes, c.macvlan = nil, nil
	for _, fn := range f.Nodes {
		n := &node{name: fn.Spec.Name, pid: c.pids[fn.Spec.Name], fab: fn, addr: fn.Spec.Address}
		if fn.Spec.Wiring == fabric.MacvlanParent {
			c.macvlan = n
			continue
		}
		c.nodes = append(c.nodes, n)
	}
	return nil
}
