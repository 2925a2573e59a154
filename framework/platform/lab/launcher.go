package lab

import (
	"fmt"
	"net"

	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"

	"github.com/cozystack/vlan-conformance/framework/dump"
	"github.com/cozystack/vlan-conformance/framework/nsexec"
)

// launcher reproduces, in the virt-launcher pod's namespace, what KubeVirt's
// bridge binding does to a secondary interface. Source: kubevirt/kubevirt
// pkg/network/setup/netpod/netpod.go, NetPod.bridgeBindingSpec:
//
//	bridge  k6t-<pod iface>          up, tx-checksum off
//	pod iface renamed <pod iface>-nic  CopyMacFrom the bridge, port of the
//	                                 bridge, IPv4/IPv6 off, PortLearning false
//	tap     (MTU of the pod iface)   port of the bridge, the guest's NIC
//	dummy   <pod iface>              the original MAC, MTU and addresses
//
// and the domain's interface keeps the pod iface's ORIGINAL MAC, so the
// guest transmits with it. A netns guest cannot read a tap, so the lab uses
// a veth pair in its place: one end is the bridge port, the other is the
// guest's NIC, moved into the guest namespace.
//
//	 pod netns (virt-launcher)                              guest netns
//	+------------------------------------------------+     +-------------+
//	| net1-nic --port-- k6t-net1 --port-- tap-net1 ==|=====| enp2s0      |
//	|  (bridge MAC)                       (veth)     |     | original MAC|
//	| net1 (dummy, original MAC)                     |     +-------------+
//	+------------------------------------------------+
type launcher struct {
	pod    *netlink.Handle
	podNS  string // path
	iface  string // the CNI interface, e.g. net1
	tap    string
	bridge string
}

func newLauncher(pod *netlink.Handle, podNS, iface string) *launcher {
	return &launcher{pod: pod, podNS: podNS, iface: iface, bridge: "k6t-" + iface, tap: "tap-" + iface}
}

// bind applies the bridge binding and moves the guest end of the "tap" into
// the guest namespace as guestIface. It returns the MAC the guest uses.
func (l *launcher) bind(guestNS int, guestIface string) (net.HardwareAddr, error) {
	h := l.pod
	podIface, err := h.LinkByName(l.iface)
	if err != nil {
		return nil, fmt.Errorf("pod link (%s) is missing: %w", l.iface, err)
	}
	orig := podIface.Attrs()
	origMAC := append(net.HardwareAddr(nil), orig.HardwareAddr...)
	all, err := dump.Consistent(func() ([]netlink.Addr, error) { return h.AddrList(podIface, netlink.FAMILY_ALL) })
	if err != nil {
		return nil, err
	}
	// Link-local addresses belong to the link, not to the pod's config.
	var addrs []netlink.Addr
	for _, a := range all {
		if a.Scope == int(netlink.SCOPE_UNIVERSE) {
			addrs = append(addrs, a)
		}
	}

	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: l.bridge}}
	if err := h.LinkAdd(br); err != nil {
		return nil, fmt.Errorf("bridge %s: %w", l.bridge, err)
	}
	if err := h.LinkSetUp(br); err != nil {
		return nil, err
	}
	if err := nsexec.Do(l.podNS, func() error { return txChecksumOff(l.bridge) }); err != nil {
		return nil, fmt.Errorf("%s tx-checksum off: %w", l.bridge, err)
	}
	brLink, err := h.LinkByName(l.bridge)
	if err != nil {
		return nil, err
	}

	// The pod interface: renamed, given the bridge's MAC, made a port with
	// learning off, no addresses.
	nicName := l.iface + "-nic"
	for _, a := range addrs {
		if err := h.AddrDel(podIface, &a); err != nil {
			return nil, fmt.Errorf("flush %s: %w", l.iface, err)
		}
	}
	if err := h.LinkSetDown(podIface); err != nil {
		return nil, err
	}
	if err := h.LinkSetName(podIface, nicName); err != nil {
		return nil, fmt.Errorf("rename %s to %s: %w", l.iface, nicName, err)
	}
	if err := h.LinkSetHardwareAddr(podIface, brLink.Attrs().HardwareAddr); err != nil {
		return nil, fmt.Errorf("%s: copy MAC from %s: %w", nicName, l.bridge, err)
	}
	if err := h.LinkSetMaster(podIface, brLink); err != nil {
		return nil, err
	}
	if err := h.LinkSetLearning(podIface, false); err != nil {
		return nil, fmt.Errorf("%s learning off: %w", nicName, err)
	}
	if err := h.LinkSetUp(podIface); err != nil {
		return nil, err
	}

	// The guest's NIC: a veth standing in for the tap, MTU of the pod iface.
	veth := &netlink.Veth{
		LinkAttrs:        netlink.LinkAttrs{Name: l.tap, MTU: orig.MTU, MasterIndex: brLink.Attrs().Index},
		PeerName:         guestIface,
		PeerHardwareAddr: origMAC,
		PeerMTU:          uint32(orig.MTU),
		PeerNamespace:    netlink.NsFd(guestNS),
	}
	if err := h.LinkAdd(veth); err != nil {
		return nil, fmt.Errorf("guest link %s: %w", l.tap, err)
	}
	tap, err := h.LinkByName(l.tap)
	if err != nil {
		return nil, err
	}
	if err := h.LinkSetUp(tap); err != nil {
		return nil, err
	}

	// The dummy keeps the original name, MAC, MTU and addresses.
	dummy := &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: l.iface, HardwareAddr: origMAC, MTU: orig.MTU}}
	if err := h.LinkAdd(dummy); err != nil {
		return nil, fmt.Errorf("dummy %s (kernel needs CONFIG_DUMMY): %w", l.iface, err)
	}
	for _, a := range addrs {
		a := a
		a.Label = ""
		if err := h.AddrAdd(dummy, &a); err != nil {
			return nil, fmt.Errorf("dummy %s address %s: %w", l.iface, a.IPNet, err)
		}
	}
	return origMAC, nil
}

// txChecksumOff turns off transmit checksum offload on the bridge, as
// KubeVirt's Ethtool{TxChecksum: false} does.
func txChecksumOff(iface string) error {
	e, err := ethtool.NewEthtool()
	if err != nil {
		return err
	}
	defer e.Close()
	return e.Change(iface, map[string]bool{"tx-checksum-ip-generic": false})
}
