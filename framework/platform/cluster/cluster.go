// Package cluster is the cluster tier: the same Platform, Node, Gateway and
// Guest the lab implements, on Kubernetes with Multus and KubeVirt.
//
//	 host: gateway netns vcf-gw (framework/fabric, as in the lab)
//	+---------------------------+   veth trunk   kind node container vcf-worker (its netns, by PID)
//	| trunk.100 203.0.113.1/24  |<==============>| uplink -> uplink.100 -> br100 203.0.113.2/24
//	| trunk.200 198.51.100.1/24 |   802.1Q       |   Multus thick -> bridge plugin (NAD vlan100)
//	+---------------------------+                |   virt-launcher: KubeVirt bridge binding -> VM
//	                               ==============>| vcf-worker2: the same, br100 203.0.113.3/24
//
// Two ways to get a cluster, one code path: kind (the suite makes it, cables
// the workers, installs Multus and KubeVirt, deletes it afterwards unless
// --keep-cluster), or an existing cluster (--kubeconfig: the suite only
// creates namespaces, NADs, Secrets and VMs, labelled, and deletes them).
// Every step of building is a step of one plan: --dry-run prints the plan
// and the guide's objects instead of applying them.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	nadclient "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"kubevirt.io/client-go/kubevirt"

	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/console"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/kind"
	kindconfig "github.com/cozystack/vlan-conformance/kind-config"
)

// Cluster implements platform.Platform on Kubernetes.
type Cluster struct {
	cfg      *config.Config
	timeouts map[string]time.Duration
	img      GuestImage
	work     string // kubeconfig, serial logs

	kind       *kind.Cluster
	kubeconfig string
	rest       *rest.Config
	c          clients
	apply      *applier

	fab     *fabric.Fabric
	nodes   []*node // the guide's bridge nodes
	macvlan *node   // provisioned as macvlan users do (nil: none)
	// untagged: the trunk carries the VLAN in access mode (why says why).
	untagged bool
	trunkWhy string
	pids     map[string]int // every node container's PID
	gw       platform.Gateway

	multus    []*unstructured.Unstructured // the Multus manifest as applied
	stager    *corev1.Container            // the stager's init container (--cni-staging=stager)
	stagerVol string

	mu         sync.Mutex
	guests     map[string]*guest
	pods       map[string]*podGuest // --workload=pod
	namespaces map[string]bool      // made by this run
	created    []*unstructured.Unstructured
	failed     bool // a spec failed: export kind's logs before deleting
}

var _ platform.Platform = (*Cluster)(nil)
var _ platform.KubeVMs = (*Cluster)(nil)
var _ platform.CNIStaging = (*Cluster)(nil)

func newCluster(cfg *config.Config) (*Cluster, error) {
	t, err := cfg.Cluster.StageTimeouts()
	if err != nil {
		return nil, err
	}
	work := cfg.WorkDir
	if work == "" {
		work = filepath.Join(".cache", "cluster")
	}
	return &Cluster{
		cfg: cfg, timeouts: t, work: work,
		img:    GuestImage{Image: cfg.Cluster.GuestImage, User: cfg.Cluster.GuestUser, Password: cfg.Cluster.GuestPassword},
		guests: map[string]*guest{}, pods: map[string]*podGuest{}, namespaces: map[string]bool{}, pids: map[string]int{},
	}, nil
}

// New builds the platform: the plan's steps in order. On error, whatever was
// made is removed (and kind's logs exported first).
func New(ctx context.Context, cfg *config.Config) (*Cluster, error) {
	c, err := newCluster(cfg)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(c.work, 0o755); err != nil {
		return nil, err
	}
	steps, err := c.plan()
	if err != nil {
		return nil, err
	}
	for _, s := range steps {
		if s.do == nil {
			continue
		}
		if err := s.do(ctx); err != nil {
			c.failed = true
			return nil, errors.Join(fmt.Errorf("%s: %s: %w", s.Phase, s.Action, err), c.Close(context.WithoutCancel(ctx)))
		}
	}
	return c, nil
}

func (c *Cluster) Name() string {
	if c.cfg.ExistingCluster() {
		return "cluster (existing, " + c.cfg.Kubeconfig + ")"
	}
	return "cluster (kind " + c.cfg.Cluster.KindName + ")"
}

func (c *Cluster) Config() *config.Config    { return c.cfg }
func (c *Cluster) Gateway() platform.Gateway { return c.gw }

func (c *Cluster) BridgeNodes() []platform.Node {
	var out []platform.Node
	for _, n := range c.nodes {
		out = append(out, n)
	}
	return out
}

// MacvlanNode is the control plane of a kind cluster, provisioned as
// macvlan users do (address on the VLAN parent, no bridge).
func (c *Cluster) MacvlanNode() platform.Node {
	if c.macvlan == nil {
		return nil
	}
	return c.macvlan
}

// allNodes are the cabled nodes, bridge nodes first.
func (c *Cluster) allNodes() []*node {
	out := append([]*node{}, c.nodes...)
	if c.macvlan != nil {
		out = append(out, c.macvlan)
	}
	return out
}

// Untagged reports whether the trunk runs in access mode.
func (c *Cluster) Untagged() (bool, string) { return c.untagged, c.trunkWhy }

// Pods reports whether the run's workloads are pods (--workload=pod).
func (c *Cluster) Pods() bool { return c.cfg.Cluster.Workload == "pod" }

func (c *Cluster) Trunk(pn platform.Node) evidence.Point {
	if c.fab == nil || c.fab.Gateway == nil {
		return evidence.Point{Label: "trunk of " + pn.Name() + " (not observable: the vendor's switch)"}
	}
	return evidence.Point{Netns: c.fab.Gateway.Path, Iface: fabric.PortName(pn.Name()), Label: "trunk (switch port of " + pn.Name() + ")"}
}

func (c *Cluster) connect(kubeconfig string) error {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	rc.QPS, rc.Burst = 50, 100
	c.rest = rc
	if c.c.kube, err = kubernetes.NewForConfig(rc); err != nil {
		return err
	}
	if c.c.kv, err = kubevirt.NewForConfig(rc); err != nil {
		return err
	}
	if c.c.nad, err = nadclient.NewForConfig(rc); err != nil {
		return err
	}
	c.apply, err = newApplier(rc)
	return err
}

// ensureNamespace creates a tenant namespace unless it exists.
func (c *Cluster) ensureNamespace(ctx context.Context, name string) error {
	_, err := c.c.kube.CoreV1().Namespaces().Create(ctx, renderNamespace(name), metav1.CreateOptions{})
	switch {
	case err == nil:
		c.mu.Lock()
		c.namespaces[name] = true
		c.mu.Unlock()
		return nil
	case apierrors.IsAlreadyExists(err):
		return nil
	}
	return err
}

// record remembers an object made in a namespace this run did not make.
func (c *Cluster) record(namespace string, obj any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.namespaces[namespace] {
		return
	}
	if u, err := toUnstructured(obj); err == nil {
		c.created = append(c.created, u)
	}
}

func (c *Cluster) ApplyNAD(ctx context.Context, namespace string, nad platform.NAD) error {
	if err := c.ensureNamespace(ctx, namespace); err != nil {
		return err
	}
	if c.untagged {
		// No uplink.100 on an untagged trunk: the uplink is the parent.
		sub := fmt.Sprintf("%q", fabric.SubName(fabric.UplinkName, c.cfg.VLAN))
		if strings.Contains(nad.Config, sub) {
			nad.Config = strings.ReplaceAll(nad.Config, sub, fmt.Sprintf("%q", fabric.UplinkName))
			evidence.Note("workload", "NAD %s/%s: master %s -> %q (untagged trunk: %s)", namespace, nad.Name, sub, fabric.UplinkName, c.trunkWhy)
		}
	}
	obj := renderNAD(namespace, nad)
	u, err := toUnstructured(obj)
	if err != nil {
		return err
	}
	if err := c.apply.Apply(ctx, []*unstructured.Unstructured{u}); err != nil {
		return err
	}
	c.record(namespace, obj)
	return nil
}

// create applies a VM's Secret and VirtualMachine.
func (c *Cluster) create(ctx context.Context, spec platform.VMSpec) error {
	if err := c.ensureNamespace(ctx, spec.Namespace); err != nil {
		return err
	}
	nodeName := ""
	if spec.Node != nil {
		nodeName = spec.Node.Name()
	}
	r := renderVM(spec, c.img, nodeName)
	var objs []*unstructured.Unstructured
	for _, o := range []any{r.Secret, r.VM} {
		u, err := toUnstructured(o)
		if err != nil {
			return err
		}
		objs = append(objs, u)
		c.record(spec.Namespace, o)
	}
	return c.apply.Apply(ctx, objs)
}

func (c *Cluster) StartVMNoWait(ctx context.Context, spec platform.VMSpec) error {
	if c.Pods() {
		return fmt.Errorf("starting a VM without waiting: %w (--workload=pod)", platform.ErrNotObservable)
	}
	return c.create(ctx, spec)
}

// StartVM creates the VM, waits through the stages nad and vmi, logs into
// its console, waits for cloud-init, and finds its VLAN NIC by MAC.
func (c *Cluster) StartVM(ctx context.Context, spec platform.VMSpec) (platform.Guest, error) {
	if c.Pods() || spec.Binding == platform.NoBinding {
		return c.startPod(ctx, spec)
	}
	if err := c.create(ctx, spec); err != nil {
		return nil, err
	}
	name := InstanceName(spec.Name)
	if err := WaitAll(ctx, vmStages(c.c, c.timeouts, spec.Namespace, name, spec.Networks)); err != nil {
		return nil, err
	}
	g := &guest{c: c, spec: spec, vmName: name}
	if err := c.readStatus(ctx, g); err != nil {
		return nil, err
	}
	line, err := console.Dial(ctx, c.rest, spec.Namespace, name)
	if err != nil {
		return nil, err
	}
	g.serialLog = filepath.Join(c.work, "serial", spec.Namespace+"_"+name+".log")
	os.MkdirAll(filepath.Dir(g.serialLog), 0o755)
	logf, err := os.OpenFile(g.serialLog, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		line.Close()
		return nil, err
	}
	g.con = console.New(line, logf)
	if err := g.con.Login(ctx, c.img.User, c.img.Password, c.timeouts["vmi"]); err != nil {
		return nil, fmt.Errorf("guest %s: %w (serial log %s)", spec.Name, err, g.serialLog)
	}
	if _, code, err := g.con.Run(ctx, "cloud-init status --wait >/dev/null", c.timeouts["vmi"]); err != nil || code != 0 {
		return nil, fmt.Errorf("guest %s: cloud-init did not finish cleanly (exit %d): %v", spec.Name, code, err)
	}
	if len(spec.Networks) > 0 {
		out, err := g.must(ctx, "ip -o link")
		if err != nil {
			return nil, err
		}
		if g.vlanIface, err = ifaceByMAC(out, g.status.VLANMAC); err != nil {
			return nil, fmt.Errorf("guest %s: %w", spec.Name, err)
		}
		if err := g.installARPTool(ctx); err != nil {
			return nil, err
		}
	}
	c.mu.Lock()
	c.guests[spec.Namespace+"/"+spec.Name] = g
	c.mu.Unlock()
	return g, nil
}

// readStatus reads the VMI: UIDs, node, the VLAN MAC, the pod interface and
// what the CNI plugin returned (the network-status annotation).
func (c *Cluster) readStatus(ctx context.Context, g *guest) error {
	st, err := c.vmStatus(ctx, g.spec, g.vmName)
	if err != nil {
		return err
	}
	g.status = st
	for _, n := range c.allNodes() {
		if n.name == st.Node {
			g.node = n
		}
	}
	if g.node == nil {
		g.node = &node{name: st.Node}
	}
	if len(g.spec.Networks) == 0 {
		return nil
	}
	nad := g.spec.Networks[0]
	vmi, err := c.c.kv.KubevirtV1().VirtualMachineInstances(g.spec.Namespace).Get(ctx, g.vmName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, i := range vmi.Status.Interfaces {
		if i.Name == nad {
			g.podIface = i.PodInterfaceName
		}
	}
	g.attachment = platform.Attachment{NAD: nad, PodInterface: g.podIface}
	pods, err := c.c.kube.CoreV1().Pods(g.spec.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "kubevirt.io/created-by=" + string(vmi.UID)})
	if err != nil {
		return err
	}
	for _, p := range pods.Items {
		g.attachment.CNIResultIPs, g.attachment.MTU = networkStatus(p.Annotations["k8s.v1.cni.cncf.io/network-status"], g.spec.Namespace+"/"+nad)
		// The pod side is observed apart from what Multus reports: the
		// addresses on the launcher's own links for this network.
		if g.attachment.PodIPv4, err = launcherIPv4(string(p.UID), g.podIface); err != nil {
			return fmt.Errorf("launcher pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	return nil
}

func (c *Cluster) vmStatus(ctx context.Context, spec platform.VMSpec, vmName string) (platform.VMStatus, error) {
	var st platform.VMStatus
	vm, err := c.c.kv.KubevirtV1().VirtualMachines(spec.Namespace).Get(ctx, vmName, metav1.GetOptions{})
	if err != nil {
		return st, err
	}
	vmi, err := c.c.kv.KubevirtV1().VirtualMachineInstances(spec.Namespace).Get(ctx, vmName, metav1.GetOptions{})
	if err != nil {
		return st, err
	}
	st.VMUID, st.VMIUID, st.Node = string(vm.UID), string(vmi.UID), vmi.Status.NodeName
	if len(spec.Networks) > 0 {
		for _, i := range vmi.Status.Interfaces {
			if i.Name == spec.Networks[0] && i.MAC != "" {
				if st.VLANMAC, err = net.ParseMAC(i.MAC); err != nil {
					return st, err
				}
			}
		}
		if st.VLANMAC == nil {
			return st, fmt.Errorf("VMI %s/%s: no MAC for network %s in status.interfaces", spec.Namespace, vmName, spec.Networks[0])
		}
	}
	return st, nil
}

func (c *Cluster) VMStatus(ctx context.Context, pg platform.Guest) (platform.VMStatus, error) {
	g, ok := pg.(*guest)
	if !ok {
		return platform.VMStatus{}, fmt.Errorf("VMI status of %s: %w (a pod workload)", pg.Name(), platform.ErrNotObservable)
	}
	return c.vmStatus(ctx, g.spec, g.vmName)
}

func (c *Cluster) VMEvents(ctx context.Context, namespace, vmName string) ([]platform.Event, error) {
	var evs []corev1.Event
	var err error
	if c.Pods() {
		evs, err = podEvents(ctx, c.c, namespace, podName(vmName))
	} else {
		evs, err = vmEvents(ctx, c.c.kube, namespace, InstanceName(vmName))
	}
	if err != nil {
		return nil, err
	}
	var out []platform.Event
	for _, e := range evs {
		out = append(out, platform.Event{Object: e.InvolvedObject.Kind + "/" + e.InvolvedObject.Name, Type: e.Type, Reason: e.Reason, Message: e.Message})
	}
	return out, nil
}

func (c *Cluster) VMIInterfaces(ctx context.Context, namespace, vmName string) ([]string, error) {
	vmi, err := c.c.kv.KubevirtV1().VirtualMachineInstances(namespace).Get(ctx, InstanceName(vmName), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, i := range vmi.Status.Interfaces {
		out = append(out, i.Name)
	}
	return out, nil
}

// DeleteVM deletes the VirtualMachine and its Secret and waits until the
// VMI is gone (its launcher released the attachment).
func (c *Cluster) DeleteVM(ctx context.Context, pg platform.Guest) error {
	if pg, ok := pg.(*podGuest); ok {
		return c.deletePod(ctx, pg.spec.Namespace, pg.spec.Name)
	}
	g := pg.(*guest)
	c.mu.Lock()
	delete(c.guests, g.spec.Namespace+"/"+g.spec.Name)
	c.mu.Unlock()
	if g.con != nil {
		g.con.Close()
	}
	return c.deleteVM(ctx, g.spec.Namespace, g.spec.Name)
}

func (c *Cluster) deleteVM(ctx context.Context, namespace, app string) error {
	name := InstanceName(app)
	fg := metav1.DeletePropagationForeground
	err := c.c.kv.KubevirtV1().VirtualMachines(namespace).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &fg})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	err = c.c.kube.CoreV1().Secrets(namespace).Delete(ctx, CloudInitSecretName(app), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	gone := Stage{Name: "vmi", What: "VMI " + namespace + "/" + name + " deleted", Timeout: c.timeouts["vmi"], Check: func(ctx context.Context) (bool, string, error) {
		_, err := c.c.kv.KubevirtV1().VirtualMachineInstances(namespace).Get(ctx, name, metav1.GetOptions{})
		_, verr := c.c.kv.KubevirtV1().VirtualMachines(namespace).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err) && apierrors.IsNotFound(verr), "still there", nil
	}}
	return gone.Wait(ctx)
}

// SetStaging re-renders the Multus DaemonSet with the stager's init
// container (on) or without it (off), rolls it out and reads back the pod
// template's init containers.
func (c *Cluster) SetStaging(ctx context.Context, on bool) ([]string, error) {
	if c.cfg.ExistingCluster() || c.multus == nil {
		return nil, fmt.Errorf("rendering Multus on a cluster the suite did not install it on: %w", platform.ErrNotObservable)
	}
	var stager *corev1.Container
	if on {
		if c.stager == nil {
			return nil, fmt.Errorf("staging on needs --cni-staging=stager and --cni-plugins-image: %w", platform.ErrNotObservable)
		}
		stager = c.stager
	}
	rev := fmt.Sprintf("%v-%d", on, time.Now().UnixNano())
	if err := withStaging(c.multus, stager, c.stagerVol, rev); err != nil {
		return nil, err
	}
	if err := c.apply.Apply(ctx, c.multus); err != nil {
		return nil, err
	}
	if err := setupStages(c.c, c.timeouts)[1].Wait(ctx); err != nil {
		return nil, err
	}
	list, err := c.c.kube.AppsV1().DaemonSets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	names := []string{}
	for _, ds := range list.Items {
		if strings.Contains(ds.Name, "multus") {
			for _, ic := range ds.Spec.Template.Spec.InitContainers {
				names = append(names, ic.Name)
			}
		}
	}
	return names, nil
}

func (c *Cluster) CNIBin(_ context.Context, pn platform.Node) (map[string]platform.FileState, error) {
	n, ok := pn.(*node)
	if !ok || n.pid == 0 {
		return nil, fmt.Errorf("reading /opt/cni/bin of %s: %w", pn.Name(), platform.ErrNotObservable)
	}
	return snapshotDir(n.hostPath(n.CNIBinDir()))
}

// Close deletes what the run made, in reverse: VMs and namespaces (or
// single objects in namespaces it did not make), the links in the nodes
// and the gateway netns, then the kind cluster unless it was found, not
// made, or --keep-cluster. kind's logs go to the report dir first if a
// spec failed.
func (c *Cluster) Close(ctx context.Context) error {
	var errs []error
	if c.c.kube != nil {
		c.mu.Lock()
		guests := c.guests
		c.guests = map[string]*guest{}
		c.mu.Unlock()
		for _, g := range guests {
			if g.con != nil {
				g.con.Close()
			}
		}
		c.mu.Lock()
		for _, p := range c.pods {
			p.Handle.Close()
		}
		c.pods = map[string]*podGuest{}
		c.mu.Unlock()
		errs = append(errs, c.deleteOwned(ctx))
	}
	if c.fab != nil {
		errs = append(errs, c.fab.Destroy())
		c.fab = nil
	}
	if c.kind != nil {
		if c.failed {
			dir := filepath.Join(c.cfg.ReportDir, "kind-logs")
			if err := c.kind.ExportLogs(dir); err != nil {
				errs = append(errs, fmt.Errorf("kind export logs: %w", err))
			}
		}
		if c.kind.Created && !c.cfg.Cluster.KeepCluster {
			errs = append(errs, c.kind.Delete(c.kubeconfig))
		}
	}
	return errors.Join(errs...)
}

func (c *Cluster) deleteOwned(ctx context.Context) error {
	var errs []error
	c.mu.Lock()
	created := c.created
	var namespaces []string
	for ns := range c.namespaces {
		namespaces = append(namespaces, ns)
	}
	c.created, c.namespaces = nil, map[string]bool{}
	c.mu.Unlock()
	sort.Strings(namespaces)
	for i := len(created) - 1; i >= 0; i-- {
		o := created[i]
		if o.GetKind() == "Pod" {
			errs = append(errs, c.deletePod(ctx, o.GetNamespace(), strings.TrimPrefix(o.GetName(), "pod-")))
			continue
		}
		if o.GetKind() == "VirtualMachine" {
			errs = append(errs, c.deleteVM(ctx, o.GetNamespace(), strings.TrimPrefix(o.GetName(), "vm-instance-")))
			continue
		}
		if o.GetKind() == "NetworkAttachmentDefinition" {
			err := c.c.nad.K8sCniCncfIoV1().NetworkAttachmentDefinitions(o.GetNamespace()).Delete(ctx, o.GetName(), metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		}
	}
	for _, ns := range namespaces {
		err := c.c.kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// nodeAddr is the n-th node's address on the VLAN: .2, .3, ...
func nodeAddr(subnet netip.Prefix, i int) netip.Prefix {
	a := subnet.Addr().As4()
	a[3] += byte(2 + i)
	return netip.PrefixFrom(netip.AddrFrom4(a), subnet.Bits())
}

func (c *Cluster) kindConfig() ([]byte, error) {
	if c.cfg.Cluster.KindConfig != "" {
		return os.ReadFile(c.cfg.Cluster.KindConfig)
	}
	return kindconfig.Default(), nil
}

// Down removes what `kind-up` left: the links in the nodes, the gateway
// netns and the kind cluster.
func Down(ctx context.Context, cfg *config.Config) error {
	k, err := kind.Find(cfg.Cluster.KindName, cfg.Cluster.Runtime)
	if err != nil {
		return err
	}
	nodes, err := k.Nodes()
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range nodes {
		pid, err := kind.PID(ctx, cfg.Cluster.Runtime, n.Name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, fabric.Uncable(fmt.Sprintf("/proc/%d/ns/net", pid)))
	}
	errs = append(errs, fabric.Sweep(), k.Delete(""))
	return errors.Join(errs...)
}
