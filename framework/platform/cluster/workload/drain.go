package workload

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/wait"
)

// migrationAppears bounds the wait for the migration KubeVirt makes of a
// refused eviction: its evacuation controller acts within seconds.
const migrationAppears = 2 * time.Minute

// DrainVM: see platform.KubeVMs. The eviction is the one `kubectl drain`
// sends; KubeVirt's answer is read from the API server only: the
// eviction's status, the VirtualMachineInstanceMigration its evacuation
// controller creates, and the VMI's migrationState.
func (w *Workloads) DrainVM(ctx context.Context, pg platform.Guest) (platform.Guest, platform.Drain, error) {
	var d platform.Drain
	g, ok := platform.Own(pg).(*vmGuest)
	if !ok {
		return nil, d, fmt.Errorf("draining %s: %w (a pod workload)", pg.Name(), evidence.ErrNotObservable)
	}
	ns, name := g.spec.Namespace, g.vmName
	pod, err := w.launcherPod(ctx, g)
	if err != nil {
		return nil, d, err
	}
	d.Pod = ns + "/" + pod.Name
	asked := time.Now()
	err = w.kube.Kube.CoreV1().Pods(ns).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: ns}})
	switch {
	case err == nil:
		// Nothing keeps the VM on this node: its launcher pod goes.
		d.Evicted = true
		w.forget(g)
		return nil, d, nil
	case apierrors.IsTooManyRequests(err):
		// KubeVirt's webhook (or the disruption budget it keeps for the
		// VMI) refuses, as it does when it migrates the VM instead.
		d.Refusal = err.Error()
	default:
		return nil, d, fmt.Errorf("evicting launcher pod %s of VM %s/%s: %w", d.Pod, ns, name, err)
	}
	migs := w.kube.KubeVirt.KubevirtV1().VirtualMachineInstanceMigrations(ns)
	var mig *kubevirtv1.VirtualMachineInstanceMigration
	appears := wait.Stage{Name: "migration", What: fmt.Sprintf("a migration of VMI %s/%s after the eviction of %s", ns, name, pod.Name), Timeout: migrationAppears, Check: func(ctx context.Context) (bool, string, error) {
		list, err := migs.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "migrations: " + err.Error(), nil
		}
		for i := range list.Items {
			if m := &list.Items[i]; m.Spec.VMIName == name && !m.CreationTimestamp.Time.Before(asked.Truncate(time.Second)) {
				mig = m
				return true, "", nil
			}
		}
		return false, "no migration yet", nil
	}}
	if err := appears.Wait(ctx); err != nil {
		return nil, d, fmt.Errorf("the eviction of %s was refused (%s), but: %w", d.Pod, d.Refusal, err)
	}
	// KubeVirt's own object, in the tenant's namespace: it goes with it.
	d.Migration = mig.Name
	ends := wait.Stage{Name: "migration", What: fmt.Sprintf("migration %s/%s of VMI %s", ns, mig.Name, name), Timeout: w.timeouts["vmi"], Check: func(ctx context.Context) (bool, string, error) {
		cur, err := migs.Get(ctx, mig.Name, metav1.GetOptions{})
		if err != nil {
			return false, "migration: " + err.Error(), nil
		}
		d.Phase = string(cur.Status.Phase)
		switch cur.Status.Phase {
		case kubevirtv1.MigrationSucceeded:
			d.Done = time.Now()
			return true, "", nil
		case kubevirtv1.MigrationFailed:
			return false, "", errors.New("the migration failed")
		}
		return false, "phase " + d.Phase, nil
	}}
	waitErr := ends.Wait(ctx)
	if vmi, err := w.kube.KubeVirt.KubevirtV1().VirtualMachineInstances(ns).Get(ctx, name, metav1.GetOptions{}); err == nil && vmi.Status.MigrationState != nil {
		st := vmi.Status.MigrationState
		d.SourceNode, d.TargetNode, d.Reason = st.SourceNode, st.TargetNode, st.FailureReason
		if st.StartTimestamp != nil {
			d.Start = st.StartTimestamp.Time
		}
		if st.EndTimestamp != nil {
			d.End = st.EndTimestamp.Time
		}
	}
	if waitErr != nil {
		return nil, d, fmt.Errorf("draining %s/%s: %w (KubeVirt: %q)", ns, name, waitErr, d.Reason)
	}
	// The guest ran on: its shell stays logged in, only the console that
	// reached it through the source node is gone.
	w.forget(g)
	moved := &vmGuest{spec: g.spec, vmName: name, ownCluster: g.ownCluster, vlanIface: g.vlanIface}
	if err := w.readStatus(ctx, moved); err != nil {
		return nil, d, err
	}
	if err := w.login(ctx, moved); err != nil {
		return nil, d, err
	}
	w.mu.Lock()
	w.guests[ns+"/"+g.spec.Name] = moved
	w.mu.Unlock()
	return moved, d, nil
}

// launcherPod is the running launcher pod of the guest's VMI.
func (w *Workloads) launcherPod(ctx context.Context, g *vmGuest) (*corev1.Pod, error) {
	pods, err := launcherPods(ctx, w.kube, g.spec.Namespace, types.UID(g.status.VMIUID))
	if err != nil {
		return nil, err
	}
	var seen []string
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			return p, nil
		}
		seen = append(seen, p.Name+" "+string(p.Status.Phase))
	}
	return nil, fmt.Errorf("VMI %s/%s (UID %s) has no running launcher pod (%s)", g.spec.Namespace, g.vmName, g.status.VMIUID, strings.Join(seen, ", "))
}
