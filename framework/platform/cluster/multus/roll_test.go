package multus

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/cozystack"
	"github.com/cozystack/vlan-conformance/framework/platform"
)

const (
	rollNS    = "cozy-multus"
	rollDS    = "cozy-multus"
	probeNS   = "tenant-roll"
	probeNode = "worker"
	// probeWindow is how long the fake keeps the probe node's daemon down
	// once the probes exist.
	probeWindow = 50 * time.Millisecond
	gracePeriod = 20 * time.Millisecond
	sandboxFail = `Failed to create pod sandbox: plugin type="multus-shim" name="multus-cni-network" failed (add): CmdAdd (shim): daemon not reachable`
)

var rollNodes = []string{"control-plane", probeNode, "worker2"}

// fakeRoll is a Multus DaemonSet on a fake API server, with a stand-in for
// the DaemonSet controller and for the probe node's kubelet. The kubelet
// behaves as the claim says: the hostNetwork probe runs at once, the probe
// on the NAD fails its sandbox and runs once the daemon is back.
type fakeRoll struct {
	t      *testing.T
	k      *kubefake.Clientset
	probed chan struct{} // closed once the probes exist
	done   chan struct{} // closed when the controller has finished
	stall  string        // a node whose new Multus pod never gets Ready

	// What the probe function found when it was called.
	oldGone, newThere bool
}

func newFakeRoll(t *testing.T, ds *appsv1.DaemonSet) *fakeRoll {
	objs := []runtime.Object{ds}
	for _, n := range rollNodes {
		objs = append(objs, multusPod(rollDS+"-old-"+n, n))
	}
	// Not Multus's: a DaemonSet's pod of the same name in another namespace.
	decoy := multusPod(rollDS+"-old-"+probeNode, probeNode)
	decoy.Namespace, decoy.UID = "elsewhere", "decoy"
	objs = append(objs, decoy)
	return &fakeRoll{t: t, k: kubefake.NewSimpleClientset(objs...), probed: make(chan struct{}), done: make(chan struct{})}
}

func multusPod(name, node string) *corev1.Pod {
	yes := true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: rollNS, UID: types.UID(name),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: rollDS, UID: "ds", Controller: &yes}}},
		Spec:   corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

func daemonSet(s appsv1.DaemonSetUpdateStrategy) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: rollDS, Namespace: rollNS}, Spec: appsv1.DaemonSetSpec{UpdateStrategy: s}}
}

// start stands for the apply: the controller rolls as many nodes at a
// time as the DaemonSet's maxUnavailable allows, in the background.
func (f *fakeRoll) start(ctx context.Context) error {
	ds, err := f.k.AppsV1().DaemonSets(rollNS).Get(ctx, rollDS, metav1.GetOptions{})
	if err != nil {
		return err
	}
	batch := 1
	if ru := ds.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.MaxUnavailable != nil {
		if batch, err = intstr.GetScaledValueFromIntOrPercent(ru.MaxUnavailable, len(rollNodes), true); err != nil {
			return err
		}
	}
	go f.controller(batch)
	return nil
}

func (f *fakeRoll) controller(batch int) {
	defer close(f.done)
	ctx := context.Background()
	pods := f.k.CoreV1().Pods(rollNS)
	// Were it taken for Multus's, its going would make the probes due.
	if err := f.k.CoreV1().Pods("elsewhere").Delete(ctx, rollDS+"-old-"+probeNode, metav1.DeleteOptions{}); err != nil {
		f.t.Error(err)
	}
	for i := 0; i < len(rollNodes); i += batch {
		group := rollNodes[i:min(i+batch, len(rollNodes))]
		for _, n := range group {
			p, err := pods.Get(ctx, rollDS+"-old-"+n, metav1.GetOptions{})
			if err != nil {
				f.t.Error(err)
				return
			}
			now := metav1.Now()
			p.DeletionTimestamp = &now
			if _, err := pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
				f.t.Error(err)
				return
			}
		}
		// The old daemons' grace period: told to stop, not yet gone.
		time.Sleep(gracePeriod)
		for _, n := range group {
			if err := pods.Delete(ctx, rollDS+"-old-"+n, metav1.DeleteOptions{}); err != nil {
				f.t.Error(err)
				return
			}
		}
		probing := slices.Contains(group, probeNode)
		if probing {
			select {
			case <-f.probed:
			case <-time.After(5 * time.Second):
				f.t.Error("the probes were never created")
				return
			}
			f.kubelet(ctx, "probe-hostnet", "")
			f.sandboxFails(ctx, "probe-nad")
			time.Sleep(probeWindow)
		}
		for _, n := range group {
			p := multusPod(rollDS+"-new-"+n, n)
			if n == f.stall {
				p.Status = corev1.PodStatus{Phase: corev1.PodPending}
			}
			if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
				f.t.Error(err)
				return
			}
		}
		if probing {
			f.kubelet(ctx, "probe-nad", `[{"name":"vcf-ptp","default":true},{"name":"tenant-roll/vlan100","interface":"enp2s0"}]`)
		}
	}
}

// kubelet reports a probe Running, with Multus's network-status if any.
func (f *fakeRoll) kubelet(ctx context.Context, name, status string) {
	p, err := f.k.CoreV1().Pods(probeNS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Error(err)
		return
	}
	p.Status.Phase = corev1.PodRunning
	if status != "" {
		p.Annotations = map[string]string{"k8s.v1.cni.cncf.io/network-status": status}
	}
	if _, err := f.k.CoreV1().Pods(probeNS).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		f.t.Error(err)
	}
}

func (f *fakeRoll) sandboxFails(ctx context.Context, name string) {
	p, err := f.k.CoreV1().Pods(probeNS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Error(err)
		return
	}
	e := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name + ".1", Namespace: probeNS},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: probeNS, Name: name, UID: p.UID},
		Reason:         "FailedCreatePodSandBox", Type: corev1.EventTypeWarning, Message: sandboxFail}
	// Another pod's failure on the node: not the probe's.
	other := e.DeepCopy()
	other.Name, other.InvolvedObject.UID, other.Message = "other.1", "other", "not the probe's"
	for _, ev := range []*corev1.Event{e, other} {
		if _, err := f.k.CoreV1().Events(probeNS).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			f.t.Error(err)
		}
	}
}

// probe creates the probes as the platform does, the hostNetwork one
// first, noting where the roll stood on the probe node.
func (f *fakeRoll) probe(ctx context.Context) ([]*corev1.Pod, error) {
	defer close(f.probed)
	_, err := f.k.CoreV1().Pods(rollNS).Get(ctx, rollDS+"-old-"+probeNode, metav1.GetOptions{})
	f.oldGone = apierrors.IsNotFound(err)
	_, err = f.k.CoreV1().Pods(rollNS).Get(ctx, rollDS+"-new-"+probeNode, metav1.GetOptions{})
	f.newThere = err == nil
	var out []*corev1.Pod
	for _, name := range []string{"probe-hostnet", "probe-nad"} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: probeNS, UID: types.UID(name)},
			Spec: corev1.PodSpec{NodeName: probeNode, HostNetwork: name == "probe-hostnet"}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
		c, err := f.k.CoreV1().Pods(probeNS).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			return out, err
		}
		out = append(out, c)
	}
	return out, nil
}

func (f *fakeRoll) follow(t *testing.T, timeout time.Duration) (platform.Roll, error) {
	t.Helper()
	fl := follower{kube: f.k, namespace: rollNS, daemonSet: rollDS, timeout: timeout}
	r, err := fl.follow(context.Background(), probeNode, f.start, f.probe)
	select {
	case <-f.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the fake controller never finished")
	}
	return r, err
}

// Under the default strategy the follower sees the nodes go one after
// the other, never two down at once; the probes are created once the
// probe node's old pod is gone and before its new one exists; and what
// each probe went through is told apart by the watch's order alone.
func TestRollFollowsNodeByNode(t *testing.T) {
	f := newFakeRoll(t, daemonSet(appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType}))
	r, err := f.follow(t, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r.Strategy != "RollingUpdate" || r.MostDown != 1 || r.ProbeNode != probeNode {
		t.Errorf("strategy %q, most down %d, probe node %q; want RollingUpdate, 1, %s", r.Strategy, r.MostDown, r.ProbeNode, probeNode)
	}
	var order []string
	for i, n := range r.Nodes {
		order = append(order, n.Node)
		if n.OldPod != rollDS+"-old-"+n.Node || n.NewPod != rollDS+"-new-"+n.Node {
			t.Errorf("%s: old pod %q, new pod %q", n.Node, n.OldPod, n.NewPod)
		}
		if n.Down.IsZero() || n.Gone.Before(n.Down) || n.Up.Before(n.Gone) {
			t.Errorf("%s: marked %v, gone %v, Ready %v: want them in that order", n.Node, n.Down, n.Gone, n.Up)
		}
		if i > 0 && n.Down.Before(r.Nodes[i-1].Up) {
			t.Errorf("%s went before %s was back", n.Node, r.Nodes[i-1].Node)
		}
	}
	if !slices.Equal(order, rollNodes) {
		t.Errorf("nodes in the order %v, want %v", order, rollNodes)
	}
	if !f.oldGone || f.newThere {
		t.Errorf("the probes were created with the old pod gone %v and the new one there %v: want gone, not yet there", f.oldGone, f.newThere)
	}
	if r.Window < probeWindow {
		t.Errorf("the probe node was down %s after the probes, want at least the %s the fake kept it down", r.Window, probeWindow)
	}
	if len(r.Probes) != 2 {
		t.Fatalf("probes %+v, want the hostNetwork one and the one on the NAD", r.Probes)
	}
	host, nad := r.Probes[0], r.Probes[1]
	if host.Pod != probeNS+"/probe-hostnet" || !host.HostNetwork || !host.RunningBeforeDaemon || len(host.SandboxFailures) != 0 || host.Created.IsZero() {
		t.Errorf("the hostNetwork probe: %+v; want it first, Running before the daemon, no sandbox failure", host)
	}
	if nad.Pod != probeNS+"/probe-nad" || nad.HostNetwork || nad.Running.IsZero() || nad.RunningBeforeDaemon {
		t.Errorf("the probe on the NAD: %+v; want it Running only after the daemon", nad)
	}
	if !slices.Equal(nad.SandboxFailures, []string{sandboxFail}) {
		t.Errorf("the probe on the NAD: sandbox failures %q, want its own event's only", nad.SandboxFailures)
	}
	if !slices.Contains(nad.Attached, probeNS+"/vlan100") || host.Attached != nil {
		t.Errorf("attached: the NAD probe %v, the hostNetwork one %v", nad.Attached, host.Attached)
	}
}

// The control's DaemonSet, as the suite renders it, rolls every node at
// once: the follower sees all three down together.
func TestRollUnderTheControlTakesEveryNodeAtOnce(t *testing.T) {
	m := New(&config.Config{Control: "STG-12/multus-rolls-every-node-at-once"}, nil, nil, nil)
	o, err := runtime.DefaultUnstructuredConverter.ToUnstructured(daemonSet(appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType}))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: o}
	u.SetKind("DaemonSet")
	if err := m.controlRollout([]*unstructured.Unstructured{u}); err != nil {
		t.Fatal(err)
	}
	var ds appsv1.DaemonSet
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ds); err != nil {
		t.Fatal(err)
	}
	f := newFakeRoll(t, &ds)
	r, err := f.follow(t, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r.MostDown != len(rollNodes) || r.Strategy != "RollingUpdate maxUnavailable 100%" {
		t.Errorf("most down %d under %q, want all %d under maxUnavailable 100%%", r.MostDown, r.Strategy, len(rollNodes))
	}
}

// A node whose new pod never gets Ready ends the follow at the timeout,
// with the roll as far as it got and an error naming what it waited for.
func TestRollTimesOutNamingTheNode(t *testing.T) {
	f := newFakeRoll(t, daemonSet(appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType}))
	f.stall = "worker2"
	r, err := f.follow(t, time.Second)
	if err == nil || !strings.Contains(err.Error(), "worker2: no new Multus pod Ready") || !strings.Contains(err.Error(), "within 1s") {
		t.Fatalf("got %v, want the timeout naming worker2", err)
	}
	if len(r.Nodes) != len(rollNodes) || r.Nodes[2].Node != "worker2" || !r.Nodes[2].Up.IsZero() || r.Nodes[1].Up.IsZero() {
		t.Errorf("nodes %+v: want worker2 last, never back, the others back", r.Nodes)
	}
	if len(r.Probes) != 2 {
		t.Errorf("probes %+v: the report keeps them", r.Probes)
	}
}

// Without the probe node's Multus pod there is nothing to follow there.
func TestRollNeedsAMultusPodOnTheProbeNode(t *testing.T) {
	f := newFakeRoll(t, daemonSet(appsv1.DaemonSetUpdateStrategy{}))
	fl := follower{kube: f.k, namespace: rollNS, daemonSet: rollDS, timeout: time.Second}
	started := false
	_, err := fl.follow(context.Background(), "nowhere", func(context.Context) error { started = true; return nil }, f.probe)
	if err == nil || !strings.Contains(err.Error(), "no cozy-multus/cozy-multus pod on nowhere") || started {
		t.Errorf("got %v (roll started %v), want the missing pod named before anything is applied", err, started)
	}
}

// The control's maxUnavailable goes onto the suite's reference DaemonSet
// however staging is flipped, and nowhere without the control; a count
// goes as a number, as the API takes it.
func TestControlRolloutOnTheReferenceDaemonSet(t *testing.T) {
	for _, tc := range []struct {
		control, want string
	}{{"", ""}, {"STG-11/stager-fails-its-container", ""}, {"STG-12/multus-rolls-every-node-at-once", "100%"}} {
		m := New(&config.Config{Control: tc.control}, nil, nil, nil)
		o, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "kube-multus-ds", Namespace: "kube-system"}})
		u := &unstructured.Unstructured{Object: o}
		u.SetAPIVersion("apps/v1")
		u.SetKind("DaemonSet")
		m.objs = []*unstructured.Unstructured{u}
		if err := m.withReferenceStaging(false, "rev"); err != nil {
			t.Fatal(err)
		}
		got, _, _ := unstructured.NestedString(m.objs[0].Object, "spec", "updateStrategy", "rollingUpdate", "maxUnavailable")
		if got != tc.want {
			t.Errorf("--control=%q: maxUnavailable %q, want %q", tc.control, got, tc.want)
		}
	}
	u := &unstructured.Unstructured{Object: map[string]any{}}
	if err := rollingUpdate(u, "2"); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "updateStrategy", "rollingUpdate", "maxUnavailable"); v != int64(2) {
		t.Errorf("maxUnavailable 2 rendered as %#v, want the number", v)
	}
}

// Under the release the control changes the DaemonSet's update strategy
// and nothing else, and says so in the ledger.
func TestControlRolloutInRelease(t *testing.T) {
	plain, err := releaseMultus(t).releaseObjects(cozystack.StagingValue(false))
	if err != nil {
		t.Fatal(err)
	}
	m := releaseMultus(t, "--control=STG-12/multus-rolls-every-node-at-once")
	broken, err := m.releaseObjects(cozystack.StagingValue(false))
	if err != nil {
		t.Fatal(err)
	}
	dsOf := func(objs []*unstructured.Unstructured) *appsv1.DaemonSet {
		for _, o := range objs {
			if o.GetKind() == "DaemonSet" {
				var ds appsv1.DaemonSet
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &ds); err != nil {
					t.Fatal(err)
				}
				return &ds
			}
		}
		t.Fatal("no DaemonSet rendered")
		return nil
	}
	p, b := dsOf(plain), dsOf(broken)
	ru := b.Spec.UpdateStrategy.RollingUpdate
	if ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.String() != "100%" {
		t.Fatalf("the control's update strategy %+v, want maxUnavailable 100%%", b.Spec.UpdateStrategy)
	}
	b.Spec.UpdateStrategy = p.Spec.UpdateStrategy
	if d := cmp.Diff(p, b); d != "" {
		t.Errorf("the control changed more than the update strategy (-release +control):\n%s", d)
	}
	found := false
	for _, c := range m.subj.Ledger.Changes() {
		found = found || strings.Contains(c.Why, "STG-12/multus-rolls-every-node-at-once's maxUnavailable 100%")
	}
	if !found {
		t.Errorf("the ledger does not name the control:\n%s", m.subj.Ledger.Markdown())
	}
}
