package cabling

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/node"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/plan"
)

// Plan adds the cabling: the gateway netns, then one line per node. One
// netlink pass builds the gateway and cables every node listed, filling
// nodes and gw.
func (c *Cabling) Plan(p *plan.Plan, cps, workers []string, nodes *node.Set, gw *platform.Gateway) {
	cfg := c.cfg
	subnet := netip.MustParsePrefix(cfg.Subnet)
	gwAddr := netip.PrefixFrom(netip.MustParseAddr(cfg.Gateway), subnet.Bits())
	other := netip.MustParsePrefix(cfg.OtherSubnet)
	otherGW := netip.PrefixFrom(netip.MustParseAddr(cfg.OtherGateway), other.Bits())
	untagged, why := c.Mode()
	var specs []fabric.NodeSpec
	// The bridge nodes as the guide has them, or as the control breaks
	// them (VLAN-01's: br100 without the sub-interface).
	wiring := cfg.SelectedControl().BridgeWiring
	for i, w := range workers {
		specs = append(specs, fabric.NodeSpec{Name: w, Wiring: wiring, Address: NodeAddr(subnet, i)})
	}
	// The control plane carries the macvlan claims: provisioned as macvlan
	// users do, so the guide's bridge nodes stay as the guide has them.
	if len(cps) > 0 {
		specs = append(specs, fabric.NodeSpec{Name: cps[0], Wiring: fabric.MacvlanParent, Address: NodeAddr(subnet, len(workers))})
	}
	parent := fabric.SubName(fabric.UplinkName, cfg.VLAN)
	standby := StandbyAddr(gwAddr)
	host := fmt.Sprintf("gateway netns %sgw: switch bridge %s; %s %s; %s %s (%s); standby router netns %sgw-standby %s on VLAN %d; neighbour timers --arp-profile=%s",
		fabric.Prefix, fabric.TrunkName, fabric.SubName(fabric.TrunkName, cfg.VLAN), gwAddr, fabric.SubName(fabric.TrunkName, cfg.OtherVLAN), otherGW, why, fabric.Prefix, standby, cfg.VLAN, cfg.ARPProfile)
	if untagged {
		parent = fabric.UplinkName
		host = fmt.Sprintf("gateway netns %sgw: switch bridge %s %s, untagged (%s); no second VLAN; standby router netns %sgw-standby %s; neighbour timers --arp-profile=%s",
			fabric.Prefix, fabric.TrunkName, gwAddr, why, fabric.Prefix, standby, cfg.ARPProfile)
	}
	p.Add("host", host, nil, func(context.Context) error {
		c.untagged, c.why = untagged, why
		g, err := c.Cable(specs, gwAddr, otherGW, untagged, nodes)
		if err != nil {
			return err
		}
		*gw = g
		return nil
	})
	for _, s := range specs {
		vlan := fmt.Sprintf("%s (VLAN %d, no address) in %s; %s %s", parent, cfg.VLAN, fabric.BridgeName, fabric.BridgeName, s.Address)
		if untagged {
			vlan = fmt.Sprintf("%s itself in %s; %s %s", parent, fabric.BridgeName, fabric.BridgeName, s.Address)
		}
		switch s.Wiring {
		case fabric.MacvlanParent:
			vlan = fmt.Sprintf("%s %s, no bridge (the macvlan node)", parent, s.Address)
		case fabric.NoSubinterface:
			vlan = fmt.Sprintf("%s alone, %s left out of it (control %s); %s %s", fabric.BridgeName, parent, cfg.Control, fabric.BridgeName, s.Address)
		}
		p.Add("node", fmt.Sprintf("%s (netns of its container's PID, from `%s inspect`): trunk veth %s <-> %sgw:%s; %s",
			s.Name, cfg.Cluster.Runtime, fabric.UplinkName, fabric.Prefix, fabric.PortName(s.Name), vlan), nil, nil)
	}
}
