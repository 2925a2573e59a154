package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	nadfake "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/clientset/versioned/fake"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	kubevirtv1 "kubevirt.io/api/core/v1"
	kvfake "kubevirt.io/client-go/kubevirt/fake"

	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/kube"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/kubevirt"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/multus"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/wait"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/workload"
)

func init() { wait.PollInterval = 10 * time.Millisecond }

func defaultTimeouts(t *testing.T) map[string]time.Duration {
	t.Helper()
	var cl config.ClusterConfig
	m, err := cl.StageTimeouts()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func readyNode(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
}

func rolledOutMultus() *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: multus.DaemonSet, Namespace: multus.Namespace, Generation: 1},
		Status:     appsv1.DaemonSetStatus{ObservedGeneration: 1, DesiredNumberScheduled: 3, UpdatedNumberScheduled: 3, NumberReady: 3},
	}
}

func availableKubeVirt() *kubevirtv1.KubeVirt {
	return &kubevirtv1.KubeVirt{
		ObjectMeta: metav1.ObjectMeta{Name: kubevirt.Name, Namespace: kubevirt.Namespace},
		Status: kubevirtv1.KubeVirtStatus{Phase: kubevirtv1.KubeVirtPhaseDeployed, Conditions: []kubevirtv1.KubeVirtCondition{
			{Type: kubevirtv1.KubeVirtConditionAvailable, Status: corev1.ConditionTrue},
		}},
	}
}

func fakes(objs []runtime.Object, kv []runtime.Object, nads []runtime.Object) *kube.Clients {
	c := &kube.Clients{Kube: kubefake.NewSimpleClientset(objs...), KubeVirt: kvfake.NewSimpleClientset(kv...), NAD: nadfake.NewSimpleClientset()}
	c.Raw = apiService(`{"status":{"conditions":[{"type":"Available","status":"True","reason":"Passed"}]}}`)
	// Through the typed client: the NAD fake's tracker would file seeded
	// objects under a resource name its own client does not ask for.
	for _, o := range nads {
		n := o.(*nadv1.NetworkAttachmentDefinition)
		if _, err := c.NAD.K8sCniCncfIoV1().NetworkAttachmentDefinitions(n.Namespace).Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
			panic(err)
		}
	}
	return c
}

func stageNames(ss []wait.Stage) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}

func TestStagesOrderAndTimeouts(t *testing.T) {
	timeouts := defaultTimeouts(t)
	c := fakes(nil, nil, nil)
	setup, perVM := setupStages(c, timeouts), workload.VMStages(c, timeouts, "tenant-example", "vm-instance-vm-a", []string{"vlan100"})
	got := strings.Join(append(stageNames(setup), stageNames(perVM)...), ",")
	if got != "nodes,multus,kubevirt,kubevirt-api,nad,vmi" {
		t.Fatalf("stage order: %s", got)
	}
	want := map[string]time.Duration{"nodes": 5 * time.Minute, "multus": 5 * time.Minute, "kubevirt": 15 * time.Minute, "kubevirt-api": 15 * time.Minute, "nad": time.Minute, "vmi": 10 * time.Minute}
	for _, s := range append(setup, perVM...) {
		if s.Timeout != want[s.Name] {
			t.Errorf("stage %s: timeout %s, want %s", s.Name, s.Timeout, want[s.Name])
		}
	}
	cl := config.ClusterConfig{Timeouts: "kubevirt=20m,vmi=90s"}
	over, err := cl.StageTimeouts()
	if err != nil || over["kubevirt"] != 20*time.Minute || over["vmi"] != 90*time.Second || over["nodes"] != 5*time.Minute {
		t.Fatalf("--stage-timeouts: %v %v", over, err)
	}
	for _, bad := range []string{"etcd=1m", "vmi=soon", "vmi=-1s", "vmi"} {
		if _, err := (&config.ClusterConfig{Timeouts: bad}).StageTimeouts(); err == nil {
			t.Errorf("--stage-timeouts=%s accepted", bad)
		}
	}
}

func TestSetupStagesPassOnAReadyCluster(t *testing.T) {
	c := fakes([]runtime.Object{readyNode("vcf-control-plane"), readyNode("vcf-worker"), rolledOutMultus()}, []runtime.Object{availableKubeVirt()}, nil)
	if err := wait.All(context.Background(), setupStages(c, defaultTimeouts(t))); err != nil {
		t.Fatal(err)
	}
}

// The first stage not reached is the one the error names, with its own
// timeout and its last status; later stages are not waited for.
func TestEachStageFailsUnderItsOwnName(t *testing.T) {
	short := map[string]time.Duration{"nodes": 50 * time.Millisecond, "multus": 60 * time.Millisecond, "kubevirt": 70 * time.Millisecond, "nad": 80 * time.Millisecond, "vmi": 90 * time.Millisecond}
	notReady := readyNode("vcf-worker2")
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	pending := availableKubeVirt()
	pending.Status.Conditions[0].Status = corev1.ConditionFalse
	pending.Status.Conditions[0].Reason = "DeploymentInProgress"
	// The KubeVirt CR Available, its aggregated API not (the cold CI run).
	unreachableAPI := fakes([]runtime.Object{readyNode("vcf-worker"), rolledOutMultus()}, []runtime.Object{availableKubeVirt()}, nil)
	unreachableAPI.Raw = apiService(`{"status":{"conditions":[{"type":"Available","status":"False","reason":"FailedDiscoveryCheck","message":"bad status from https://10.96.10.43:443/apis/subresources.kubevirt.io/v1: 404"}]}}`)
	for _, tc := range []struct {
		name      string
		c         *kube.Clients
		stage     string
		timeout   time.Duration
		statusHas string
	}{
		{"a node NotReady", fakes([]runtime.Object{readyNode("vcf-worker"), notReady}, nil, nil), "nodes", short["nodes"], "not Ready: vcf-worker2"},
		{"no Multus", fakes([]runtime.Object{readyNode("vcf-worker")}, nil, nil), "multus", short["multus"], "no Multus DaemonSet found"},
		{"KubeVirt deploying", fakes([]runtime.Object{readyNode("vcf-worker"), rolledOutMultus()}, []runtime.Object{pending}, nil), "kubevirt", short["kubevirt"], "DeploymentInProgress"},
		{"virt-api unreachable from the API server", unreachableAPI, "kubevirt-api", short["kubevirt"], "FailedDiscoveryCheck"},
	} {
		err := wait.All(context.Background(), setupStages(tc.c, short))
		var se *wait.StageError
		if !errors.As(err, &se) || se.Stage != tc.stage || se.Timeout != tc.timeout || !strings.Contains(se.Status, tc.statusHas) {
			t.Errorf("%s: got %v; want stage %s after %s with status containing %q", tc.name, err, tc.stage, tc.timeout, tc.statusHas)
		}
		if err != nil && !strings.Contains(err.Error(), `readiness stage "`+tc.stage+`"`) {
			t.Errorf("%s: the error must name the stage: %v", tc.name, err)
		}
	}
}

func TestVMStages(t *testing.T) {
	short := map[string]time.Duration{"nad": 50 * time.Millisecond, "vmi": 60 * time.Millisecond}
	nad := &nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Name: "vlan100", Namespace: "tenant-example"}}
	ready := &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "vm-instance-vm-a", Namespace: "tenant-example"},
		Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running, Conditions: []kubevirtv1.VirtualMachineInstanceCondition{
			{Type: kubevirtv1.VirtualMachineInstanceReady, Status: corev1.ConditionTrue},
		}},
	}
	t.Run("ready", func(t *testing.T) {
		c := fakes(nil, []runtime.Object{ready}, []runtime.Object{nad})
		if err := wait.All(context.Background(), workload.VMStages(c, short, "tenant-example", "vm-instance-vm-a", []string{"vlan100"})); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("no NAD in the namespace", func(t *testing.T) {
		c := fakes(nil, []runtime.Object{ready}, nil)
		err := wait.All(context.Background(), workload.VMStages(c, short, "tenant-example", "vm-instance-vm-a", []string{"vlan100"}))
		var se *wait.StageError
		if !errors.As(err, &se) || se.Stage != "nad" || !strings.Contains(se.Status, "vlan100") {
			t.Fatalf("got %v", err)
		}
	})
	// The VM and its VMI as this incarnation has them; an event carries the
	// UID of the object it is about.
	vmObj := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "vm-instance-vm-a", Namespace: "tenant-other", UID: "vm-2"}}
	pending := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "vm-instance-vm-a", Namespace: "tenant-other", UID: "vmi-2"}, Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Pending}}
	failedCreate := func(uid types.UID) *corev1.Event {
		return &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: "e-" + string(uid), Namespace: "tenant-other"},
			InvolvedObject: corev1.ObjectReference{Kind: "VirtualMachineInstance", Name: "vm-instance-vm-a", Namespace: "tenant-other", UID: uid},
			Type:           corev1.EventTypeWarning, Reason: "FailedCreate",
			Message: "Error creating pod: failed to locate network attachment definition tenant-other/vlan100",
		}
	}
	t.Run("launcher pod cannot be made: fails at once, quoting the event", func(t *testing.T) {
		c := fakes([]runtime.Object{failedCreate("vmi-2")}, []runtime.Object{vmObj, pending}, nil)
		s := workload.VMStages(c, map[string]time.Duration{"vmi": time.Hour}, "tenant-other", "vm-instance-vm-a", nil)[1]
		start := time.Now()
		err := s.Wait(context.Background())
		var se *wait.StageError
		if !errors.As(err, &se) || se.Stage != "vmi" || se.Err == nil || !strings.Contains(err.Error(), "tenant-other/vlan100") {
			t.Fatalf("got %v", err)
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("a terminal event must end the wait at once, not after the stage's timeout")
		}
	})
	// A re-created VM has its predecessor's name, and its events: those
	// must not fail the new one (issue 22, item 7).
	t.Run("a predecessor's event does not end the wait", func(t *testing.T) {
		c := fakes([]runtime.Object{failedCreate("vmi-1")}, []runtime.Object{vmObj, pending}, nil)
		s := workload.VMStages(c, map[string]time.Duration{"vmi": 300 * time.Millisecond}, "tenant-other", "vm-instance-vm-a", nil)[1]
		err := s.Wait(context.Background())
		var se *wait.StageError
		if !errors.As(err, &se) || se.Err != nil {
			t.Fatalf("got %v, want a timeout: the event is the predecessor's", err)
		}
	})
}

// apiService answers every raw GET with one APIService body.
func apiService(body string) func(context.Context, string) ([]byte, error) {
	return func(context.Context, string) ([]byte, error) { return []byte(body), nil }
}
