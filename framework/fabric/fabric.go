// Package fabric builds the "physical" network the guide assumes: an
// upstream gateway on a tagged trunk and nodes whose uplink carries the VLAN.
// It is the only package that knows which wires exist.
//
// Lab topology (every box is a network namespace; names carry the prefix
// "vcf-" so a rerun can sweep what a killed run left):
//
//	 vcf-gw (switch + gateway)                vcf-node-a (the guide's step 1)
//	+----------------------------+  veth    +------------------------------------+
//	| trunk (bridge, no address) |  trunk   | uplink                             |
//	|   p-node-a <==============>|==========| uplink.100 (VLAN 100, no address)  |
//	|   p-node-b <==============>|====+     |   br100  203.0.113.2/24 <- CNI veth |
//	|   p-node-m <==============>|==+ |     +------------------------------------+
//	|   p-standby <=========+    |  | |     vcf-node-b: same, br100 203.0.113.3/24
//	| trunk.100  203.0.113.1/24  |  | +====
//	| trunk.200  198.51.100.1/24 |  |       vcf-node-m (as macvlan users provision)
//	+-----------------------|----+  +====== | uplink -> uplink.100 203.0.113.4/24 |
//	                        |
//	 vcf-gw-standby (a second router on the VLAN, its own neighbour table)
//	 | trunk -> trunk.100  203.0.113.9/24 |
//
// Every node the fabric makes also has a management interface, mgmt (a
// dummy), with its default route: step 1 keeps the default route there
// (NODE-02), as a kind node's stays on its eth0.
//
// Frames between the gateway and a node, and between nodes, cross a trunk
// veth carrying 802.1Q tags. In vendor mode a real NIC replaces the trunk and
// the gateway netns: the suite creates only its node netns, with uplink.100
// on that NIC moved into it, and br100.
package fabric

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// Spec is the whole fabric.
type Spec struct {
	VLAN, OtherVLAN int
	Gateway         netip.Prefix // e.g. 203.0.113.1/24
	OtherGateway    netip.Prefix // e.g. 198.51.100.1/24
	Nodes           []NodeSpec
	MTU             int    // trunk and uplink MTU (0 = 1500)
	Uplink          string // vendor mode: a real NIC in this namespace
	// Untagged: the trunk carries VLAN only, untagged (access mode), for
	// a kernel without 8021q (kind nodes share the host's). The gateway's
	// address sits on the switch bridge, the node's uplink itself is the
	// VLAN parent, and there is no second VLAN.
	Untagged bool
	// Standby is the address of a second router on the VLAN beside the
	// gateway, as a redundant pair has (ARP-04 watches its neighbour
	// entry); none when not valid, and none in vendor mode.
	Standby netip.Prefix
}

// Fabric is the built network.
type Fabric struct {
	Spec    Spec
	Gateway *Namespace // nil in vendor mode
	Standby *Namespace // nil without Spec.Standby and in vendor mode
	Nodes   []*NodeNetns
	made    []string     // namespace names to delete, in creation order
	cabled  []*NodeNetns // nodes in namespaces the fabric did not make
}

// Names of the interfaces the guide uses.
const (
	UplinkName = "uplink"
	BridgeName = "br100"
	TrunkName  = "trunk"
)

// PortName is the gateway's switch port for a node: "p-<node>", cut to
// the kernel's 15-character limit from the left (vcf-control-plane ->
// p-control-plane), since node names end in what tells them apart.
func PortName(node string) string {
	const max = 15 - len("p-")
	if len(node) > max {
		node = node[len(node)-max:]
	}
	return "p-" + node
}

// SubName is the VLAN sub-interface name for an id, as the guide spells it.
func SubName(parent string, vlan int) string { return fmt.Sprintf("%s.%d", parent, vlan) }

// Build creates the fabric. On error everything made so far is removed.
func Build(spec Spec) (_ *Fabric, err error) {
	if spec.MTU == 0 {
		spec.MTU = 1500
	}
	f := &Fabric{Spec: spec}
	defer func() {
		if err != nil {
			err = errors.Join(err, f.Destroy())
		}
	}()
	if spec.Uplink == "" {
		gw, err := NewNamespace("gw")
		if err != nil {
			return nil, err
		}
		f.made = append(f.made, gw.Name)
		f.Gateway = gw
		if err := f.buildGateway(); err != nil {
			return nil, fmt.Errorf("gateway: %w", err)
		}
		if spec.Standby.IsValid() {
			if err := f.buildStandby(); err != nil {
				return nil, fmt.Errorf("standby gateway: %w", err)
			}
		}
	}
	for _, ns := range spec.Nodes {
		n, err := f.addNode(ns)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", ns.Name, err)
		}
		f.Nodes = append(f.Nodes, n)
	}
	return f, nil
}

// Destroy removes every namespace the fabric made.
func (f *Fabric) Destroy() error {
	var errs []error
	// Links in namespaces the fabric did not make go first, while the
	// gateway end of their trunk still exists: the bridge, and the uplink
	// (its VLAN sub-interfaces and its gateway peer go with it).
	for _, n := range f.cabled {
		errs = append(errs, uncable(n.Handle))
	}
	f.cabled = nil
	for i := len(f.made) - 1; i >= 0; i-- {
		errs = append(errs, DeleteNamespace(f.made[i]))
	}
	for _, n := range f.Nodes {
		n.Handle.Close()
	}
	for _, ns := range []*Namespace{f.Gateway, f.Standby} {
		if ns != nil {
			ns.Handle.Close()
		}
	}
	f.made = nil
	return errors.Join(errs...)
}

// addVLAN makes parentName.<id> on parent and sets it up (both ends of a
// trunk use it).
func addVLAN(h *netlink.Handle, parent netlink.Link, id, mtu int, parentName string) (netlink.Link, error) {
	v := &netlink.Vlan{LinkAttrs: netlink.LinkAttrs{Name: SubName(parentName, id), ParentIndex: parent.Attrs().Index, MTU: mtu}, VlanId: id}
	if err := h.LinkAdd(v); err != nil {
		return nil, fmt.Errorf("VLAN %d on %s (kernel needs CONFIG_VLAN_8021Q): %w", id, parentName, err)
	}
	if err := h.LinkSetUp(v); err != nil {
		return nil, err
	}
	return v, nil
}

// addAddr puts p on iface.
func addAddr(h *netlink.Handle, iface string, p netip.Prefix) error {
	l, err := h.LinkByName(iface)
	if err != nil {
		return err
	}
	a := addrOf(p)
	if err := h.AddrAdd(l, a); err != nil {
		return fmt.Errorf("address %s on %s: %w", p, iface, err)
	}
	return nil
}

// delAddr removes p from l.
func delAddr(h *netlink.Handle, l netlink.Link, p netip.Prefix) error {
	a := addrOf(p)
	if err := h.AddrDel(l, a); err != nil {
		return fmt.Errorf("removing address %s from %s: %w", p, l.Attrs().Name, err)
	}
	return nil
}

func addrOf(p netip.Prefix) *netlink.Addr {
	return &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}}
}
