package multus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/platform"
)

// A roll of the Multus DaemonSet as one watch of every pod sees it
// (STG-12), under the default RollingUpdate strategy (maxUnavailable 1,
// no surge):
//
//	node A  old ─marked─gone┐ new Ready
//	node B                  └ old ─marked─gone┐ new Ready
//	                                          └ the probes created on B:
//	                                            a hostNetwork pod, a pod on the NAD
//
// The Multus pods and the probes come through one watch over all
// namespaces, in the API server's order: "before B's daemon was back" is
// that order, not a comparison of clocks.

// ProbeFunc creates the probe pods on the probe node and returns them as
// the API server created them: those it did create, on an error too.
type ProbeFunc func(ctx context.Context) ([]*corev1.Pod, error)

// RollWithProbes applies the DaemonSet for stageCniPlugins on and follows
// the roll that starts (platform.MultusRoll.RollStaging): probe is called
// the moment probeNode's old Multus pod is gone.
func (m *Multus) RollWithProbes(ctx context.Context, on bool, probeNode string, probe ProbeFunc) (platform.Roll, error) {
	if m.cfg.ExistingCluster() || m.objs == nil {
		return platform.Roll{}, fmt.Errorf("rolling Multus on a cluster the suite did not install it on: %w", evidence.ErrNotObservable)
	}
	f := follower{kube: m.kube.Kube, namespace: m.namespace, daemonSet: m.daemonSet, timeout: m.timeouts["multus"]}
	return f.follow(ctx, probeNode, func(ctx context.Context) error { return m.applyStaging(ctx, on) }, probe)
}

// follower follows one roll of a DaemonSet; start is what starts it.
type follower struct {
	kube                 kubernetes.Interface
	namespace, daemonSet string
	timeout              time.Duration
}

func (f follower) follow(ctx context.Context, probeNode string, start func(context.Context) error, probe ProbeFunc) (platform.Roll, error) {
	pods, err := f.kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return platform.Roll{}, err
	}
	st := newRollState(f.namespace, f.daemonSet, probeNode)
	for i := range pods.Items {
		if p := &pods.Items[i]; st.isMultus(p) && p.DeletionTimestamp == nil {
			st.old[p.UID] = p.Spec.NodeName
			st.nodes[p.Spec.NodeName] = &platform.NodeRoll{Node: p.Spec.NodeName, OldPod: p.Name}
		}
	}
	if _, ok := st.nodes[probeNode]; !ok {
		return platform.Roll{}, fmt.Errorf("no %s/%s pod on %s before the roll", f.namespace, f.daemonSet, probeNode)
	}
	wctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	// Watched from the list's version before the roll starts: none of its
	// events is missed.
	w, err := f.kube.CoreV1().Pods(metav1.NamespaceAll).Watch(wctx, metav1.ListOptions{ResourceVersion: pods.ResourceVersion})
	if err != nil {
		return platform.Roll{}, err
	}
	defer w.Stop()
	if err := start(ctx); err != nil {
		return platform.Roll{}, err
	}
	for !st.done() {
		var ev watch.Event
		open := true
		select {
		case ev, open = <-w.ResultChan():
		case <-wctx.Done():
			open = false
		}
		if !open {
			if wctx.Err() != nil {
				return f.report(ctx, st, fmt.Errorf("the roll did not finish within %s: %s", f.timeout, st.pending()))
			}
			return f.report(ctx, st, fmt.Errorf("the watch of pods ended before the roll did: %s", st.pending()))
		}
		p, ok := ev.Object.(*corev1.Pod)
		if !ok {
			continue
		}
		if st.see(p, ev.Type == watch.Deleted, time.Now()) {
			st.probesAt = time.Now()
			created, err := probe(ctx)
			for _, c := range created {
				st.probeUID[c.UID] = len(st.probes)
				st.probes = append(st.probes, &platform.RollProbe{Pod: c.Namespace + "/" + c.Name, HostNetwork: c.Spec.HostNetwork, Created: st.probesAt})
			}
			if err != nil {
				return f.report(ctx, st, fmt.Errorf("creating the probes on %s: %w", probeNode, err))
			}
		}
	}
	return f.report(ctx, st, nil)
}

// rollState is what the watch has shown of one roll so far.
type rollState struct {
	namespace, daemonSet, probeNode string
	old                             map[types.UID]string // the Multus pods before the roll: their node
	nodes                           map[string]*platform.NodeRoll
	order                           []string // the nodes as their old pods were marked
	probes                          []*platform.RollProbe
	probeUID                        map[types.UID]int // index into probes
	probesAt                        time.Time
	mostDown                        int
}

func newRollState(namespace, daemonSet, probeNode string) *rollState {
	return &rollState{namespace: namespace, daemonSet: daemonSet, probeNode: probeNode,
		old: map[types.UID]string{}, nodes: map[string]*platform.NodeRoll{}, probeUID: map[types.UID]int{}}
}

// isMultus: a pod the DaemonSet controls.
func (st *rollState) isMultus(p *corev1.Pod) bool {
	ref := metav1.GetControllerOf(p)
	return p.Namespace == st.namespace && ref != nil && ref.Kind == "DaemonSet" && ref.Name == st.daemonSet
}

// see takes in one pod as the watch delivered it at now, and reports
// whether the probes are due: the probe node's old pod is gone.
func (st *rollState) see(p *corev1.Pod, deleted bool, now time.Time) (probesDue bool) {
	if i, ok := st.probeUID[p.UID]; ok {
		pr := st.probes[i]
		if names := attached(p); len(names) > 0 {
			pr.Attached = names
		}
		if p.Status.PodIP != "" {
			pr.PodIP = p.Status.PodIP
		}
		if pr.Running.IsZero() && p.Status.Phase == corev1.PodRunning {
			pr.Running = now
			pr.RunningBeforeDaemon = st.nodes[st.probeNode].Up.IsZero()
		}
		return false
	}
	if !st.isMultus(p) {
		return false
	}
	if node, ok := st.old[p.UID]; ok {
		nr := st.nodes[node]
		if (p.DeletionTimestamp != nil || deleted) && nr.Down.IsZero() {
			nr.Down = now
			st.order = append(st.order, node)
			st.countDown()
		}
		if deleted && nr.Gone.IsZero() {
			nr.Gone = now
			return node == st.probeNode && st.probesAt.IsZero()
		}
		return false
	}
	// A pod of the roll: its node is back once it is Ready.
	nr, ok := st.nodes[p.Spec.NodeName]
	if !ok || deleted || p.DeletionTimestamp != nil || !podReady(p) || !nr.Up.IsZero() {
		return false
	}
	nr.NewPod, nr.Up = p.Name, now
	st.countDown()
	return false
}

// countDown: a node is down from its old pod's deletion mark (the daemon
// is told to stop) until its new pod is Ready.
func (st *rollState) countDown() {
	n := 0
	for _, nr := range st.nodes {
		if !nr.Down.IsZero() && nr.Up.IsZero() {
			n++
		}
	}
	st.mostDown = max(st.mostDown, n)
}

// done: every node is back, and the probes were created and run.
func (st *rollState) done() bool {
	for _, nr := range st.nodes {
		if nr.Up.IsZero() {
			return false
		}
	}
	for _, pr := range st.probes {
		if pr.Running.IsZero() {
			return false
		}
	}
	return !st.probesAt.IsZero()
}

// pending says what the roll still waits for.
func (st *rollState) pending() string {
	var out []string
	for _, n := range st.nodeNames() {
		switch nr := st.nodes[n]; {
		case nr.Down.IsZero():
			out = append(out, n+": old pod "+nr.OldPod+" not yet replaced")
		case nr.Up.IsZero():
			out = append(out, n+": no new Multus pod Ready")
		}
	}
	if st.probesAt.IsZero() {
		out = append(out, "the probes were never created")
	}
	for _, pr := range st.probes {
		if pr.Running.IsZero() {
			out = append(out, pr.Pod+" not Running")
		}
	}
	return strings.Join(out, "; ")
}

func (st *rollState) nodeNames() []string {
	names := make([]string, 0, len(st.nodes))
	for n := range st.nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// report is the roll as seen, completed with what is read once it is
// over: the DaemonSet's strategy, the probes' sandbox failures. What it
// cannot read joins the roll's error: no failure may pass for none.
func (f follower) report(ctx context.Context, st *rollState, rollErr error) (platform.Roll, error) {
	errs := []error{rollErr}
	r := platform.Roll{MostDown: st.mostDown, ProbeNode: st.probeNode}
	for _, n := range st.order {
		r.Nodes = append(r.Nodes, *st.nodes[n])
	}
	for _, n := range st.nodeNames() {
		if st.nodes[n].Down.IsZero() {
			r.Nodes = append(r.Nodes, *st.nodes[n])
		}
	}
	if up := st.nodes[st.probeNode].Up; !st.probesAt.IsZero() && up.After(st.probesAt) {
		r.Window = up.Sub(st.probesAt)
	}
	if ds, err := f.kube.AppsV1().DaemonSets(f.namespace).Get(ctx, f.daemonSet, metav1.GetOptions{}); err == nil {
		r.Strategy = strategy(ds.Spec.UpdateStrategy)
	} else {
		errs = append(errs, fmt.Errorf("reading DaemonSet %s/%s: %w", f.namespace, f.daemonSet, err))
	}
	uids := make([]types.UID, len(st.probes))
	for uid, i := range st.probeUID {
		uids[i] = uid
	}
	for i, pr := range st.probes {
		ns, name, _ := strings.Cut(pr.Pod, "/")
		// Multus writes network-status during its ADD; read again in case
		// the watch's last sight of the pod came before it.
		if p, err := f.kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); err == nil && p.UID == uids[i] {
			if names := attached(p); len(names) > 0 {
				pr.Attached = names
			}
			if p.Status.PodIP != "" {
				pr.PodIP = p.Status.PodIP
			}
		}
		evs, err := f.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(uids[i])})
		if err != nil {
			errs = append(errs, fmt.Errorf("reading the events of %s: %w", pr.Pod, err))
		} else {
			for _, e := range evs.Items {
				if e.InvolvedObject.UID == uids[i] && e.Reason == "FailedCreatePodSandBox" {
					pr.SandboxFailures = append(pr.SandboxFailures, e.Message)
				}
			}
		}
		r.Probes = append(r.Probes, *pr)
	}
	return r, errors.Join(errs...)
}

// attached names the networks of a pod's network-status annotation, as
// Multus writes it once it has attached them.
func attached(p *corev1.Pod) []string {
	var entries []struct {
		Name string `json:"name"`
	}
	if json.Unmarshal([]byte(p.Annotations["k8s.v1.cni.cncf.io/network-status"]), &entries) != nil {
		return nil
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name)
	}
	return names
}

func strategy(s appsv1.DaemonSetUpdateStrategy) string {
	out := string(s.Type)
	if ru := s.RollingUpdate; ru != nil {
		if ru.MaxUnavailable != nil {
			out += " maxUnavailable " + ru.MaxUnavailable.String()
		}
		if ru.MaxSurge != nil {
			out += " maxSurge " + ru.MaxSurge.String()
		}
	}
	return out
}

// controlRollout gives the Multus DaemonSet in objs the maxUnavailable of
// the run's control (controls.Control.MultusMaxUnavailable), if it has one.
func (m *Multus) controlRollout(objs []*unstructured.Unstructured) error {
	ctl := m.cfg.SelectedControl()
	v := ctl.MultusMaxUnavailable
	if v == "" {
		return nil
	}
	for _, o := range objs {
		if o.GetKind() == "DaemonSet" && strings.Contains(o.GetName(), "multus") {
			if err := rollingUpdate(o, v); err != nil {
				return fmt.Errorf("the control %s: %w", ctl.ID, err)
			}
		}
	}
	return nil
}

// rollingUpdate makes a DaemonSet roll with maxUnavailable v, a count or
// a percentage of the nodes, as a chart that sets it renders it.
func rollingUpdate(o *unstructured.Unstructured, v string) error {
	// The API takes a count as a number: a string must be a percentage.
	var val any = v
	if n, err := strconv.Atoi(v); err == nil {
		val = int64(n)
	}
	if err := unstructured.SetNestedField(o.Object, string(appsv1.RollingUpdateDaemonSetStrategyType), "spec", "updateStrategy", "type"); err != nil {
		return err
	}
	return unstructured.SetNestedField(o.Object, val, "spec", "updateStrategy", "rollingUpdate", "maxUnavailable")
}
