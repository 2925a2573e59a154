package cluster

import (
	"context"

	"fmt"
	"slices"
	"strings"
	"time"

	nadclient "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"kubevirt.io/client-go/kubevirt"
)

// Stage is one readiness stage of a run: it has its own timeout, and an
// error that names it, so a slow KubeVirt is never reported as a broken VM.
//
//	nodes -> multus -> kubevirt            (once, when the platform is built)
//	nad -> vmi                             (per VM)
type Stage struct {
	Name    string // nodes, multus, kubevirt, nad, vmi
	What    string // what "ready" means, for the error
	Timeout time.Duration
	// Check reports whether the stage is done and, if not, why (the status
	// the error quotes). A non-nil error is terminal: no point waiting.
	Check func(ctx context.Context) (done bool, status string, err error)
}

// StageError is a stage that failed or timed out.
type StageError struct {
	Stage, What string
	Timeout     time.Duration
	Status      string // the last status seen
	Err         error  // terminal cause; nil on timeout
}

func (e *StageError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("readiness stage %q (%s) failed: %v", e.Stage, e.What, e.Err)
	}
	return fmt.Sprintf("readiness stage %q (%s) not reached within %s: %s", e.Stage, e.What, e.Timeout, e.Status)
}

func (e *StageError) Unwrap() error { return e.Err }

// pollInterval is how often stages check; tests shorten it.
var pollInterval = 2 * time.Second

// Wait polls the stage until it is done, fails, or its timeout passes.
func (s Stage) Wait(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	status := "not checked yet"
	for {
		done, st, err := s.Check(ctx)
		if st != "" {
			status = st
		}
		if err != nil && ctx.Err() == nil {
			return &StageError{Stage: s.Name, What: s.What, Timeout: s.Timeout, Status: status, Err: err}
		}
		if done && err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return &StageError{Stage: s.Name, What: s.What, Timeout: s.Timeout, Status: status}
		case <-time.After(pollInterval):
		}
	}
}

// WaitAll runs stages in order and stops at the first that fails.
func WaitAll(ctx context.Context, stages []Stage) error {
	for _, s := range stages {
		if err := s.Wait(ctx); err != nil {
			return err
		}
	}
	return nil
}

// clients are the API clients the platform uses.
type clients struct {
	kube kubernetes.Interface
	kv   kubevirt.Interface
	nad  nadclient.Interface
}

// Where the components live once applied.
const (
	multusNamespace   = "kube-system"
	multusDaemonSet   = "kube-multus-ds"
	kubevirtNamespace = "kubevirt"
	kubevirtName      = "kubevirt"
)

// setupStages are the stages of building the platform, in order.
func setupStages(c clients, timeouts map[string]time.Duration) []Stage {
	return []Stage{
		{Name: "nodes", What: "every node Ready", Timeout: timeouts["nodes"], Check: nodesReady(c.kube)},
		{Name: "multus", What: "the Multus DaemonSet rolled out on every node", Timeout: timeouts["multus"], Check: multusRolledOut(c.kube)},
		{Name: "kubevirt", What: "the KubeVirt CR Available", Timeout: timeouts["kubevirt"], Check: kubevirtAvailable(c.kv)},
	}
}

// vmStages are the stages of starting one VM, in order.
func vmStages(c clients, timeouts map[string]time.Duration, namespace, vmName string, nads []string) []Stage {
	return []Stage{
		{Name: "nad", What: fmt.Sprintf("NetworkAttachmentDefinitions %v readable in %s", nads, namespace), Timeout: timeouts["nad"], Check: nadsPresent(c.nad, namespace, nads)},
		{Name: "vmi", What: fmt.Sprintf("VMI %s/%s Ready", namespace, vmName), Timeout: timeouts["vmi"], Check: vmiReady(c, namespace, vmName)},
	}
}

func nodesReady(kube kubernetes.Interface) func(context.Context) (bool, string, error) {
	return func(ctx context.Context) (bool, string, error) {
		nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "listing nodes: " + err.Error(), nil
		}
		if len(nodes.Items) == 0 {
			return false, "no nodes registered", nil
		}
		var notReady []string
		for _, n := range nodes.Items {
			if !nodeReady(n) {
				notReady = append(notReady, n.Name)
			}
		}
		if len(notReady) > 0 {
			return false, fmt.Sprintf("%d/%d nodes Ready; not Ready: %s", len(nodes.Items)-len(notReady), len(nodes.Items), strings.Join(notReady, ", ")), nil
		}
		return true, fmt.Sprintf("%d/%d nodes Ready", len(nodes.Items), len(nodes.Items)), nil
	}
}

func nodeReady(n corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// multusRolledOut finds the Multus DaemonSet wherever the cluster runs it
// (kube-system upstream, cozy-multus in Cozystack): the DaemonSet whose name
// contains "multus".
func multusRolledOut(kube kubernetes.Interface) func(context.Context) (bool, string, error) {
	return func(ctx context.Context) (bool, string, error) {
		list, err := kube.AppsV1().DaemonSets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "listing DaemonSets: " + err.Error(), nil
		}
		for _, ds := range list.Items {
			if !strings.Contains(ds.Name, "multus") {
				continue
			}
			st := ds.Status
			status := fmt.Sprintf("DaemonSet %s/%s: desired %d, updated %d, ready %d (generation %d, observed %d)", ds.Namespace, ds.Name, st.DesiredNumberScheduled, st.UpdatedNumberScheduled, st.NumberReady, ds.Generation, st.ObservedGeneration)
			done := st.ObservedGeneration >= ds.Generation && st.DesiredNumberScheduled > 0 &&
				st.UpdatedNumberScheduled == st.DesiredNumberScheduled && st.NumberReady == st.DesiredNumberScheduled
			return done, status, nil
		}
		return false, "no Multus DaemonSet found (no DaemonSet named *multus* in any namespace)", nil
	}
}

// kubevirtAvailable finds the KubeVirt CR wherever it is (kubevirt
// upstream, cozy-kubevirt in Cozystack).
func kubevirtAvailable(kv kubevirt.Interface) func(context.Context) (bool, string, error) {
	return func(ctx context.Context) (bool, string, error) {
		list, err := kv.KubevirtV1().KubeVirts(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "listing KubeVirt CRs: " + err.Error(), nil
		}
		if len(list.Items) == 0 {
			return false, "no KubeVirt CR found in any namespace", nil
		}
		k := list.Items[0]
		for _, c := range k.Status.Conditions {
			if c.Type == kubevirtv1.KubeVirtConditionAvailable {
				return c.Status == corev1.ConditionTrue, fmt.Sprintf("phase %s, Available=%s (%s: %s)", k.Status.Phase, c.Status, c.Reason, c.Message), nil
			}
		}
		return false, fmt.Sprintf("phase %q, no Available condition yet", k.Status.Phase), nil
	}
}

func nadsPresent(nc nadclient.Interface, ns string, names []string) func(context.Context) (bool, string, error) {
	return func(ctx context.Context) (bool, string, error) {
		for _, n := range names {
			if _, err := nc.K8sCniCncfIoV1().NetworkAttachmentDefinitions(ns).Get(ctx, n, metav1.GetOptions{}); err != nil {
				return false, fmt.Sprintf("NAD %s/%s: %v", ns, n, err), nil
			}
		}
		return true, "", nil
	}
}

// Reasons of Warning events that end the wait for a VMI at once: the
// launcher pod cannot be made (virt-controller), or its network cannot be
// set up (kubelet, with Multus's and the CNI plugin's error in the message).
var terminalReasons = []string{"FailedCreate", "FailedCreatePodSandBox"}

func vmiReady(c clients, ns, name string) func(context.Context) (bool, string, error) {
	return func(ctx context.Context) (bool, string, error) {
		vmi, err := c.kv.KubevirtV1().VirtualMachineInstances(ns).Get(ctx, name, metav1.GetOptions{})
		status := ""
		if err != nil {
			if !apierrors.IsNotFound(err) {
				return false, "VMI: " + err.Error(), nil
			}
			status = "no VMI yet"
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
		evs, err := vmEvents(ctx, c.kube, ns, name)
		if err != nil {
			return false, status, nil
		}
		return false, status, terminalEvent(evs)
	}
}

// terminalEvent is the first Warning event that ends a wait for good.
func terminalEvent(evs []corev1.Event) error {
	for _, e := range evs {
		if e.Type == corev1.EventTypeWarning && slices.Contains(terminalReasons, e.Reason) {
			return fmt.Errorf("%s %s: %s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
	return nil
}

// vmEvents lists the events about a VM, its VMI and its launcher pods,
// oldest first. (Filtered here: field selectors are not portable to fakes.)
func vmEvents(ctx context.Context, kube kubernetes.Interface, ns, vmName string) ([]corev1.Event, error) {
	return eventsAbout(ctx, kube, ns, func(o corev1.ObjectReference) bool {
		return (o.Kind == "VirtualMachine" || o.Kind == "VirtualMachineInstance") && o.Name == vmName ||
			o.Kind == "Pod" && strings.HasPrefix(o.Name, "virt-launcher-"+vmName+"-")
	})
}

// eventsAbout lists a namespace's events whose object matches, oldest first.
func eventsAbout(ctx context.Context, kube kubernetes.Interface, ns string, match func(corev1.ObjectReference) bool) ([]corev1.Event, error) {
	list, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if match(e.InvolvedObject) {
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(a, b corev1.Event) int { return a.LastTimestamp.Compare(b.LastTimestamp.Time) })
	return out, nil
}
