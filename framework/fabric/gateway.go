package fabric

import (
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// buildGateway makes the gateway netns's switch bridge (the "trunk" every
// node's port joins) and the gateway's interfaces on the two VLANs.
func (f *Fabric) buildGateway() error {
	h := f.Gateway.Handle
	if !f.Spec.Untagged {
		// A router answers ARP only for the addresses of the VLAN a request
		// arrives on; Linux's default (arp_ignore=0) would answer for
		// 198.51.100.1 on VLAN 100 and blur the isolation claim.
		if err := NetSysctl(f.Gateway.Path, "ipv4/conf/all/arp_ignore", "1"); err != nil {
			return err
		}
	}
	sw := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: TrunkName, MTU: f.Spec.MTU}}
	if err := h.LinkAdd(sw); err != nil {
		return fmt.Errorf("switch bridge: %w", err)
	}
	if err := h.LinkSetUp(sw); err != nil {
		return err
	}
	if f.Spec.Untagged {
		// Access mode: the gateway's address sits on the switch itself.
		return addAddr(h, TrunkName, f.Spec.Gateway)
	}
	for _, v := range []struct {
		id   int
		addr netip.Prefix
	}{{f.Spec.VLAN, f.Spec.Gateway}, {f.Spec.OtherVLAN, f.Spec.OtherGateway}} {
		if _, err := addVLAN(h, sw, v.id, f.Spec.MTU, TrunkName); err != nil {
			return err
		}
		if err := addAddr(h, SubName(TrunkName, v.id), v.addr); err != nil {
			return err
		}
	}
	return nil
}

// buildStandby makes the standby router's netns, plugged into the
// gateway's switch as a node is, with its address on the VLAN: a second
// router whose neighbour table is its own, kept apart from the gateway's
// by a namespace, so that one re-creation leaves two stale entries.
func (f *Fabric) buildStandby() error {
	ns, err := NewNamespace("gw-standby")
	if err != nil {
		return err
	}
	f.made = append(f.made, ns.Name)
	f.Standby = ns
	up, err := f.plug(ns, TrunkName, PortName("standby"))
	if err != nil {
		return err
	}
	if f.Spec.Untagged {
		return addAddr(ns.Handle, TrunkName, f.Spec.Standby)
	}
	if err := NetSysctl(ns.Path, "ipv4/conf/all/arp_ignore", "1"); err != nil {
		return err
	}
	if _, err := addVLAN(ns.Handle, up, f.Spec.VLAN, f.Spec.MTU, TrunkName); err != nil {
		return err
	}
	return addAddr(ns.Handle, SubName(TrunkName, f.Spec.VLAN), f.Spec.Standby)
}

// StandbyIface is the standby router's interface on the VLAN, named as
// the gateway's (GatewayIface) in its own netns.
func (f *Fabric) StandbyIface() string { return f.GatewayIface() }

// GatewayIface is the gateway's interface on the VLAN: trunk.<vlan>, or
// the switch bridge itself on an untagged trunk.
func (f *Fabric) GatewayIface() string {
	if f.Spec.Untagged {
		return TrunkName
	}
	return SubName(TrunkName, f.Spec.VLAN)
}

// OtherGatewayIface is the gateway's interface on the second VLAN; "" on
// an untagged trunk, which has none.
func (f *Fabric) OtherGatewayIface() string {
	if f.Spec.Untagged {
		return ""
	}
	return SubName(TrunkName, f.Spec.OtherVLAN)
}
