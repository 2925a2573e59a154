// Package workload is what the cluster tier runs on the VLAN: a KubeVirt
// VM (seen through its serial console) or, with --workload=pod, a pod
// attached by Multus (seen from inside its network namespace), both behind
// platform.Guest, both rendered from the same VMSpec.
package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/vlan-conformance/framework/addresses"
	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/kube"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/node"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/timeline"
	"github.com/cozystack/vlan-conformance/framework/subject"
)

// Workloads are the VMs or pods of a run, and the objects it made for them.
type Workloads struct {
	cfg      *config.Config
	subj     *subject.Subject // the release under test: the VM lane's renders; nil: the suite's own
	timeouts map[string]time.Duration
	img      GuestImage
	work     string // serial logs
	kube     *kube.Clients
	nodes    *node.Set
	trunk    platform.AccessTrunk // an untagged trunk changes the NADs' master
	gw       *platform.Gateway    // the VLAN's gateway, once cabled (controls.GatewayResolves)
	owner    kube.Owner
	timeline *timeline.Timeline // the first VMI Ready, the first login, every VM boot

	// creating serializes the render and apply of VMs started side by side
	// (the release's render records into one ledger); their waits overlap.
	creating sync.Mutex

	mu     sync.Mutex
	guests map[string]*vmGuest
	pods   map[string]*podGuest    // --workload=pod
	nads   map[string]platform.NAD // applied, by name (Control.NADCopiedIntoVMNamespace)
}

var _ platform.KubeVMs = (*Workloads)(nil)
var _ platform.Recreator = (*Workloads)(nil)

// New makes the run's workloads; k, nodes, trunk and gw are the parts
// they share with the rest of the platform, filled in as the plan runs.
func New(cfg *config.Config, subj *subject.Subject, timeouts map[string]time.Duration, work string, k *kube.Clients, nodes *node.Set, trunk platform.AccessTrunk, gw *platform.Gateway, tl *timeline.Timeline) *Workloads {
	w := &Workloads{
		cfg: cfg, subj: subj, timeouts: timeouts, work: work, kube: k, nodes: nodes, trunk: trunk, gw: gw, timeline: tl,
		img:    cfg.Cluster.Guest,
		guests: map[string]*vmGuest{}, pods: map[string]*podGuest{}, nads: map[string]platform.NAD{},
	}
	tl.SideBySide(w.StartsSideBySide())
	return w
}

// Image is the guest image VMs boot.
func (w *Workloads) Image() GuestImage { return w.img }

// Pods reports whether the run's workloads are pods (--workload=pod).
func (w *Workloads) Pods() bool { return w.cfg.Cluster.Workload == "pod" }

// StartsSideBySide: see platform.SideBySide. A VM under TCG keeps one core
// busy while it boots: seven at once on this 2-core machine each took 9
// times as long as one alone (cloud-init's first stage at 185 s of
// uptime, not 21 s), so one per core. Pods start in seconds, one after
// another.
func (w *Workloads) StartsSideBySide() int {
	if w.Pods() {
		return 1
	}
	return runtime.NumCPU()
}

// ApplyNAD creates a NetworkAttachmentDefinition in a namespace.
func (w *Workloads) ApplyNAD(ctx context.Context, namespace string, nad platform.NAD) error {
	if err := w.owner.EnsureNamespace(ctx, w.kube, namespace); err != nil {
		return err
	}
	ctl := w.cfg.SelectedControl()
	broken := ctl.BrokenNAD(nad.Config)
	if ctl.HostLocalIPAM {
		subnet, err := netip.ParsePrefix(w.cfg.Subnet)
		if err != nil {
			return err
		}
		broken = addresses.WithHostLocalIPAM(subnet, "")(broken)
	}
	if broken != nad.Config {
		evidence.Artifacts{ReportDir: w.cfg.ReportDir}.Note("workload", "NAD %s/%s: control %s: %s instead of the fixture's %s", namespace, nad.Name, w.cfg.Control, broken, nad.Config)
		nad.Config = broken
	}
	if untagged, why := w.trunk.Untagged(); untagged {
		// No uplink.100 on an untagged trunk: the uplink is the parent.
		sub := fmt.Sprintf("%q", fabric.SubName(fabric.UplinkName, w.cfg.VLAN))
		if strings.Contains(nad.Config, sub) {
			nad.Config = strings.ReplaceAll(nad.Config, sub, fmt.Sprintf("%q", fabric.UplinkName))
			evidence.Artifacts{ReportDir: w.cfg.ReportDir}.Note("workload", "NAD %s/%s: master %s -> %q (untagged trunk: %s)", namespace, nad.Name, sub, fabric.UplinkName, why)
		}
	}
	obj := kube.RenderNAD(namespace, nad)
	if err := w.kube.Apply.ApplyTyped(ctx, obj); err != nil {
		return err
	}
	w.owner.Record(namespace, obj)
	w.mu.Lock()
	w.nads[nad.Name] = nad
	w.mu.Unlock()
	return nil
}

// copyNADs is a negative control's NAD replicator
// (Control.NADCopiedIntoVMNamespace): every NAD the spec
// names that the run applied elsewhere is copied into the spec's namespace,
// as a NAD replicator would, so VLAN-11's VM there gets its VLAN NIC.
func (w *Workloads) copyNADs(ctx context.Context, spec platform.VMSpec) error {
	ctl := w.cfg.SelectedControl()
	if !ctl.NADCopiedIntoVMNamespace {
		return nil
	}
	for _, name := range spec.Networks {
		w.mu.Lock()
		nad, ok := w.nads[name]
		w.mu.Unlock()
		if !ok {
			continue
		}
		if err := w.ApplyNAD(ctx, spec.Namespace, nad); err != nil {
			return fmt.Errorf("control %s: copying NAD %s into %s: %w", ctl.ID, name, spec.Namespace, err)
		}
	}
	return nil
}

// StartVM starts the spec's workload: a VM, or a pod with --workload=pod.
func (w *Workloads) StartVM(ctx context.Context, spec platform.VMSpec) (platform.Guest, error) {
	return w.start(ctx, spec, timeline.BootStart, time.Now())
}

// RecreateVM deletes the workload and starts it again from its spec; a
// VM's boot is timed from the delete, when its guest left the VLAN.
func (w *Workloads) RecreateVM(ctx context.Context, pg platform.Guest) (platform.Guest, error) {
	spec, deleted := pg.Spec(), time.Now()
	if err := w.DeleteVM(ctx, pg); err != nil {
		return nil, err
	}
	return w.start(ctx, spec, timeline.BootRecreate, deleted)
}

// start starts a VM or a pod; kind and from are the VM boot's for the
// run's timeline.
func (w *Workloads) start(ctx context.Context, spec platform.VMSpec, kind string, from time.Time) (platform.Guest, error) {
	if err := w.copyNADs(ctx, spec); err != nil {
		return nil, err
	}
	if ud, err := w.cfg.SelectedControl().BrokenUserData(spec.CloudInit, w.cfg.Gateway); err != nil {
		return nil, err
	} else if ud != spec.CloudInit {
		evidence.Artifacts{ReportDir: w.cfg.ReportDir}.Note("workload", "%s/%s: control %s: its userData is\n%s", spec.Namespace, spec.Name, w.cfg.Control, ud)
		spec.CloudInit = ud
	}
	if w.Pods() || spec.Binding == platform.NoBinding {
		return w.startPod(ctx, spec)
	}
	return w.startVM(ctx, spec, kind, from)
}

func (w *Workloads) StartVMNoWait(ctx context.Context, spec platform.VMSpec) error {
	if err := w.copyNADs(ctx, spec); err != nil {
		return err
	}
	if w.Pods() {
		_, err := w.createPod(ctx, spec)
		return err
	}
	return w.create(ctx, spec)
}

// DeleteVM deletes the workload and waits until it is gone (its attachment
// released).
func (w *Workloads) DeleteVM(ctx context.Context, pg platform.Guest) error {
	pg = platform.Own(pg)
	if pg, ok := pg.(*podGuest); ok {
		return w.deletePod(ctx, pg.spec.Namespace, pg.spec.Name)
	}
	g, ok := pg.(*vmGuest)
	if !ok {
		return fmt.Errorf("deleting %s: not a cluster workload (%T)", pg.Name(), pg)
	}
	w.forget(g)
	return w.deleteVM(ctx, g.spec.Namespace, g.spec.Name)
}

// forget drops a guest whose instance is going, its console closed: the
// VM deleted, or restarted (a later delete may pass that guest again; the
// line's second close is a no-op error).
func (w *Workloads) forget(g *vmGuest) {
	w.mu.Lock()
	delete(w.guests, g.spec.Namespace+"/"+g.spec.Name)
	w.mu.Unlock()
	if g.con != nil {
		g.con.Close()
	}
}

func (w *Workloads) VMEvents(ctx context.Context, namespace, vmName string) ([]platform.Event, error) {
	var evs []corev1.Event
	var err error
	if w.Pods() {
		evs, err = podEvents(ctx, w.kube, namespace, podName(vmName))
	} else {
		evs, err = vmEvents(ctx, w.kube, namespace, InstanceName(vmName))
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

// Close closes every console and pod netns handle, then deletes what the
// run made: single objects in reverse, then the namespaces it made.
func (w *Workloads) Close(ctx context.Context) error {
	w.mu.Lock()
	guests, pods := w.guests, w.pods
	w.guests, w.pods = map[string]*vmGuest{}, map[string]*podGuest{}
	w.mu.Unlock()
	for _, g := range guests {
		if g.con != nil {
			g.con.Close()
		}
	}
	for _, p := range pods {
		p.Handle.Close()
	}
	var errs []error
	created, namespaces := w.owner.Drain()
	for i := len(created) - 1; i >= 0; i-- {
		o := created[i]
		switch o.GetKind() {
		case "Pod":
			errs = append(errs, w.deletePod(ctx, o.GetNamespace(), strings.TrimPrefix(o.GetName(), "pod-")))
		case "VirtualMachine":
			errs = append(errs, w.deleteVM(ctx, o.GetNamespace(), strings.TrimPrefix(o.GetName(), "vm-instance-")))
		case "NetworkAttachmentDefinition":
			err := w.kube.NAD.K8sCniCncfIoV1().NetworkAttachmentDefinitions(o.GetNamespace()).Delete(ctx, o.GetName(), metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		}
	}
	for _, ns := range namespaces {
		err := w.kube.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// serialLog is where a VM's console is logged.
func (w *Workloads) serialLog(namespace, vmName string) string {
	return filepath.Join(w.work, "serial", namespace+"_"+vmName+".log")
}

// networkStatus reads Multus's k8s.v1.cni.cncf.io/network-status
// annotation: the IPs and MTU the CNI plugin returned for a network.
func networkStatus(annotation, network string) ([]netip.Prefix, int, error) {
	var entries []struct {
		Name string   `json:"name"`
		IPs  []string `json:"ips"`
		MTU  int      `json:"mtu"`
	}
	if annotation == "" {
		return nil, 0, errors.New("the pod has no k8s.v1.cni.cncf.io/network-status annotation: Multus reported no result")
	}
	if err := json.Unmarshal([]byte(annotation), &entries); err != nil {
		return nil, 0, fmt.Errorf("the pod's network-status annotation is unreadable: %w: %s", err, annotation)
	}
	for _, e := range entries {
		if e.Name != network {
			continue
		}
		var ps []netip.Prefix
		for _, s := range e.IPs {
			if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
				ps = append(ps, netip.PrefixFrom(a, 32))
			}
		}
		return ps, e.MTU, nil
	}
	return nil, 0, fmt.Errorf("the pod's network-status has no entry for %s: %s", network, annotation)
}

// VMIInterfaces names the interfaces the VMI's status reports (none when
// the VMI does not exist).
func (w *Workloads) VMIInterfaces(ctx context.Context, namespace, vmName string) ([]string, error) {
	if w.Pods() {
		return nil, fmt.Errorf("VMI interfaces of %s: %w (a pod workload has no VMI)", vmName, evidence.ErrNotObservable)
	}
	vmi, err := w.kube.KubeVirt.KubevirtV1().VirtualMachineInstances(namespace).Get(ctx, InstanceName(vmName), metav1.GetOptions{})
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

// VMIConditions reports the VMI's False status conditions (none for pods,
// or before the VMI exists).
func (w *Workloads) VMIConditions(ctx context.Context, namespace, vmName string) ([]platform.Event, error) {
	if w.Pods() {
		return nil, nil
	}
	vmi, err := w.kube.KubeVirt.KubevirtV1().VirtualMachineInstances(namespace).Get(ctx, InstanceName(vmName), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []platform.Event
	for _, c := range vmi.Status.Conditions {
		if c.Status == corev1.ConditionFalse && c.Reason != "" {
			out = append(out, platform.Event{Type: "Warning", Object: "VirtualMachineInstance/" + vmi.Name, Reason: c.Reason,
				Message: "condition " + string(c.Type) + "=False: " + c.Message})
		}
	}
	return out, nil
}
