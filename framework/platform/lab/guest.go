package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/cozystack/vlan-conformance/framework/cloudinit"
	"github.com/cozystack/vlan-conformance/framework/cni"
	"github.com/cozystack/vlan-conformance/framework/controls"
	"github.com/cozystack/vlan-conformance/framework/dump"
	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/gateway"
	"github.com/cozystack/vlan-conformance/framework/guestnet"
	"github.com/cozystack/vlan-conformance/framework/nsexec"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/platform/nsguest"
)

// The pod network as the guest sees it: a stand-in for the cluster network,
// which only has to carry the guest's default route (the guide's dual-homed
// VM). Addresses from the documentation range 192.0.2.0/24.
var (
	podNetGuest  = netip.MustParsePrefix("192.0.2.10/24")
	podNetRouter = netip.MustParsePrefix("192.0.2.1/24")
)

const (
	podNIC  = "enp1s0" // first NIC: pod network
	vlanNIC = "enp2s0" // second NIC: the VLAN, as the guide's netplan names it
)

// guest is a VM in the lab: a virt-launcher pod netns and a guest netns.
type guest struct {
	nsguest.Netns // the guest netns, once made
	lab           *Lab
	spec          platform.VMSpec
	node          *node
	pod, vm       *fabric.Namespace
	mac           net.HardwareAddr
	attachment    platform.Attachment
	cniAtt        []cni.Attachment
}

// tenantName is a guest's name in the lab: its tenant (the VM's namespace
// in a cluster) as a prefix, so two tenants' VMs of one name never meet.
func tenantName(spec platform.VMSpec) string { return spec.Namespace + "-" + spec.Name }

func startGuest(ctx context.Context, l *Lab, spec platform.VMSpec) (_ *guest, err error) {
	n, ok := spec.Node.(*node)
	if !ok || n == nil {
		return nil, fmt.Errorf("VM %s: no lab node given", spec.Name)
	}
	g := &guest{lab: l, spec: spec, node: n}
	defer func() {
		if err != nil {
			err = errors.Join(err, g.destroy(ctx))
		}
	}()
	if g.pod, err = fabric.NewNamespace("pod-" + tenantName(spec)); err != nil {
		return nil, err
	}
	if spec.Binding == platform.NoBinding {
		return g, g.attachPod(ctx)
	}
	if g.vm, err = fabric.NewNamespace("vm-" + tenantName(spec)); err != nil {
		return nil, err
	}
	g.Netns = nsguest.Netns{Path: g.vm.Path, Handle: g.vm.Handle, NIC: vlanNIC, Label: "guest " + spec.Name}
	vmFd, err := netns.GetFromPath(g.vm.Path)
	if err != nil {
		return nil, err
	}
	defer vmFd.Close()
	if err := g.podNetwork(vmFd); err != nil {
		return nil, fmt.Errorf("pod network: %w", err)
	}
	if len(spec.Networks) != 1 {
		return nil, fmt.Errorf("VM %s: the lab attaches exactly one secondary network, got %v", spec.Name, spec.Networks)
	}
	nadName := spec.Networks[0]
	if err := g.add(ctx, nadName, "net1"); err != nil {
		return nil, err
	}
	if g.mac, err = newLauncher(g.pod.Handle, g.pod.Path, "net1").bind(int(vmFd), vlanNIC); err != nil {
		return nil, fmt.Errorf("bridge binding: %w", err)
	}
	if err := cloudinit.Apply(g.vm.Handle, spec.CloudInit); err != nil {
		return nil, fmt.Errorf("cloud-init: %w", err)
	}
	if subjectFor(l.cfg).ignoresPings {
		if err := fabric.NetSysctl(g.vm.Path, "ipv4/icmp_echo_ignore_all", "1"); err != nil {
			return nil, fmt.Errorf("guest: %w", err)
		}
	}
	switch l.cfg.SelectedControl().GuestUp {
	case controls.GuestAnnounces:
		if err := guestnet.GARP(ctx, g); err != nil {
			return nil, fmt.Errorf("announce at boot: %w", err)
		}
		// Let the announcement reach the gateway before the VM counts as up.
		time.Sleep(100 * time.Millisecond)
	case controls.GatewayResolves:
		gw, ok := l.gw.(*gateway.Netns)
		if !ok {
			return nil, fmt.Errorf("the gateway (%T) is not one the suite runs", l.gw)
		}
		addr, err := guestnet.VLANAddr(ctx, g)
		if err != nil {
			return nil, err
		}
		if err := gw.ProbeUntilLearned(ctx, addr, g.mac); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// add runs CNI ADD of the NAD into the pod namespace as ifName and records
// the attachment.
func (g *guest) add(ctx context.Context, nadName, ifName string) error {
	l, spec, n := g.lab, g.spec, g.node
	conf, err := l.nad(spec.Namespace, nadName)
	if err != nil {
		return err
	}
	// A pinned MAC reaches the plugin as Multus passes KubeVirt's: the MAC
	// CNI arg (and the "mac" capability); none leaves the veth the kernel's
	// random, locally administered one.
	att := cni.Attachment{
		NADNamespace: spec.Namespace, NADName: nadName, Config: conf,
		PodNamespace: spec.Namespace, PodName: "virt-launcher-" + spec.Name,
		ContainerID: "vcf-" + tenantName(spec), Netns: g.pod.Path, IfName: ifName, MAC: subjectFor(l.cfg).vmMAC(spec, l.macInUse),
	}
	rt := l.cniRuntime(n)
	var ips []netip.Prefix
	err = nsexec.Do(n.fab.Netns, func() error {
		res, err := rt.Add(ctx, att)
		if err != nil {
			return err
		}
		ips = cni.IPs(res)
		return nil
	})
	if err != nil {
		return fmt.Errorf("attach %s/%s on %s: %w", spec.Namespace, nadName, n.Name(), err)
	}
	g.cniAtt = append(g.cniAtt, att)
	g.attachment, err = g.readAttachment(nadName, ifName, ips)
	return err
}

// attachPod makes a workload without a VM: the attachment's interface is
// its VLAN NIC, carrying the userData's address itself.
func (g *guest) attachPod(ctx context.Context) error {
	if len(g.spec.Networks) != 1 {
		return fmt.Errorf("pod %s: the lab attaches exactly one secondary network, got %v", g.spec.Name, g.spec.Networks)
	}
	g.Netns = nsguest.Netns{Path: g.pod.Path, Handle: g.pod.Handle, NIC: vlanNIC, Label: "pod " + g.spec.Name}
	if err := g.add(ctx, g.spec.Networks[0], vlanNIC); err != nil {
		return err
	}
	l, err := g.pod.Handle.LinkByName(vlanNIC)
	if err != nil {
		return err
	}
	g.mac = l.Attrs().HardwareAddr
	if err := cloudinit.Apply(g.pod.Handle, g.spec.CloudInit); err != nil {
		return fmt.Errorf("cloud-init: %w", err)
	}
	return nil
}

// macInUse reports whether a running guest of the lab has the MAC.
func (l *Lab) macInUse(mac string) bool {
	want, err := net.ParseMAC(mac)
	if err != nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, g := range l.guests {
		if bytes.Equal(g.mac, want) {
			return true
		}
	}
	return false
}

// podNetwork gives the guest its first NIC with the default route.
func (g *guest) podNetwork(vmFd netns.NsHandle) error {
	h := g.pod.Handle
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth0-vm"}, PeerName: podNIC, PeerNamespace: netlink.NsFd(vmFd)}
	if err := h.LinkAdd(v); err != nil {
		return err
	}
	if err := upWithAddr(h, "eth0-vm", podNetRouter); err != nil {
		return err
	}
	if err := upWithAddr(g.vm.Handle, podNIC, podNetGuest); err != nil {
		return err
	}
	l, err := g.vm.Handle.LinkByName(podNIC)
	if err != nil {
		return err
	}
	// As a DHCP lease on the pod NIC would install it.
	return g.vm.Handle.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Gw: podNetRouter.Addr().AsSlice(), Priority: 100})
}

func upWithAddr(h *netlink.Handle, name string, p netip.Prefix) error {
	l, err := h.LinkByName(name)
	if err != nil {
		return err
	}
	if err := h.AddrAdd(l, &netlink.Addr{IPNet: cloudinit.IPNet(p)}); err != nil {
		return err
	}
	return h.LinkSetUp(l)
}

// readAttachment records the pod interface right after CNI ADD, before the
// launcher rebinds it.
func (g *guest) readAttachment(nad, ifName string, ips []netip.Prefix) (platform.Attachment, error) {
	a := platform.Attachment{NAD: nad, PodInterface: ifName, CNIResultIPs: ips}
	l, err := g.pod.Handle.LinkByName(ifName)
	if err != nil {
		return a, fmt.Errorf("CNI ADD left no %s in the pod: %w", ifName, err)
	}
	a.MTU = l.Attrs().MTU
	addrs, err := dump.Consistent(func() ([]netlink.Addr, error) { return g.pod.Handle.AddrList(l, netlink.FAMILY_V4) })
	if err != nil {
		return a, err
	}
	for _, ad := range addrs {
		a.PodIPv4 = append(a.PodIPv4, guestnet.PrefixOf(ad.IPNet))
	}
	return a, nil
}

// destroy runs CNI DEL and deletes the pod and guest namespaces.
func (g *guest) destroy(ctx context.Context) error {
	var errs []error
	rt := g.lab.cniRuntime(g.node)
	for _, a := range g.cniAtt {
		errs = append(errs, nsexec.Do(g.node.fab.Netns, func() error { return rt.Del(ctx, a) }))
	}
	g.cniAtt = nil
	for _, ns := range []*fabric.Namespace{g.vm, g.pod} {
		if ns != nil {
			errs = append(errs, ns.Delete())
		}
	}
	g.vm, g.pod = nil, nil
	return errors.Join(errs...)
}

func (g *guest) Name() string                    { return g.spec.Name }
func (g *guest) Node() platform.Node             { return g.node }
func (g *guest) MAC() net.HardwareAddr           { return g.mac }
func (g *guest) Attachment() platform.Attachment { return g.attachment }
func (g *guest) Spec() platform.VMSpec           { return g.spec }

// AnnounceGARP is the guest's own (guestnet.Announcer), except under the
// control that keeps it silent.
func (g *guest) AnnounceGARP(ctx context.Context) error {
	if subjectFor(g.lab.cfg).silentGuest {
		return nil
	}
	return guestnet.GARP(ctx, g)
}

// ARPProbe is the guest's own (guestnet.Prober), except under the control
// whose probe cannot leave: the VLAN NIC is down while it runs (the send
// fails with ENETDOWN).
func (g *guest) ARPProbe(ctx context.Context, ip netip.Addr, timeout time.Duration) (net.HardwareAddr, error) {
	if subjectFor(g.lab.cfg).probeCannotLeave {
		l, err := g.Handle.LinkByName(g.NIC)
		if err != nil {
			return nil, err
		}
		if err := g.Handle.LinkSetDown(l); err != nil {
			return nil, err
		}
		defer g.Handle.LinkSetUp(l)
	}
	return guestnet.WhoHas(ctx, g, ip, timeout)
}
