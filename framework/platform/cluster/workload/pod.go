package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/vlan-conformance/framework/cloudinit"
	"github.com/cozystack/vlan-conformance/framework/dump"
	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/guestnet"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/kube"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/node"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/wait"
	"github.com/cozystack/vlan-conformance/framework/platform/nsguest"
)

// The pod workload (--workload=pod): the VLAN attached by Multus to a plain
// pod, no KubeVirt. The pod's network namespace is entered from the host
// (its sandbox process found by the pod UID in its cgroup path) and the
// guide's userData is applied there by framework/cloudinit, as a guest
// would apply it. What it proves is the node, NAD and Multus half of the
// datapath; claims about VMs (bridge binding, re-created VMs) skip.
//
//	kind node (netns of the container)        pod netns (pause)
//	br100 203.0.113.2/24 <- veth (bridge CNI) -> enp2s0 203.0.113.10/24 (userData)
//	                                             eth0   pod network (ptp)

// PodImage is the image of pod workloads: the pause image every node has.
const PodImage = "registry.k8s.io/pause:3.10.1"

// podVLANNIC names the pod's VLAN interface as the guide's netplan does.
const podVLANNIC = "enp2s0"

// podGuest is a pod on the VLAN, seen from inside its network namespace.
type podGuest struct {
	nsguest.Netns
	spec       platform.VMSpec
	node       platform.Node
	uid        string
	mac        net.HardwareAddr
	attachment platform.Attachment
}

func (g *podGuest) Name() string                    { return g.spec.Name }
func (g *podGuest) Node() platform.Node             { return g.node }
func (g *podGuest) MAC() net.HardwareAddr           { return g.mac }
func (g *podGuest) Attachment() platform.Attachment { return g.attachment }
func (g *podGuest) Spec() platform.VMSpec           { return g.spec }

// podName is the pod a VMSpec becomes.
func podName(app string) string { return "pod-" + app }

// renderPod is the pod workload: pause, on the spec's node, with the NADs
// of spec.Networks requested through Multus's selection annotation (the
// first as enp2s0, like the guide's second NIC), resolved in its own
// namespace.
func renderPod(spec platform.VMSpec, nodeName string) (*corev1.Pod, error) {
	type selection struct {
		Name      string `json:"name"`
		Interface string `json:"interface,omitempty"`
		MAC       string `json:"mac,omitempty"`
	}
	var sel []selection
	for i, n := range spec.Networks {
		s := selection{Name: n, Interface: fmt.Sprintf("enp%ds0", i+2)}
		if i == 0 {
			s.MAC = spec.MAC
		}
		sel = append(sel, s)
	}
	ann, err := json.Marshal(sel)
	if err != nil {
		return nil, err
	}
	zero := int64(0)
	p := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: podName(spec.Name), Namespace: spec.Namespace, Labels: kube.Owned(),
			Annotations: map[string]string{"k8s.v1.cni.cncf.io/networks": string(ann)}},
		Spec: corev1.PodSpec{
			NodeName:                      nodeName,
			Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			TerminationGracePeriodSeconds: &zero,
			Containers:                    []corev1.Container{{Name: "pause", Image: PodImage, ImagePullPolicy: corev1.PullIfNotPresent}},
		},
	}
	if len(spec.Networks) == 0 {
		delete(p.Annotations, "k8s.v1.cni.cncf.io/networks")
	}
	return p, nil
}

// podReady: the pod Running, or its sandbox failing for good (the event
// quotes Multus and the CNI plugin's error).
func podReady(k *kube.Clients, ns, name string) func(context.Context) (bool, string, error) {
	return func(ctx context.Context) (bool, string, error) {
		p, err := k.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "pod: " + err.Error(), nil
		}
		status := "phase " + string(p.Status.Phase)
		if p.Status.Phase == corev1.PodRunning {
			return true, status, nil
		}
		evs, err := podEvents(ctx, k, ns, name)
		if err != nil {
			return false, status, nil
		}
		// This pod's own events: a re-created pod has its predecessor's name.
		return false, status, wait.TerminalEvent(slices.DeleteFunc(evs, func(e corev1.Event) bool { return e.InvolvedObject.UID != p.UID }))
	}
}

func podEvents(ctx context.Context, k *kube.Clients, ns, name string) ([]corev1.Event, error) {
	return wait.Events(ctx, k.Kube, ns, func(o corev1.ObjectReference) bool { return o.Kind == "Pod" && o.Name == name })
}

// createPod creates the pod workload and returns at once.
func (w *Workloads) createPod(ctx context.Context, spec platform.VMSpec) (*corev1.Pod, error) {
	if err := w.owner.EnsureNamespace(ctx, w.kube, spec.Namespace); err != nil {
		return nil, err
	}
	nodeName := ""
	if spec.Node != nil {
		nodeName = spec.Node.Name()
	}
	pod, err := renderPod(spec, nodeName)
	if err != nil {
		return nil, err
	}
	w.owner.Record(spec.Namespace, pod)
	_, err = w.kube.Kube.CoreV1().Pods(spec.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	return pod, err
}

// probeApps are the two probe pods of STG-12's roll, suffix telling one
// roll's from another's: a hostNetwork pod (no CNI call at all), then a
// pause pod on the NAD (Multus's shim, then the NAD's plugin).
func probeApps(suffix string) (hostNet, onNAD string) {
	return "probe-hostnet-" + suffix, "probe-nad-" + suffix
}

// CreateProbes creates the probe pods on a node, the hostNetwork one
// first, and returns those it created as the API server holds them. They
// are recorded as the run's, so Close deletes what DeleteProbes did not.
func (w *Workloads) CreateProbes(ctx context.Context, ns, nad, nodeName, suffix string) ([]*corev1.Pod, error) {
	if err := w.owner.EnsureNamespace(ctx, w.kube, ns); err != nil {
		return nil, err
	}
	hostApp, nadApp := probeApps(suffix)
	host, err := renderPod(platform.VMSpec{Name: hostApp, Namespace: ns}, nodeName)
	if err != nil {
		return nil, err
	}
	host.Spec.HostNetwork = true
	onNAD, err := renderPod(platform.VMSpec{Name: nadApp, Namespace: ns, Networks: []string{nad}}, nodeName)
	if err != nil {
		return nil, err
	}
	var out []*corev1.Pod
	for _, p := range []*corev1.Pod{host, onNAD} {
		w.owner.Record(ns, p)
		created, err := w.kube.Kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			return out, fmt.Errorf("creating pod %s/%s: %w", ns, p.Name, err)
		}
		out = append(out, created)
	}
	return out, nil
}

// DeleteProbes deletes the probe pods CreateProbes made with suffix and
// waits until they are gone (CNI DEL done); one never made is no error.
func (w *Workloads) DeleteProbes(ctx context.Context, ns, suffix string) error {
	hostApp, nadApp := probeApps(suffix)
	return errors.Join(w.deletePod(ctx, ns, hostApp), w.deletePod(ctx, ns, nadApp))
}

// startPod creates the pod workload, waits for it, reads what the CNI
// plugin left in it, then applies the userData inside it.
func (w *Workloads) startPod(ctx context.Context, spec platform.VMSpec) (platform.Guest, error) {
	pod, err := w.createPod(ctx, spec)
	if err != nil {
		return nil, err
	}
	stages := []wait.Stage{
		nadStage(w.kube, w.timeouts, spec.Namespace, spec.Networks),
		{Name: "pod", What: fmt.Sprintf("pod %s/%s Running", spec.Namespace, pod.Name), Timeout: w.timeouts["vmi"], Check: podReady(w.kube, spec.Namespace, pod.Name)},
	}
	if err := wait.All(ctx, stages); err != nil {
		return nil, err
	}
	live, err := w.kube.Kube.CoreV1().Pods(spec.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	g := &podGuest{spec: spec, uid: string(live.UID)}
	if n := w.nodes.ByName(live.Spec.NodeName); n != nil {
		g.node = n
	} else {
		return nil, fmt.Errorf("pod %s/%s runs on %s, not a node the suite cabled", spec.Namespace, pod.Name, live.Spec.NodeName)
	}
	path, err := podNetns(g.uid)
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s: %w", spec.Namespace, pod.Name, err)
	}
	fd, err := netns.GetFromPath(path)
	if err != nil {
		return nil, err
	}
	h, err := netlink.NewHandleAt(fd, unix.NETLINK_ROUTE)
	fd.Close()
	if err != nil {
		return nil, err
	}
	g.Netns = nsguest.Netns{Path: path, Handle: h, NIC: podVLANNIC, Label: "pod " + pod.Name}
	if len(spec.Networks) > 0 {
		nad := spec.Networks[0]
		g.attachment = platform.Attachment{NAD: nad, PodInterface: podVLANNIC}
		g.attachment.CNIResultIPs, g.attachment.MTU, g.attachment.Err = networkStatus(live.Annotations["k8s.v1.cni.cncf.io/network-status"], spec.Namespace+"/"+nad)
		l, err := h.LinkByName(podVLANNIC)
		if err != nil {
			return nil, fmt.Errorf("pod %s/%s: Multus left no %s: %w", spec.Namespace, pod.Name, podVLANNIC, err)
		}
		g.mac = l.Attrs().HardwareAddr
		if g.attachment.PodIPv4, err = guestnet.Addresses(ctx, g, podVLANNIC); err != nil {
			return nil, err
		}
		if err := cloudinit.Apply(h, spec.CloudInit); err != nil {
			return nil, fmt.Errorf("pod %s/%s: the guide's userData: %w", spec.Namespace, pod.Name, err)
		}
		evidence.Artifacts{ReportDir: w.cfg.ReportDir}.Note("workload", "pod %s/%s on %s: %s %s, MAC %s; the userData's netplan applied by the suite in the pod's netns (%s)", spec.Namespace, pod.Name, live.Spec.NodeName, podVLANNIC, nad, g.mac, path)
	}
	w.mu.Lock()
	w.pods[spec.Namespace+"/"+spec.Name] = g
	w.mu.Unlock()
	return g, nil
}

// deletePod deletes the pod and waits until it is gone (CNI DEL done).
func (w *Workloads) deletePod(ctx context.Context, namespace, app string) error {
	w.mu.Lock()
	if g, ok := w.pods[namespace+"/"+app]; ok {
		g.Handle.Close()
		delete(w.pods, namespace+"/"+app)
	}
	w.mu.Unlock()
	name := podName(app)
	err := w.kube.Kube.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return wait.Gone("pod", "pod "+namespace+"/"+name, w.timeouts["vmi"], func(ctx context.Context) bool {
		_, err := w.kube.Kube.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		return !apierrors.IsNotFound(err)
	}).Wait(ctx)
}

// podNetns finds a pod's network namespace from the host: the process of
// one of its containers, whose cgroup path names the pod UID (with dashes,
// or underscores under the systemd cgroup driver).
func podNetns(uid string) (string, error) {
	pid, err := node.ProcessOf([]string{"pod" + uid, "pod" + strings.ReplaceAll(uid, "-", "_")})
	if err != nil {
		return "", fmt.Errorf("pod UID %s: %w", uid, err)
	}
	return filepath.Join("/proc", pid, "ns", "net"), nil
}

// launcherIPv4 lists the IPv4 addresses on a launcher pod's links for one
// network: the pod interface KubeVirt keeps as a dummy (iface), the CNI
// interface it renamed (iface-nic) and its in-pod bridge (k6t-iface).
func launcherIPv4(uid, iface string) ([]netip.Prefix, error) {
	path, err := podNetns(uid)
	if err != nil {
		return nil, err
	}
	fd, err := netns.GetFromPath(path)
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	h, err := netlink.NewHandleAt(fd, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	links, err := dump.Consistent(h.LinkList)
	if err != nil {
		return nil, err
	}
	var out []netip.Prefix
	found := false
	for _, l := range links {
		if n := l.Attrs().Name; n != iface && n != iface+"-nic" && n != "k6t-"+iface {
			continue
		}
		found = true
		addrs, err := dump.Consistent(func() ([]netlink.Addr, error) { return h.AddrList(l, netlink.FAMILY_V4) })
		if err != nil {
			return nil, err
		}
		for _, a := range addrs {
			out = append(out, guestnet.PrefixOf(a.IPNet))
		}
	}
	if !found {
		var names []string
		for _, l := range links {
			names = append(names, l.Attrs().Name)
		}
		return nil, fmt.Errorf("no link %s (nor %s-nic, k6t-%s) in the launcher's netns: %v", iface, iface, iface, names)
	}
	return out, nil
}
