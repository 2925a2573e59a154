package workload

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	kubevirtv1 "kubevirt.io/api/core/v1"
	kvfake "kubevirt.io/client-go/kubevirt/fake"

	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/cozystack"
	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/kube"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/timeline"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/wait"
)

var vmiResource = kubevirtv1.SchemeGroupVersion.WithResource("virtualmachineinstances")

// restarting is a VM with one instance (UID vmi-1) on fake clients, its
// workloads timed on tl with stages that give up within a second.
func restarting(t *testing.T, tl *timeline.Timeline) (*Workloads, *kvfake.Clientset, *vmGuest) {
	t.Helper()
	poll := wait.PollInterval
	wait.PollInterval = 10 * time.Millisecond
	t.Cleanup(func() { wait.PollInterval = poll })
	g := &vmGuest{spec: platform.VMSpec{Name: "vm-arp07", Namespace: "tenant-arp"}, vmName: InstanceName("vm-arp07"), status: platform.VMStatus{VMUID: "vm-1", VMIUID: "vmi-1"}}
	meta := func(uid string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: g.vmName, Namespace: g.spec.Namespace, UID: types.UID(uid)}
	}
	kv := kvfake.NewSimpleClientset(&kubevirtv1.VirtualMachine{ObjectMeta: meta("vm-1")}, &kubevirtv1.VirtualMachineInstance{ObjectMeta: meta("vmi-1")})
	cfg := &config.Config{}
	cfg.Cluster.Workload = "vm"
	w := New(cfg, nil, map[string]time.Duration{"vmi": 500 * time.Millisecond}, t.TempDir(), &kube.Clients{Kube: kubefake.NewSimpleClientset(), KubeVirt: kv}, nil, nil, nil, tl)
	return w, kv, g
}

// Stop and start is stop, the instance gone, then start: started before
// its instance is gone, the VM would keep it. The boot goes on the
// timeline as a restart, counted from before the request, also when the
// new instance never becomes Ready.
func TestRestartByStopAndStartWaitsForTheInstanceToGo(t *testing.T) {
	// before is taken first: the boot's At counts from the timeline's start,
	// which must not precede the origin of the limit it is held to.
	before := time.Now()
	tl := timeline.New()
	w, kv, g := restarting(t, tl)
	var steps []string
	var stopAt time.Time
	kv.PrependReactor("put", "virtualmachines", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sub := a.GetSubresource()
		steps = append(steps, sub)
		switch sub {
		case "stop":
			stopAt = time.Now()
			// The guest shuts down: its instance goes a while later.
			go func() {
				time.Sleep(100 * time.Millisecond)
				kv.Tracker().Delete(vmiResource, g.spec.Namespace, g.vmName)
			}()
			return true, nil, nil
		case "start":
			if _, err := kv.Tracker().Get(vmiResource, g.spec.Namespace, g.vmName); !apierrors.IsNotFound(err) {
				steps = append(steps, "started while the old instance was there")
			}
			return true, nil, kv.Tracker().Create(vmiResource, &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: g.vmName, Namespace: g.spec.Namespace, UID: "vmi-2"}}, g.spec.Namespace)
		}
		return false, nil, nil
	})

	_, err := w.RestartVM(context.Background(), wrapped{g}, platform.RestartStopStart)
	if err == nil || !strings.Contains(err.Error(), "Ready") {
		t.Fatalf("a new instance that never becomes Ready: got %v, want the vmi stage's timeout", err)
	}
	if !slices.Equal(steps, []string{"stop", "start"}) {
		t.Errorf("requests %v, want stop, then start once the instance is gone", steps)
	}
	boots := tl.Boots()
	if len(boots) != 1 || boots[0].VM != "tenant-arp/vm-arp07" || boots[0].Kind != timeline.BootRestart || boots[0].Took() != 0 {
		t.Fatalf("boots %+v: want one restart of tenant-arp/vm-arp07, no stage reached", boots)
	}
	if at, limit := boots[0].At, stopAt.Sub(before).Seconds(); stopAt.IsZero() || at > limit {
		t.Errorf("the restart began %.3f s into the run, after its request (%.3f s)", at, limit)
	}
}

// A VMI deleted under its VM is a restart only once the VM's controller
// makes a new instance: without one the restart fails, naming the wait.
func TestRestartByDeletingTheVMIWaitsForANewInstance(t *testing.T) {
	w, kv, g := restarting(t, nil)
	_, err := w.RestartVM(context.Background(), wrapped{g}, platform.RestartVMIDeleted)
	if err == nil || !strings.Contains(err.Error(), "a new VMI") {
		t.Fatalf("no new instance: got %v, want the wait for a new VMI", err)
	}
	if _, err := kv.KubevirtV1().VirtualMachineInstances(g.spec.Namespace).Get(context.Background(), g.vmName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the old instance is still there (%v)", err)
	}
	if _, err := kv.KubevirtV1().VirtualMachines(g.spec.Namespace).Get(context.Background(), g.vmName, metav1.GetOptions{}); err != nil {
		t.Errorf("the VirtualMachine is gone: %v", err)
	}
}

// A pod has no VirtualMachine to restart; a way the suite does not know
// is refused before anything is asked of KubeVirt.
func TestRestartRefusesPodsAndUnknownWays(t *testing.T) {
	w, kv, g := restarting(t, nil)
	if _, err := w.RestartVM(context.Background(), wrapped{&podGuest{}}, platform.RestartSubresource); !errors.Is(err, evidence.ErrNotObservable) {
		t.Errorf("a pod: got %v, want not observable", err)
	}
	if _, err := w.RestartVM(context.Background(), wrapped{g}, platform.Restart("reboot inside the guest")); err == nil {
		t.Error("restarted a VM in a way the suite does not know")
	}
	for _, a := range kv.Actions() {
		if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			t.Errorf("asked KubeVirt to %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
}

// The control that gives unpinned VMs a MAC (ARP-07's) sets it where a
// pinned MAC goes on the suite's own VirtualMachine, and patches it onto
// the release's render, a row of the ledger; a pinned MAC wins, and
// without the control an unpinned VM's interface names no MAC.
func TestControlMACOnBothRenderings(t *testing.T) {
	spec := platform.VMSpec{Name: "vm-arp07", Namespace: "tenant-arp", Networks: []string{"vlan100"}}
	macOf := func(vm *kubevirtv1.VirtualMachine) map[string]string {
		out := map[string]string{}
		for _, i := range vm.Spec.Template.Spec.Domain.Devices.Interfaces {
			out[i.Name] = i.MacAddress
		}
		return out
	}
	controlled := &config.Config{Control: "ARP-07/mac-kept-per-vm-object"}
	want := controlled.SelectedControl().VMMAC(spec.Namespace, spec.Name, "", nil)
	if want == "" {
		t.Fatal("ARP-07/mac-kept-per-vm-object gives no MAC")
	}
	for _, tc := range []struct {
		cfg      *config.Config
		pinned   string
		vlan100  string
		describe string
	}{
		{&config.Config{}, "", "", "no control"},
		{controlled, "", want, "the control"},
		{controlled, "02:00:00:00:05:01", "02:00:00:00:05:01", "the control, a pinned MAC"},
	} {
		s := spec
		s.MAC = tc.pinned
		got := macOf(New(tc.cfg, nil, nil, t.TempDir(), nil, nil, nil, nil, nil).renderOwn(s, "").VM)
		if got["vlan100"] != tc.vlan100 || got["default"] != "" {
			t.Errorf("the suite's own VM, %s: interface MACs %v, want vlan100 %q, default none", tc.describe, got, tc.vlan100)
		}
	}

	w := releaseWorkloads(t, "--control=ARP-07/mac-kept-per-vm-object")
	objs, err := w.releaseObjects(spec, "vcf-worker2")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() != "VirtualMachine" {
			continue
		}
		typed, err := cozystack.As[kubevirtv1.VirtualMachine](o)
		if err != nil {
			t.Fatal(err)
		}
		if got := macOf(typed); got["vlan100"] != want || got["default"] != "" {
			t.Errorf("the release's VM under the control: interface MACs %v, want vlan100 %s, default none", got, want)
		}
	}
	var rows []string
	for _, c := range w.subj.Ledger.Changes() {
		rows = append(rows, c.Object+": "+c.What+" ("+c.Why+")")
	}
	if !slices.ContainsFunc(rows, func(r string) bool {
		return strings.Contains(r, "macAddress") && strings.Contains(r, "ARP-07/mac-kept-per-vm-object")
	}) {
		t.Errorf("no ledger row for the control's MAC:\n%s", strings.Join(rows, "\n"))
	}
}
