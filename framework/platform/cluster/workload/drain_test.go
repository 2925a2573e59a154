package workload

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/cozystack/vlan-conformance/framework/platform/cluster/timeline"
)

// draining is restarting's VM with its running launcher pod, the core
// clients' eviction answered by answer.
func draining(t *testing.T, answer error) (*Workloads, *vmGuest) {
	t.Helper()
	w, _, g := restarting(t, timeline.New())
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "virt-launcher-" + g.vmName + "-abcde", Namespace: g.spec.Namespace, Labels: map[string]string{"kubevirt.io/created-by": g.status.VMIUID}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	k := kubefake.NewSimpleClientset(pod)
	k.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		return true, nil, answer
	})
	w.kube.Kube = k
	return w, g
}

// An eviction the API server grants is what KubeVirt does under
// evictionStrategy None: the VM goes with its pod. That is a Drain the
// spec judges (Evicted), not an error of the suite's.
func TestAGrantedEvictionIsADrainThatEvicted(t *testing.T) {
	w, g := draining(t, nil)
	moved, d, err := w.DrainVM(context.Background(), wrapped{g})
	if err != nil {
		t.Fatal(err)
	}
	if !d.Evicted || moved != nil || d.Migration != "" {
		t.Errorf("drain %+v, guest %v: want Evicted, no guest, no migration", d, moved)
	}
	if d.Pod != g.spec.Namespace+"/virt-launcher-"+g.vmName+"-abcde" {
		t.Errorf("pod %q", d.Pod)
	}
}

// A refused eviction is KubeVirt migrating the VM; a migration that fails
// is an error that quotes KubeVirt's reason, with the drain's record.
func TestAFailedMigrationQuotesKubeVirt(t *testing.T) {
	refusal := apierrors.NewTooManyRequests("Eviction triggered evacuation of VMI", 0)
	w, g := draining(t, refusal)
	kv := w.kube.KubeVirt
	migs := kv.KubevirtV1().VirtualMachineInstanceMigrations(g.spec.Namespace)
	if _, err := migs.Create(context.Background(), &kubevirtv1.VirtualMachineInstanceMigration{
		ObjectMeta: metav1.ObjectMeta{Name: "kubevirt-evacuation-x", Namespace: g.spec.Namespace, CreationTimestamp: metav1.NewTime(time.Now().Add(time.Second))},
		Spec:       kubevirtv1.VirtualMachineInstanceMigrationSpec{VMIName: g.vmName},
		Status:     kubevirtv1.VirtualMachineInstanceMigrationStatus{Phase: kubevirtv1.MigrationFailed},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	vmis := kv.KubevirtV1().VirtualMachineInstances(g.spec.Namespace)
	vmi, err := vmis.Get(context.Background(), g.vmName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vmi.Status.MigrationState = &kubevirtv1.VirtualMachineInstanceMigrationState{SourceNode: "vcf-worker", TargetNode: "vcf-worker2", FailureReason: "target pod never started"}
	if _, err := vmis.Update(context.Background(), vmi, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	moved, d, err := w.DrainVM(context.Background(), wrapped{g})
	if err == nil || moved != nil {
		t.Fatalf("guest %v, err %v: want an error", moved, err)
	}
	for _, want := range []string{"the migration failed", "target pod never started"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if d.Evicted || d.Migration != "kubevirt-evacuation-x" || d.Phase != "Failed" || d.TargetNode != "vcf-worker2" || !strings.Contains(d.Refusal, "evacuation") {
		t.Errorf("drain %+v", d)
	}
}
