package cluster

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cozystack/vlan-conformance/fixtures"
	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/gateway"
	"github.com/cozystack/vlan-conformance/framework/kernel"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/kind"
)

// step is one thing building the platform does: what --dry-run prints, and
// what New runs, from the same list.
type step struct {
	Phase  string // cluster, node, apply, wait
	Action string
	Object any // printed in full by --dry-run
	do     func(ctx context.Context) error
}

// plan lists the steps of building this run's platform, in order.
func (c *Cluster) plan() ([]step, error) {
	cl := &c.cfg.Cluster
	var steps []step
	add := func(phase, action string, obj any, do func(context.Context) error) {
		steps = append(steps, step{Phase: phase, Action: action, Object: obj, do: do})
	}
	wait := func(s func() Stage, desc string) {
		add("wait", desc, nil, func(ctx context.Context) error { return s().Wait(ctx) })
	}
	subnet := netip.MustParsePrefix(c.cfg.Subnet)
	if c.cfg.ExistingCluster() {
		add("cluster", "use the existing cluster of "+c.cfg.Kubeconfig+" (no kind; the suite creates only namespaces, NADs, Secrets and VMs, labelled "+OwnedLabel+"=true)", nil,
			func(context.Context) error { c.kubeconfig = c.cfg.Kubeconfig; return c.connect(c.kubeconfig) })
		for i, name := range []string{"nodes", "multus", "kubevirt"} {
			i := i
			wait(func() Stage { return setupStages(c.c, c.timeouts)[i] }, fmt.Sprintf("stage %s (timeout %s)", name, c.timeouts[name]))
		}
		add("node", "the node bridge br100 over uplink.100 is the vendor's, provisioned per the guide's step 1: not visible through the API, so not checked here; the datapath specs are the check", nil, c.existingNodes)
		add("gateway", "the gateway is the vendor's: "+c.cfg.Gateway+" (--gateway), addressed but not observed", nil, func(context.Context) error {
			c.gw = gateway.Vendor{Addr: netip.MustParseAddr(c.cfg.Gateway)}
			return nil
		})
		return steps, nil
	}

	raw, err := c.kindConfig()
	if err != nil {
		return nil, err
	}
	kc, err := kind.ParseConfig(raw)
	if err != nil {
		return nil, err
	}
	cps, workers := kind.NodeNames(cl.KindName, kc)
	all := append(append([]string{}, cps...), workers...)
	image := cl.KindNodeImage
	if image == "" {
		image = "kind's default"
	}
	configName := cl.KindConfig
	if configName == "" {
		configName = "kind-config/cluster.yaml"
	}
	c.kubeconfig = filepath.Join(c.work, "kind-"+cl.KindName+".kubeconfig")
	add("cluster", fmt.Sprintf("kind: create cluster %s with %s (runtime %s, node image %s: %s), kubeconfig %s; an existing cluster of that name is reused and kept",
		cl.KindName, configName, cl.Runtime, image, strings.Join(all, ", "), c.kubeconfig), nil, func(ctx context.Context) error {
		raw, fixes, err := kind.HostFixes(raw)
		if err != nil {
			return err
		}
		for _, f := range fixes {
			fmt.Fprintln(os.Stderr, "kind: "+f)
		}
		wait := c.timeouts["nodes"]
		if cl.PodNetwork == "ptp" {
			wait = 0 // nodes turn Ready only once the suite gives them a pod network
		}
		k, err := kind.Up(kind.Options{Name: cl.KindName, Runtime: cl.Runtime, Config: raw, NodeImage: cl.KindNodeImage, KubeconfigPath: c.kubeconfig, WaitForReady: wait})
		if err != nil {
			return err
		}
		c.kind = k
		for _, n := range all {
			pid, err := kind.PID(ctx, cl.Runtime, n)
			if err != nil {
				return err
			}
			c.pids[n] = pid
		}
		return c.connect(c.kubeconfig)
	})
	for _, a := range cl.Archives() {
		a := a
		add("cluster", "kind load image-archive "+a+" into every node", nil, func(context.Context) error { return c.kind.LoadArchive(a) })
	}
	if cl.PodNetwork == "ptp" {
		for _, n := range all {
			n := n
			add("node", n+": write /etc/cni/net.d/10-vcf-ptp.conflist (ptp + host-local over the node's podCIDR, portmap) and routes to the other nodes' pod CIDRs", nil,
				func(ctx context.Context) error { return c.ptpPodNetwork(ctx, n) })
		}
	}
	wait(func() Stage { return setupStages(c.c, c.timeouts)[0] }, fmt.Sprintf("stage nodes (timeout %s)", c.timeouts["nodes"]))

	gw := netip.PrefixFrom(netip.MustParseAddr(c.cfg.Gateway), subnet.Bits())
	other := netip.MustParsePrefix(c.cfg.OtherSubnet)
	otherGW := netip.PrefixFrom(netip.MustParseAddr(c.cfg.OtherGateway), other.Bits())
	untagged, trunkWhy := c.trunkMode()
	var specs []fabric.NodeSpec
	for i, w := range workers {
		specs = append(specs, fabric.NodeSpec{Name: w, Wiring: fabric.GuideBridge, Address: nodeAddr(subnet, i)})
	}
	// The control plane carries the macvlan claims: provisioned as macvlan
	// users do, so the guide's bridge nodes stay as the guide has them.
	if len(cps) > 0 {
		specs = append(specs, fabric.NodeSpec{Name: cps[0], Wiring: fabric.MacvlanParent, Address: nodeAddr(subnet, len(workers))})
	}
	hostStep := len(steps)
	parent := fabric.SubName(fabric.UplinkName, c.cfg.VLAN)
	if untagged {
		parent = fabric.UplinkName
		add("host", fmt.Sprintf("gateway netns %sgw: switch bridge %s %s, untagged (%s); no second VLAN; neighbour timers --arp-profile=%s",
			fabric.Prefix, fabric.TrunkName, gw, trunkWhy, c.cfg.ARPProfile), nil, nil)
	} else {
		add("host", fmt.Sprintf("gateway netns %sgw: switch bridge %s; %s %s; %s %s (%s); neighbour timers --arp-profile=%s",
			fabric.Prefix, fabric.TrunkName, fabric.SubName(fabric.TrunkName, c.cfg.VLAN), gw, fabric.SubName(fabric.TrunkName, c.cfg.OtherVLAN), otherGW, trunkWhy, c.cfg.ARPProfile), nil, nil)
	}
	for _, s := range specs {
		vlan := fmt.Sprintf("%s (VLAN %d, no address) in %s; %s %s", parent, c.cfg.VLAN, fabric.BridgeName, fabric.BridgeName, s.Address)
		if untagged {
			vlan = fmt.Sprintf("%s itself in %s; %s %s", parent, fabric.BridgeName, fabric.BridgeName, s.Address)
		}
		if s.Wiring == fabric.MacvlanParent {
			vlan = fmt.Sprintf("%s %s, no bridge (the macvlan node)", parent, s.Address)
		}
		add("node", fmt.Sprintf("%s (netns of its container's PID, from `%s inspect`): trunk veth %s <-> %sgw:%s; %s",
			s.Name, cl.Runtime, fabric.UplinkName, fabric.Prefix, fabric.PortName(s.Name), vlan), nil, nil)
	}
	// One netlink pass builds the gateway and cables every node listed above.
	steps[hostStep].do = func(context.Context) error {
		c.untagged, c.trunkWhy = untagged, trunkWhy
		return c.cable(specs, gw, otherGW, untagged)
	}

	switch cl.CNIStaging {
	case "installer":
		for _, n := range all {
			n := n
			add("node", n+": copy the reference plugins of "+c.cfg.PluginDir+" into /opt/cni/bin (each written aside, then renamed over)", nil,
				func(context.Context) error {
					return installPlugins(c.cfg.PluginDir, fmt.Sprintf("/proc/%d/root/opt/cni/bin", c.pids[n]))
				})
		}
	case "none":
		add("node", "no CNI plugins staged (--cni-staging=none): the node image's /opt/cni/bin is used as it is", nil, nil)
	}
	ms := Manifests(cl)
	multusAction := fmt.Sprintf("Multus thick %s: %s (cached at %s)", ms[0].Version, ms[0].URL, ms[0].Path(cl.ManifestsDir))
	if cl.CNIStaging == "stager" {
		multusAction += fmt.Sprintf("; its DaemonSet gets the init container %s of %s, image %s", stagerContainer, c.cfg.StagerManifest, cl.CNIPluginsImage)
	}
	add("apply", multusAction, nil, func(ctx context.Context) error {
		b, err := ms[0].Load(ctx, cl.ManifestsDir)
		if err != nil {
			return err
		}
		if c.multus, err = Decode(b); err != nil {
			return err
		}
		if cl.CNIStaging == "stager" {
			sm, err := os.ReadFile(c.cfg.StagerManifest)
			if err != nil {
				return err
			}
			ic, vol, err := stagerInit(sm, cl.CNIPluginsImage)
			if err != nil {
				return err
			}
			c.stager, c.stagerVol = &ic, vol
		}
		if err := withStaging(c.multus, c.stager, c.stagerVol, ""); err != nil {
			return err
		}
		return c.apply.Apply(ctx, c.multus)
	})
	wait(func() Stage { return setupStages(c.c, c.timeouts)[1] }, fmt.Sprintf("stage multus (timeout %s)", c.timeouts["multus"]))
	if cl.Workload == "pod" {
		add("apply", "no KubeVirt (--workload=pod): the workloads are pods attached by Multus, image "+PodImage, nil, nil)
		return steps, nil
	}
	add("apply", fmt.Sprintf("KubeVirt operator %s: %s (cached at %s)", ms[1].Version, ms[1].URL, ms[1].Path(cl.ManifestsDir)), nil, func(ctx context.Context) error {
		b, err := ms[1].Load(ctx, cl.ManifestsDir)
		if err != nil {
			return err
		}
		objs, err := Decode(b)
		if err != nil {
			return err
		}
		return c.apply.Apply(ctx, objs)
	})
	emulation, why := c.emulation()
	add("apply", "the KubeVirt CR (useEmulation: "+fmt.Sprint(emulation)+": "+why+")", KubeVirtCR(emulation), func(ctx context.Context) error {
		u, err := toUnstructured(KubeVirtCR(emulation))
		if err != nil {
			return err
		}
		return c.apply.Apply(ctx, []*unstructured.Unstructured{u})
	})
	wait(func() Stage { return setupStages(c.c, c.timeouts)[2] }, fmt.Sprintf("stage kubevirt (timeout %s)", c.timeouts["kubevirt"]))
	return steps, nil
}

// trunkMode decides whether the trunk carries the VLAN untagged: kind nodes
// share the host's kernel, and without 8021q there is no uplink.100.
func (c *Cluster) trunkMode() (untagged bool, why string) {
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

// emulation decides KubeVirt's useEmulation.
func (c *Cluster) emulation() (bool, string) {
	switch c.cfg.Cluster.Emulation {
	case "on":
		return true, "--kubevirt-emulation=on"
	case "off":
		return false, "--kubevirt-emulation=off"
	}
	if c.cfg.Cluster.DryRun {
		return true, "--kubevirt-emulation=auto decides at run time by running a test guest on /dev/kvm; shown as if KVM were unusable"
	}
	ok, why := KVMUsable(3 * time.Second)
	return !ok, "--kubevirt-emulation=auto: " + why
}

// DryRun prints every object and node action the run would apply, in
// order: the platform's steps, then the guide's example (vm-instance
// values networks: [{name: vlan100}] with its cloudInit, in tenant-example)
// and its readiness stages, then what is removed afterwards.
func DryRun(w io.Writer, c *Cluster) error {
	steps, err := c.plan()
	if err != nil {
		return err
	}
	n := 0
	p := func(phase, action string, obj any) error {
		n++
		fmt.Fprintf(w, "# %02d %-7s %s\n", n, phase, action)
		if obj != nil {
			y, err := toYAML(obj)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "---\n%s", y)
		}
		return nil
	}
	fmt.Fprintf(w, "# conformance --tier=cluster --dry-run: %s\n", c.Name())
	for _, s := range steps {
		if err := p(s.Phase, s.Action, s.Object); err != nil {
			return err
		}
	}
	node := "the first VLAN node"
	if !c.cfg.ExistingCluster() {
		raw, _ := c.kindConfig()
		kc, _ := kind.ParseConfig(raw)
		_, workers := kind.NodeNames(c.cfg.Cluster.KindName, kc)
		node = workers[0]
	}
	spec := platform.VMSpec{Name: "vm-a", Namespace: "tenant-example", Networks: []string{"vlan100"}, CloudInit: fixtures.CloudInit(c.cfg.GuestAddr)}
	r := renderVM(spec, c.img, node)
	for _, o := range []struct {
		action string
		obj    any
	}{
		{"the guide's tenant namespace (unless it exists)", renderNamespace(spec.Namespace)},
		{"the guide's step 2: the bridge-type NAD in the VM's namespace", renderNAD(spec.Namespace, platform.NAD{Name: "vlan100", Config: fixtures.NAD("vlan100-bridge")})},
		{"the guide's step 3: the vm-instance cloud-init Secret", r.Secret},
		{"the guide's step 3: the VirtualMachine as vm-instance renders it, placed on " + node, r.VM},
	} {
		if err := p("apply", o.action, o.obj); err != nil {
			return err
		}
	}
	for _, s := range vmStages(clients{}, c.timeouts, spec.Namespace, r.VM.Name, spec.Networks) {
		p("wait", fmt.Sprintf("stage %s (timeout %s): %s", s.Name, s.Timeout, s.What), nil)
	}
	p("guest", "serial console of "+r.VM.Name+" (VMI console subresource): log in as "+c.img.User+", wait for cloud-init, find the VLAN NIC by the MAC in the VMI status", nil)
	p("delete", "the VMs, NADs and Secrets the run made, and the namespaces it made (label "+OwnedLabel+"=true)", nil)
	if !c.cfg.ExistingCluster() {
		p("node", "every cabled node: delete br100 and uplink (uplink.100 and the gateway's port go with it)", nil)
		p("host", "delete the gateway netns "+fabric.Prefix+"gw", nil)
		p("cluster", "kind delete cluster "+c.cfg.Cluster.KindName+" (unless --keep-cluster, or the cluster was found rather than made); kind export logs into "+filepath.Join(c.cfg.ReportDir, "kind-logs")+" first if a spec failed", nil)
	}
	return nil
}

// NewDryRun makes a Cluster that only plans (no client, nothing touched).
func NewDryRun(cfg *config.Config) (*Cluster, error) { return newCluster(cfg) }
