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
//	| trunk.100  203.0.113.1/24  |  | |     vcf-node-b: same, br100 203.0.113.3/24
//	| trunk.200  198.51.100.1/24 |  | +====
//	+----------------------------+  |       vcf-node-m (as macvlan users provision)
//	                                +====== | uplink -> uplink.100 203.0.113.4/24 |
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
	"os"
	"path/filepath"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/cozystack/vlan-conformance/framework/nsexec"
)

// Prefix starts the name of every namespace and host link the suite makes.
const Prefix = "vcf-"

// NetnsDir is where named network namespaces live (iproute2's convention).
const NetnsDir = "/run/netns"

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
)

// ShimName is the host's own macvlan child under MacvlanShim.
const ShimName = "vcf-shim"

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
}

// Node is a node's network namespace after provisioning.
type Node struct {
	Spec   NodeSpec
	Netns  string // path
	Handle *netlink.Handle
	// Parent is the VLAN sub-interface's name (uplink.100), "" if none.
	Parent string
}

// Fabric is the built network.
type Fabric struct {
	Spec    Spec
	Gateway *Namespace // nil in vendor mode
	Nodes   []*Node
	made    []string // namespace names to delete, in creation order
	cabled  []*Node  // nodes in namespaces the fabric did not make
}

// Namespace is a named network namespace with a netlink handle into it.
type Namespace struct {
	Name   string
	Path   string
	Handle *netlink.Handle
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

// NewNamespace creates a named network namespace (lo up) without leaving
// the calling thread in it.
func NewNamespace(name string) (*Namespace, error) {
	if !strings.HasPrefix(name, Prefix) {
		name = Prefix + name
	}
	h, err := nsexec.NewNamed(name)
	if err != nil {
		return nil, fmt.Errorf("create netns %s: %w", name, err)
	}
	defer h.Close()
	nh, err := netlink.NewHandleAt(h, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, err
	}
	ns := &Namespace{Name: name, Path: filepath.Join(NetnsDir, name), Handle: nh}
	lo, err := nh.LinkByName("lo")
	if err == nil {
		err = nh.LinkSetUp(lo)
	}
	if err != nil {
		ns.Delete()
		return nil, fmt.Errorf("netns %s: lo up: %w", name, err)
	}
	return ns, nil
}

// Uncable deletes the links a fabric made in a namespace it does not own
// (the bridge and the uplink), for a run other than the one that made them.
func Uncable(path string) error {
	ns, err := openNamespace("node", path)
	if err != nil {
		return err
	}
	defer ns.Handle.Close()
	var errs []error
	for _, name := range []string{BridgeName, UplinkName} {
		if l, err := ns.Handle.LinkByName(name); err == nil {
			errs = append(errs, ns.Handle.LinkDel(l))
		}
	}
	return errors.Join(errs...)
}

// openNamespace opens a namespace the fabric does not own.
func openNamespace(name, path string) (*Namespace, error) {
	h, err := netns.GetFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("open netns of %s at %s: %w", name, path, err)
	}
	defer h.Close()
	nh, err := netlink.NewHandleAt(h, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, err
	}
	return &Namespace{Name: name, Path: path, Handle: nh}, nil
}

// Delete removes the namespace; its links go with it.
func (n *Namespace) Delete() error {
	if n.Handle != nil {
		n.Handle.Close()
	}
	return DeleteNamespace(n.Name)
}

// DeleteNamespace removes a named namespace; a missing one is not an error.
func DeleteNamespace(name string) error {
	err := netns.DeleteNamed(name)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete netns %s: %w", name, err)
	}
	return nil
}

// Sweep removes every namespace and host link with the suite's prefix: what a
// killed run left. It never touches anything else.
func Sweep() error {
	var errs []error
	entries, err := os.ReadDir(NetnsDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), Prefix) {
			errs = append(errs, DeleteNamespace(e.Name()))
		}
	}
	links, err := netlink.LinkList()
	if err != nil {
		errs = append(errs, err)
	}
	for _, l := range links {
		if strings.HasPrefix(l.Attrs().Name, Prefix) {
			errs = append(errs, netlink.LinkDel(l))
		}
	}
	return errors.Join(errs...)
}

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
		for _, name := range []string{BridgeName, UplinkName} {
			if l, err := n.Handle.LinkByName(name); err == nil {
				errs = append(errs, n.Handle.LinkDel(l))
			}
		}
	}
	f.cabled = nil
	for i := len(f.made) - 1; i >= 0; i-- {
		errs = append(errs, DeleteNamespace(f.made[i]))
	}
	for _, n := range f.Nodes {
		n.Handle.Close()
	}
	if f.Gateway != nil {
		f.Gateway.Handle.Close()
	}
	f.made = nil
	return errors.Join(errs...)
}

// buildGateway makes the switch bridge and the gateway's VLAN interfaces.
func (f *Fabric) buildGateway() error {
	h := f.Gateway.Handle
	if f.Spec.Untagged {
		sw := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: TrunkName, MTU: f.Spec.MTU}}
		if err := h.LinkAdd(sw); err != nil {
			return fmt.Errorf("switch bridge: %w", err)
		}
		if err := h.LinkSetUp(sw); err != nil {
			return err
		}
		return addAddr(h, TrunkName, f.Spec.Gateway)
	}
	// A router answers ARP only for the addresses of the VLAN a request
	// arrives on; Linux's default (arp_ignore=0) would answer for
	// 198.51.100.1 on VLAN 100 and blur the isolation claim.
	if err := nsexec.Do(f.Gateway.Path, func() error {
		return os.WriteFile("/proc/sys/net/ipv4/conf/all/arp_ignore", []byte("1"), 0o644)
	}); err != nil {
		return fmt.Errorf("arp_ignore: %w", err)
	}
	sw := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: TrunkName, MTU: f.Spec.MTU}}
	if err := h.LinkAdd(sw); err != nil {
		return fmt.Errorf("switch bridge: %w", err)
	}
	if err := h.LinkSetUp(sw); err != nil {
		return err
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

// addNode creates a node namespace, cables it and provisions its VLAN.
func (f *Fabric) addNode(spec NodeSpec) (*Node, error) {
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
	}
	n := &Node{Spec: spec, Netns: ns.Path, Handle: ns.Handle}
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
	gwFd, err := netns.GetFromPath(f.Gateway.Path)
	if err != nil {
		return nil, err
	}
	defer gwFd.Close()
	port := PortName(spec.Name)
	veth := &netlink.Veth{
		LinkAttrs: netlink.LinkAttrs{Name: uplinkName, MTU: f.Spec.MTU},
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
	up, err := ns.Handle.LinkByName(uplinkName)
	if err != nil {
		return nil, err
	}
	if err := ns.Handle.LinkSetUp(up); err != nil {
		return nil, err
	}
	return n, f.provision(n, up)
}

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

func (f *Fabric) vlanFor(w Wiring) int {
	if w == WrongVLAN {
		return f.Spec.VLAN + 1
	}
	return f.Spec.VLAN
}

// provision is the guide's step 1 on the node (or its broken variant). up
// is the uplink in the node namespace; nil in vendor mode, where the
// sub-interface already exists.
func (f *Fabric) provision(n *Node, up netlink.Link) error {
	h := n.Handle
	w := n.Spec.Wiring
	if f.Spec.Untagged {
		// The uplink is the VLAN parent: the guide's step 1 without the
		// sub-interface the kernel cannot make.
		switch w {
		case GuideBridge:
			w = UntaggedUplink
		case MacvlanParent, MacvlanShim:
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
	return addAddr(h, addrOn, n.Spec.Address)
}

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

func addAddr(h *netlink.Handle, iface string, p netip.Prefix) error {
	l, err := h.LinkByName(iface)
	if err != nil {
		return err
	}
	a := &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}}
	if err := h.AddrAdd(l, a); err != nil {
		return fmt.Errorf("address %s on %s: %w", p, iface, err)
	}
	return nil
}
