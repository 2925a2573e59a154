package workload

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/cozystack/vlan-conformance/framework/controls"
	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/gateway"
	"github.com/cozystack/vlan-conformance/framework/guestnet"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/console"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/kube"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/node"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/timeline"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/wait"
)

// create applies a VM's objects: the release's chart rendered and patched
// (vminstance.go), or the suite's own rendering.
func (w *Workloads) create(ctx context.Context, spec platform.VMSpec) error {
	w.creating.Lock()
	defer w.creating.Unlock()
	if err := w.owner.EnsureNamespace(ctx, w.kube, spec.Namespace); err != nil {
		return err
	}
	// A VM of that name a killed run left on a kept cluster would be
	// adopted by the apply below, its VMI up already on that run's cabling
	// (a lane after an interrupted one had vm-jumbo "Ready" in 0.2 s, its
	// pod's veth in no bridge): it goes first.
	name := InstanceName(spec.Name)
	if _, err := w.kube.KubeVirt.KubevirtV1().VirtualMachines(spec.Namespace).Get(ctx, name, metav1.GetOptions{}); err == nil {
		fmt.Fprintf(os.Stderr, "workloads: VM %s/%s was left by an earlier run: deleting it before creating it afresh\n", spec.Namespace, name)
		if err := w.deleteVM(ctx, spec.Namespace, spec.Name); err != nil {
			return fmt.Errorf("deleting VM %s/%s an earlier run left: %w", spec.Namespace, name, err)
		}
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	nodeName := ""
	if spec.Node != nil {
		nodeName = spec.Node.Name()
	}
	if w.fromRelease(spec) {
		objs, err := w.releaseObjects(spec, nodeName)
		if err != nil {
			return err
		}
		for _, o := range objs {
			w.owner.Record(spec.Namespace, o)
		}
		return w.kube.Apply.Apply(ctx, objs)
	}
	r := w.renderOwn(spec, nodeName)
	w.owner.Record(spec.Namespace, r.Secret)
	w.owner.Record(spec.Namespace, r.VM)
	return w.kube.Apply.ApplyTyped(ctx, r.Secret, r.VM)
}

// renderOwn is the suite's own rendering of spec's VM (RenderVM), the MAC
// the run's control gives an unpinned VM set where a pinned one goes
// (controls.Control.UnpinnedMAC).
func (w *Workloads) renderOwn(spec platform.VMSpec, nodeName string) Rendered {
	spec.MAC = w.cfg.SelectedControl().VMMAC(spec.Namespace, spec.Name, spec.MAC, nil)
	return RenderVM(spec, w.img, nodeName)
}

// startVM creates the VM and attaches to it (attach). The boot goes on
// the run's timeline as kind, counted from `from`, whether it succeeded or
// not: a boot that failed half-way still took its time.
func (w *Workloads) startVM(ctx context.Context, spec platform.VMSpec, kind string, from time.Time) (platform.Guest, error) {
	boot := timeline.Stages{From: from}
	defer func() { w.timeline.Boot(spec.Namespace+"/"+spec.Name, kind, boot) }()
	if err := w.create(ctx, spec); err != nil {
		return nil, err
	}
	return w.attach(ctx, spec, &boot)
}

// attach waits for the VM of spec through the stages nad and vmi, logs
// into its console, waits for cloud-init, and finds its VLAN NIC by MAC;
// boot gets the time of each stage.
func (w *Workloads) attach(ctx context.Context, spec platform.VMSpec, boot *timeline.Stages) (platform.Guest, error) {
	name := InstanceName(spec.Name)
	if err := wait.All(ctx, VMStages(w.kube, w.timeouts, spec.Namespace, name, spec.Networks)); err != nil {
		return nil, err
	}
	boot.VMI = time.Now()
	w.timeline.Mark(timeline.VMI)
	platform.Attached(ctx)
	g := &vmGuest{spec: spec, vmName: name, ownCluster: !w.cfg.ExistingCluster()}
	if err := w.readStatus(ctx, g); err != nil {
		return nil, err
	}
	if err := w.login(ctx, g); err != nil {
		return nil, err
	}
	boot.Login = time.Now()
	w.timeline.Mark(timeline.Login)
	if _, code, err := g.con.Run(ctx, "cloud-init status --wait >/dev/null", w.timeouts["vmi"]); err != nil || code != 0 {
		return nil, fmt.Errorf("guest %s: cloud-init did not finish cleanly (exit %d): %v", spec.Name, code, err)
	}
	boot.CloudInit = time.Now()
	if len(spec.Networks) > 0 {
		out, err := guestnet.Run(ctx, g, "ip -o link")
		if err != nil {
			return nil, err
		}
		if g.vlanIface, err = ifaceByMAC(out, g.status.VLANMAC); err != nil {
			return nil, fmt.Errorf("guest %s: %w", spec.Name, err)
		}
		if err := guestnet.InstallTools(ctx, g); err != nil {
			return nil, err
		}
		if err := w.asGuestComesUp(ctx, g); err != nil {
			return nil, fmt.Errorf("guest %s: control %s: %w", spec.Name, w.cfg.Control, err)
		}
	}
	w.mu.Lock()
	w.guests[spec.Namespace+"/"+spec.Name] = g
	w.mu.Unlock()
	return g, nil
}

// login dials the VM's serial console, its output appended to the serial
// log, and logs in, or finds the shell it left logged in (a migrated
// guest's).
func (w *Workloads) login(ctx context.Context, g *vmGuest) error {
	line, err := console.Dial(ctx, w.kube.Rest, g.spec.Namespace, g.vmName)
	if err != nil {
		return err
	}
	g.serialLog = w.serialLog(g.spec.Namespace, g.vmName)
	os.MkdirAll(filepath.Dir(g.serialLog), 0o755)
	logf, err := os.OpenFile(g.serialLog, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		line.Close()
		return err
	}
	g.con = console.New(line, logf)
	if err := g.con.Login(ctx, w.img.User, w.img.Password, w.timeouts["vmi"]); err != nil {
		return fmt.Errorf("guest %s: %w (serial log %s)", g.spec.Name, err, g.serialLog)
	}
	return nil
}

// RestartVM: see platform.KubeVMs. The boot goes on the run's timeline
// as a restart, counted from the request (the guest leaves the VLAN then),
// whether it succeeded or not.
func (w *Workloads) RestartVM(ctx context.Context, pg platform.Guest, how platform.Restart) (platform.Guest, error) {
	g, ok := platform.Own(pg).(*vmGuest)
	if !ok {
		return nil, fmt.Errorf("restarting %s: %w (a pod workload)", pg.Name(), evidence.ErrNotObservable)
	}
	ns, name, old := g.spec.Namespace, g.vmName, types.UID(g.status.VMIUID)
	boot := timeline.Stages{From: time.Now()}
	defer func() { w.timeline.Boot(ns+"/"+g.spec.Name, timeline.BootRestart, boot) }()
	if err := w.restart(ctx, ns, name, how); err != nil {
		return nil, fmt.Errorf("restarting %s/%s (%s): %w", ns, name, how, err)
	}
	w.forget(g)
	if err := newVMI(w.kube, w.timeouts, ns, name, old).Wait(ctx); err != nil {
		return nil, err
	}
	return w.attach(ctx, g.spec, &boot)
}

// restart asks KubeVirt for a new instance of the VM, the way how names,
// as a user does (virtctl stop and start, virtctl restart, kubectl delete
// vmi), the guest shut down as the VM's grace period lets it.
func (w *Workloads) restart(ctx context.Context, ns, name string, how platform.Restart) error {
	vms, vmis := w.kube.KubeVirt.KubevirtV1().VirtualMachines(ns), w.kube.KubeVirt.KubevirtV1().VirtualMachineInstances(ns)
	switch how {
	case platform.RestartStopStart:
		if err := vms.Stop(ctx, name, &kubevirtv1.StopOptions{}); err != nil {
			return err
		}
		// Started before its instance is gone, the VM would keep it.
		stopped := wait.Gone("vmi", "VMI "+ns+"/"+name+" stopped", w.timeouts["vmi"], func(ctx context.Context) bool {
			_, err := vmis.Get(ctx, name, metav1.GetOptions{})
			return !apierrors.IsNotFound(err)
		})
		if err := stopped.Wait(ctx); err != nil {
			return err
		}
		return vms.Start(ctx, name, &kubevirtv1.StartOptions{})
	case platform.RestartSubresource:
		return vms.Restart(ctx, name, &kubevirtv1.RestartOptions{})
	case platform.RestartVMIDeleted:
		return vmis.Delete(ctx, name, metav1.DeleteOptions{})
	}
	return fmt.Errorf("no such way to restart a VM: %q", how)
}

// newVMI is a stage that waits until the VM has an instance other than
// the one of UID old: its restart made a new one.
func newVMI(k *kube.Clients, timeouts map[string]time.Duration, ns, name string, old types.UID) wait.Stage {
	return wait.Stage{Name: "vmi", What: fmt.Sprintf("a new VMI %s/%s in place of %s", ns, name, old), Timeout: timeouts["vmi"], Check: func(ctx context.Context) (bool, string, error) {
		vmi, err := k.KubeVirt.KubevirtV1().VirtualMachineInstances(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return false, "no VMI yet", nil
		case err != nil:
			return false, "VMI: " + err.Error(), nil
		case vmi.UID == old:
			return false, "the old VMI is still there, phase " + string(vmi.Status.Phase), nil
		}
		return true, "", nil
	}}
}

// asGuestComesUp does what happens on the VLAN as the guest's address
// comes up (controls.GuestUp), as the lab's guests do
// (framework/platform/lab/guest.go).
func (w *Workloads) asGuestComesUp(ctx context.Context, g *vmGuest) error {
	switch w.cfg.SelectedControl().GuestUp {
	case controls.GuestAnnounces:
		return guestnet.AnnounceGARP(ctx, g)
	case controls.GatewayResolves:
		gw, ok := (*w.gw).(*gateway.Netns)
		if !ok {
			return fmt.Errorf("the gateway (%T) is not one the suite runs", *w.gw)
		}
		addr, err := guestnet.VLANAddr(ctx, g)
		if err != nil {
			return err
		}
		return gw.ProbeUntilLearned(ctx, addr, g.MAC())
	}
	return nil
}

// readStatus reads the VMI: UIDs, node, the VLAN MAC, the pod interface and
// what the CNI plugin returned (the network-status annotation).
func (w *Workloads) readStatus(ctx context.Context, g *vmGuest) error {
	st, err := w.vmStatus(ctx, g.spec, g.vmName)
	if err != nil {
		return err
	}
	g.status = st
	g.node = node.Named(st.Node)
	if n := w.nodes.ByName(st.Node); n != nil {
		g.node = n
	}
	if len(g.spec.Networks) == 0 {
		return nil
	}
	nad := g.spec.Networks[0]
	vmi, err := w.kube.KubeVirt.KubevirtV1().VirtualMachineInstances(g.spec.Namespace).Get(ctx, g.vmName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, i := range vmi.Status.Interfaces {
		if i.Name == nad {
			g.podIface = i.PodInterfaceName
		}
	}
	g.attachment = platform.Attachment{NAD: nad, PodInterface: g.podIface}
	pods, err := launcherPods(ctx, w.kube, g.spec.Namespace, vmi.UID)
	if err != nil {
		return err
	}
	for _, p := range pods {
		// A migrated VMI has had two launcher pods: its own runs on its node.
		if p.Spec.NodeName != vmi.Status.NodeName {
			continue
		}
		var statusErr, podErr error
		g.attachment.CNIResultIPs, g.attachment.MTU, statusErr = networkStatus(p.Annotations["k8s.v1.cni.cncf.io/network-status"], g.spec.Namespace+"/"+nad)
		// The pod side is observed apart from what Multus reports: the
		// addresses on the launcher's own links for this network.
		g.launcher = string(p.UID)
		g.attachment.PodIPv4, podErr = launcherIPv4(string(p.UID), g.podIface)
		if podErr != nil && statusErr == nil && !g.ownCluster {
			// The launcher's netns is the node's to open: from outside an
			// existing cluster's nodes (certify's pod) it cannot be.
			podErr = fmt.Errorf("%w: %v", evidence.ErrNotObservable, podErr)
		}
		if err := errors.Join(statusErr, podErr); err != nil {
			g.attachment.Err = fmt.Errorf("launcher pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	return nil
}

func (w *Workloads) vmStatus(ctx context.Context, spec platform.VMSpec, vmName string) (platform.VMStatus, error) {
	var st platform.VMStatus
	vm, err := w.kube.KubeVirt.KubevirtV1().VirtualMachines(spec.Namespace).Get(ctx, vmName, metav1.GetOptions{})
	if err != nil {
		return st, err
	}
	vmi, err := w.kube.KubeVirt.KubevirtV1().VirtualMachineInstances(spec.Namespace).Get(ctx, vmName, metav1.GetOptions{})
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

func (w *Workloads) VMStatus(ctx context.Context, pg platform.Guest) (platform.VMStatus, error) {
	g, ok := platform.Own(pg).(*vmGuest)
	if !ok {
		return platform.VMStatus{}, fmt.Errorf("VMI status of %s: %w (a pod workload)", pg.Name(), evidence.ErrNotObservable)
	}
	return w.vmStatus(ctx, g.spec, g.vmName)
}

// deleteVM deletes the VirtualMachine and its Secret and waits until the
// VMI is gone (its launcher released the attachment).
func (w *Workloads) deleteVM(ctx context.Context, namespace, app string) error {
	name := InstanceName(app)
	vms, vmis := w.kube.KubeVirt.KubevirtV1().VirtualMachines(namespace), w.kube.KubeVirt.KubevirtV1().VirtualMachineInstances(namespace)
	// The guest's own shutdown is under no claim, and under TCG it holds a
	// core for seconds while the VM's terminationGracePeriodSeconds (the
	// chart's 30) runs: the guest is stopped at once first, as
	// `virtctl stop --force --grace-period=0` does. A VM already gone, or
	// stopped, is deleted as it is.
	zero := int64(0)
	err := vms.Stop(ctx, name, &kubevirtv1.StopOptions{GracePeriod: &zero})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("stopping VM %s/%s at once: %w", namespace, name, err)
	}
	fg := metav1.DeletePropagationForeground
	err = vms.Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &fg})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	err = w.kube.Kube.CoreV1().Secrets(namespace).Delete(ctx, CloudInitSecretName(app), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return wait.Gone("vmi", "VMI "+namespace+"/"+name, w.timeouts["vmi"], func(ctx context.Context) bool {
		_, err := vmis.Get(ctx, name, metav1.GetOptions{})
		_, verr := vms.Get(ctx, name, metav1.GetOptions{})
		return !apierrors.IsNotFound(err) || !apierrors.IsNotFound(verr)
	}).Wait(ctx)
}

// VMStages are the stages of starting one VM, in order.
func VMStages(k *kube.Clients, timeouts map[string]time.Duration, namespace, vmName string, nads []string) []wait.Stage {
	return []wait.Stage{
		nadStage(k, timeouts, namespace, nads),
		{Name: "vmi", What: fmt.Sprintf("VMI %s/%s Ready", namespace, vmName), Timeout: timeouts["vmi"], Check: vmiReady(k, namespace, vmName)},
	}
}

// nadStage waits until the NADs a workload asks for are readable in its
// namespace.
func nadStage(k *kube.Clients, timeouts map[string]time.Duration, ns string, names []string) wait.Stage {
	return wait.Stage{Name: "nad", What: fmt.Sprintf("NetworkAttachmentDefinitions %v readable in %s", names, ns), Timeout: timeouts["nad"], Check: func(ctx context.Context) (bool, string, error) {
		for _, n := range names {
			if _, err := k.NAD.K8sCniCncfIoV1().NetworkAttachmentDefinitions(ns).Get(ctx, n, metav1.GetOptions{}); err != nil {
				return false, fmt.Sprintf("NAD %s/%s: %v", ns, n, err), nil
			}
		}
		return true, "", nil
	}}
}

func vmiReady(k *kube.Clients, ns, name string) func(context.Context) (bool, string, error) {
	return func(ctx context.Context) (bool, string, error) {
		vmi, err := k.KubeVirt.KubevirtV1().VirtualMachineInstances(ns).Get(ctx, name, metav1.GetOptions{})
		status := ""
		if err != nil {
			if !apierrors.IsNotFound(err) {
				return false, "VMI: " + err.Error(), nil
			}
			status, vmi = "no VMI yet", nil
		} else {
			status = "phase " + string(vmi.Status.Phase)
			if vmi.Status.Phase == kubevirtv1.Failed {
				return false, status, fmt.Errorf("VMI %s/%s failed", ns, name)
			}
			for _, cond := range vmi.Status.Conditions {
				if cond.Type == kubevirtv1.VirtualMachineInstanceReady {
					if cond.Status == corev1.ConditionTrue {
						return true, status + ", Ready", nil
					}
					status += fmt.Sprintf(", Ready=%s (%s: %s)", cond.Status, cond.Reason, cond.Message)
				}
			}
		}
		evs, err := vmEvents(ctx, k, ns, name)
		if err != nil {
			return false, status, nil
		}
		uids, err := incarnation(ctx, k, ns, name, vmi)
		if err != nil {
			return false, status, nil
		}
		// Only this incarnation's events end the wait: a re-created VM has
		// its predecessor's name, and its predecessor's events.
		return false, status, wait.TerminalEvent(slices.DeleteFunc(evs, func(e corev1.Event) bool { return !uids[e.InvolvedObject.UID] }))
	}
}

// incarnation are the UIDs of the VM's current objects: the
// VirtualMachine, its VMI (nil: none yet) and the VMI's launcher pods.
func incarnation(ctx context.Context, k *kube.Clients, ns, name string, vmi *kubevirtv1.VirtualMachineInstance) (map[types.UID]bool, error) {
	uids := map[types.UID]bool{}
	vm, err := k.KubeVirt.KubevirtV1().VirtualMachines(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	uids[vm.UID] = true
	if vmi == nil || vmi.UID == "" {
		return uids, nil
	}
	uids[vmi.UID] = true
	pods, err := launcherPods(ctx, k, ns, vmi.UID)
	if err != nil {
		return nil, err
	}
	for _, p := range pods {
		uids[p.UID] = true
	}
	return uids, nil
}

// launcherPods are the pods KubeVirt made for a VMI: one, or two while
// and after it migrates (virt-controller labels each with the VMI's UID).
func launcherPods(ctx context.Context, k *kube.Clients, ns string, vmiUID types.UID) ([]corev1.Pod, error) {
	pods, err := k.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "kubevirt.io/created-by=" + string(vmiUID)})
	if err != nil {
		return nil, err
	}
	return pods.Items, nil
}

// vmEvents lists the events about a VM, its VMI and its launcher pods,
// oldest first.
func vmEvents(ctx context.Context, k *kube.Clients, ns, vmName string) ([]corev1.Event, error) {
	return wait.Events(ctx, k.Kube, ns, func(o corev1.ObjectReference) bool {
		return (o.Kind == "VirtualMachine" || o.Kind == "VirtualMachineInstance") && o.Name == vmName ||
			o.Kind == "Pod" && strings.HasPrefix(o.Name, "virt-launcher-"+vmName+"-")
	})
}
