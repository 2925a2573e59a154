package workload

import (
	"context"
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	kubevirtv1 "kubevirt.io/api/core/v1"
	kvfake "kubevirt.io/client-go/kubevirt/fake"

	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/kube"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/timeline"
)

// A re-creation goes on the timeline as one, counted from before the
// delete (the guest is off the VLAN from then), and a boot that fails
// still goes on it: here the new VM's namespace cannot be made.
func TestRecreateIsTimedFromTheDelete(t *testing.T) {
	spec := platform.VMSpec{Name: "vm-recreate", Namespace: "tenant-recreate"}
	name := InstanceName(spec.Name)
	kv := kvfake.NewSimpleClientset(&kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: spec.Namespace}})
	var deleteAt time.Time
	kv.PrependReactor("delete", "virtualmachines", func(k8stesting.Action) (bool, runtime.Object, error) {
		deleteAt = time.Now()
		time.Sleep(100 * time.Millisecond) // a boot timed from after the delete would start this much later
		return false, nil, nil
	})
	k := kubefake.NewSimpleClientset()
	k.PrependReactor("create", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("namespaces are not made in this test")
	})
	before := time.Now()
	tl := timeline.New()
	cfg := &config.Config{}
	cfg.Cluster.Workload = "vm"
	w := New(cfg, nil, map[string]time.Duration{"vmi": 5 * time.Second}, t.TempDir(), &kube.Clients{Kube: k, KubeVirt: kv}, nil, nil, nil, tl)

	if _, err := w.RecreateVM(context.Background(), wrapped{&vmGuest{spec: spec, vmName: name}}); err == nil {
		t.Fatal("re-created a VM whose namespace cannot be made")
	}
	if _, err := kv.KubevirtV1().VirtualMachines(spec.Namespace).Get(context.Background(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the old VM is still there (%v)", err)
	}
	if _, err := w.StartVM(context.Background(), platform.VMSpec{Name: "vm-b", Namespace: "tenant-b"}); err == nil {
		t.Fatal("started a VM whose namespace cannot be made")
	}
	boots := tl.Boots()
	if len(boots) != 2 {
		t.Fatalf("boots %+v: want the re-creation and the start", boots)
	}
	if b := boots[0]; b.VM != "tenant-recreate/vm-recreate" || b.Kind != timeline.BootRecreate || b.Took() != 0 {
		t.Errorf("re-creation recorded as %+v: want tenant-recreate/vm-recreate, re-create, no stage reached", b)
	}
	// The timeline's clock starts after before: a boot counted from before
	// the delete began at most deleteAt-before into the run.
	if at, limit := boots[0].At, deleteAt.Sub(before).Seconds(); deleteAt.IsZero() || at > limit {
		t.Errorf("re-creation began %.3f s into the run, after its delete (%.3f s)", at, limit)
	}
	if b := boots[1]; b.VM != "tenant-b/vm-b" || b.Kind != timeline.BootStart {
		t.Errorf("start recorded as %+v", b)
	}
}
