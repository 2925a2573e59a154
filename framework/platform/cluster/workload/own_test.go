package workload

import (
	"context"
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	kvfake "kubevirt.io/client-go/kubevirt/fake"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/kube"
)

// wrapped is what a spec holds: the platform's guest embedded in a value
// of its own (suites/framework.VM).
type wrapped struct{ platform.Guest }

func (w wrapped) Unwrap() platform.Guest { return w.Guest }

// A VM passed back wrapped must still read as a VM. Seen in the VM lane:
// the cluster ARP-01 spec got "not observable ... (a pod workload)" for
// its VM because the wrapper failed the type assertion.
func TestWrappedGuestIsStillTheWorkload(t *testing.T) {
	vm := &vmGuest{spec: platform.VMSpec{Name: "vm-recreate", Namespace: "tenant-recreate"}, vmName: "vm-instance-vm-recreate"}
	w := &Workloads{kube: &kube.Clients{KubeVirt: kvfake.NewSimpleClientset(&kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: vm.vmName, Namespace: vm.spec.Namespace, UID: "vm-uid"},
	}, &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: vm.vmName, Namespace: vm.spec.Namespace, UID: "vmi-uid"},
	})}}
	st, err := w.VMStatus(context.Background(), wrapped{vm})
	if err != nil || st.VMUID != "vm-uid" || st.VMIUID != "vmi-uid" {
		t.Fatalf("a wrapped VM: got %+v, %v; want its VMI status", st, err)
	}
	pod := &podGuest{}
	if _, err := w.VMStatus(context.Background(), wrapped{pod}); !errors.Is(err, evidence.ErrNotObservable) {
		t.Fatalf("a wrapped pod: got %v, want not observable", err)
	}
}
