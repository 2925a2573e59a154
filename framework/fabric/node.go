package fabric

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Wiring is how a node's uplink meets its bridge: the guide's, or a broken
// variant for a negative control.
type Wiring int

const (
	GuideBridge        Wiring = iota // uplink.100 in br100, address on br100
	NoSubinterface                   // br100 alone, no VLAN sub-interface
	WrongVLAN                        // uplink.<vlan+1> in br100
	UntaggedUplink                   // the uplink itself in br100
	AddrOnSubinterface               // uplink.100 in br100, address on uplink.100
	BothVLANs                        // uplink.100 and uplink.200 in br100
	MacvlanParent                    // no bridge; address on uplink.100 (macvlan users)
	MacvlanShim                      // no bridge; address on a macvlan child of uplink.100 (the host's workaround)
	DefaultViaBridge                 // the guide's, but the node's default route via the VLAN's gateway on br100
)

// ShimName is the host's own macvlan child under MacvlanShim.
const ShimName = "vcf-shim"

// ManagementName is a lab node's management interface: a real node's
// default route is on one (NODE-02), and a kind node's is its eth0. One
// end of a veth whose other end, ManagementPeer, stays in the node: the
// default route leads nowhere, as the lab's traffic is all on VLANs and
// the host's own routes are never touched. A veth, not a dummy: the
// lab's native part runs on kernels without CONFIG_DUMMY.
const ManagementName = "mgmt"

// ManagementPeer is the other end of ManagementName's veth, where a real
// node's switch port would be.
const ManagementPeer = "mgmt-peer"

// NodeSpec describes one node of the fabric.
type NodeSpec struct {
	Name    string
	Wiring  Wiring
	Address netip.Prefix // the node's own address on the VLAN
	// Netns, if set, is an existing network namespace to cable instead of a
	// new one: a kind node container's /proc/<pid>/ns/net. The fabric
	// neither creates nor deletes it; Destroy deletes the links it made there.
	Netns string
}

// NodeNetns is a node's network namespace as the fabric cabled it and
// provisioned the guide's step 1 in it (or a broken variant: Wiring).
type NodeNetns struct {
	Spec   NodeSpec
	Netns  string // path
	Handle *netlink.Handle
	// Parent is the VLAN sub-interface's name (uplink.100), "" if none.
	Parent string
}

// addNode creates a node namespace, cables it and provisions its VLAN.
func (f *Fabric) addNode(spec NodeSpec) (*NodeNetns, error) {
	var ns *Namespace
	if spec.Netns != "" {
		var err error
		if ns, err = openNamespace(spec.Name, spec.Netns); err != nil {
			return nil, err
		}
	} else {
		var err error
		if ns, err = NewNamespace(spec.Name); err != nil {
			return nil, err
		}
		f.made = append(f.made, ns.Name)
		if err := addManagement(ns.Handle); err != nil {
			return nil, fmt.Errorf("node %s: %w", spec.Name, err)
		}
	}
	n := &NodeNetns{Spec: spec, Netns: ns.Path, Handle: ns.Handle}
	if spec.Netns != "" {
		f.cabled = append(f.cabled, n)
	}
	uplinkName := UplinkName
	if f.Spec.Uplink != "" {
		// Vendor mode: the VLAN sub-interface is created on the real NIC
		// and moved straight into the node namespace by the same request.
		up, err := netlink.LinkByName(f.Spec.Uplink)
		if err != nil {
			return nil, fmt.Errorf("uplink %s: %w", f.Spec.Uplink, err)
		}
		nsFd, err := netns.GetFromPath(ns.Path)
		if err != nil {
			return nil, err
		}
		defer nsFd.Close()
		vid := f.vlanFor(spec.Wiring)
		v := &netlink.Vlan{LinkAttrs: netlink.LinkAttrs{Name: SubName(UplinkName, vid), ParentIndex: up.Attrs().Index, Namespace: netlink.NsFd(nsFd)}, VlanId: vid}
		if err := netlink.LinkAdd(v); err != nil {
			return nil, fmt.Errorf("VLAN %d on %s into the node: %w", vid, f.Spec.Uplink, err)
		}
		return n, f.provision(n, nil)
	}
	// The trunk: one veth per node, switch port in the gateway, "uplink" in the node.
	up, err := f.plug(ns, uplinkName, PortName(spec.Name))
	if err != nil {
		return nil, err
	}
	return n, f.provision(n, up)
}

// plug cables a namespace into the gateway's switch: a veth whose end
// name is in ns and whose peer port is a port of the switch bridge, both
// up at the trunk's MTU. It returns the end in ns.
func (f *Fabric) plug(ns *Namespace, name, port string) (netlink.Link, error) {
	gwFd, err := netns.GetFromPath(f.Gateway.Path)
	if err != nil {
		return nil, err
	}
	defer gwFd.Close()
	veth := &netlink.Veth{
		LinkAttrs: netlink.LinkAttrs{Name: name, MTU: f.Spec.MTU},
		PeerName:  port, PeerNamespace: netlink.NsFd(gwFd),
	}
	if err := ns.Handle.LinkAdd(veth); err != nil {
		return nil, fmt.Errorf("trunk veth: %w", err)
	}
	gh := f.Gateway.Handle
	p, err := gh.LinkByName(port)
	if err != nil {
		return nil, err
	}
	sw, err := gh.LinkByName(TrunkName)
	if err != nil {
		return nil, err
	}
	if err := gh.LinkSetMTU(p, f.Spec.MTU); err != nil {
		return nil, err
	}
	if err := gh.LinkSetMaster(p, sw); err != nil {
		return nil, err
	}
	if err := gh.LinkSetUp(p); err != nil {
		return nil, err
	}
	end, err := ns.Handle.LinkByName(name)
	if err != nil {
		return nil, err
	}
	if err := ns.Handle.LinkSetUp(end); err != nil {
		return nil, err
	}
	return end, nil
}

// vlanFor is the VLAN a node's sub-interface carries: the wrong one for
// the WrongVLAN control.
func (f *Fabric) vlanFor(w Wiring) int {
	if w == WrongVLAN {
		return f.Spec.VLAN + 1
	}
	return f.Spec.VLAN
}

// provision is the guide's step 1 on the node (or its broken variant). up
// is the uplink in the node namespace; nil in vendor mode, where the
// sub-interface already exists.
func (f *Fabric) provision(n *NodeNetns, up netlink.Link) error {
	h := n.Handle
	w := n.Spec.Wiring
	if f.Spec.Untagged {
		// The uplink is the VLAN parent: the guide's step 1 without the
		// sub-interface the kernel cannot make.
		switch w {
		case GuideBridge:
			w = UntaggedUplink
		case MacvlanParent, MacvlanShim:
		case NoSubinterface:
			// br100 alone: the uplink, which stands for the
			// sub-interface here, is left out of it.
		default:
			return fmt.Errorf("wiring %d needs a tagged trunk (8021q)", w)
		}
		n.Parent = UplinkName
	}
	var ports []netlink.Link
	macvlan := w == MacvlanParent || w == MacvlanShim
	if w != NoSubinterface && w != UntaggedUplink && !(macvlan && f.Spec.Untagged) {
		vid := f.vlanFor(w)
		var sub netlink.Link
		var err error
		if up != nil {
			sub, err = addVLAN(h, up, vid, f.Spec.MTU, UplinkName)
		} else {
			sub, err = h.LinkByName(SubName(UplinkName, vid))
			if err == nil {
				err = h.LinkSetUp(sub)
			}
		}
		if err != nil {
			return err
		}
		n.Parent = sub.Attrs().Name
		ports = append(ports, sub)
	}
	if w == BothVLANs {
		other, err := addVLAN(h, up, f.Spec.OtherVLAN, f.Spec.MTU, UplinkName)
		if err != nil {
			return err
		}
		ports = append(ports, other)
	}
	if w == UntaggedUplink {
		ports = append(ports, up)
	}
	if w == MacvlanParent {
		return addAddr(h, n.Parent, n.Spec.Address)
	}
	if w == MacvlanShim {
		// The host talks through a macvlan sibling of the pods' children
		// (mode bridge): the usual way around parent/child isolation.
		parent, err := h.LinkByName(n.Parent)
		if err != nil {
			return err
		}
		shim := &netlink.Macvlan{LinkAttrs: netlink.LinkAttrs{Name: ShimName, ParentIndex: parent.Attrs().Index}, Mode: netlink.MACVLAN_MODE_BRIDGE}
		if err := h.LinkAdd(shim); err != nil {
			return fmt.Errorf("macvlan %s on %s: %w", ShimName, n.Parent, err)
		}
		if err := h.LinkSetUp(shim); err != nil {
			return err
		}
		return addAddr(h, ShimName, n.Spec.Address)
	}
	// The guide: a bridge enslaving the tagged sub-interface; the host's
	// presence on the VLAN is on the bridge, and no default route.
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: BridgeName}}
	if err := h.LinkAdd(br); err != nil {
		return fmt.Errorf("bridge: %w", err)
	}
	for _, p := range ports {
		if err := h.LinkSetMaster(p, br); err != nil {
			return fmt.Errorf("enslave %s: %w", p.Attrs().Name, err)
		}
	}
	if err := h.LinkSetUp(br); err != nil {
		return err
	}
	addrOn := BridgeName
	if w == AddrOnSubinterface {
		addrOn = n.Parent
	}
	if err := addAddr(h, addrOn, n.Spec.Address); err != nil {
		return err
	}
	if w == DefaultViaBridge {
		// What a netplan with the VLAN's gateway4 on br100 does.
		if err := h.RouteReplace(&netlink.Route{LinkIndex: br.Attrs().Index, Dst: defaultDst, Gw: f.Spec.Gateway.Addr().AsSlice()}); err != nil {
			return fmt.Errorf("default route via %s on %s: %w", f.Spec.Gateway.Addr(), BridgeName, err)
		}
	}
	return nil
}

// defaultDst is IPv4's default route.
var defaultDst = &net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}

// addManagement gives a node the fabric made its management interface
// and the default route on it.
func addManagement(h *netlink.Handle) error {
	m := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: ManagementName}, PeerName: ManagementPeer}
	if err := h.LinkAdd(m); err != nil {
		return fmt.Errorf("management interface: %w", err)
	}
	var l netlink.Link
	for _, name := range []string{ManagementPeer, ManagementName} {
		var err error
		if l, err = h.LinkByName(name); err != nil {
			return fmt.Errorf("management interface: %w", err)
		}
		if err := h.LinkSetUp(l); err != nil {
			return fmt.Errorf("management interface %s up: %w", name, err)
		}
	}
	if err := h.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: defaultDst, Scope: netlink.SCOPE_LINK}); err != nil {
		return fmt.Errorf("default route on %s: %w", ManagementName, err)
	}
	return nil
}

// DeleteBridge removes bridge name from the node whose netns h is in; the
// guide's own br100 is refused (Down removes it).
func DeleteBridge(h *netlink.Handle, node, name string) error {
	if name == BridgeName {
		return fmt.Errorf("node %s: %s is step 1's bridge, not one a spec caused", node, name)
	}
	l, err := h.LinkByName(name)
	if err != nil {
		return fmt.Errorf("node %s: no bridge %s: %w", node, name, err)
	}
	if l.Type() != "bridge" {
		return fmt.Errorf("node %s: %s is a %s, not a bridge", node, name, l.Type())
	}
	return h.LinkDel(l)
}

// BridgeParent redoes step 1 on a node provisioned for macvlan, as netplan
// apply would (VLAN-13): a bridge br100, the VLAN sub-interface enslaved to
// it, the node's address moved from the sub-interface onto it. When the
// kernel refuses the enslave (a macvlan consumer still holds the
// sub-interface: EBUSY), the bridge is removed again, the node is left as
// it was, and the error wraps the kernel's errno. undo returns the node to
// its macvlan wiring.
func BridgeParent(n *NodeNetns) (undo func() error, err error) {
	h, name := n.Handle, n.Spec.Name
	if n.Parent == "" {
		return nil, fmt.Errorf("node %s has no VLAN sub-interface to bridge", name)
	}
	if _, err := h.LinkByName(BridgeName); err == nil {
		return nil, fmt.Errorf("node %s already has %s", name, BridgeName)
	}
	parent, err := h.LinkByName(n.Parent)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: BridgeName}}
	if err := h.LinkAdd(br); err != nil {
		return nil, fmt.Errorf("node %s: bridge: %w", name, err)
	}
	if err := h.LinkSetMaster(parent, br); err != nil {
		return nil, errors.Join(fmt.Errorf("node %s: enslave %s to %s: %w", name, n.Parent, BridgeName, err), h.LinkDel(br))
	}
	undo = func() error {
		// Deleting the bridge releases its ports; the address goes back.
		return errors.Join(h.LinkDel(br), addAddr(h, n.Parent, n.Spec.Address))
	}
	if err := errors.Join(delAddr(h, parent, n.Spec.Address), h.LinkSetUp(br), addAddr(h, BridgeName, n.Spec.Address)); err != nil {
		return nil, errors.Join(err, undo())
	}
	return undo, nil
}
