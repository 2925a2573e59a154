package multus

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/vlan-conformance/framework/cozystack"
	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/node"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/wait"
	"github.com/cozystack/vlan-conformance/framework/stager"
)

var _ platform.Stager = (*Multus)(nil)

// stagerPayloadDir is where the stager's image carries the plugins.
const stagerPayloadDir = "/cni-plugins"

// reachable is a kind node container, whose file system the host sees.
func reachable(pn platform.Node) (*node.Node, bool) {
	n, ok := pn.(*node.Node)
	return n, ok && n.Reachable()
}

// SetStaging re-renders the Multus DaemonSet with the stager's init
// container (on) or without it (off), rolls it out and reads back the pod
// template's init containers.
func (m *Multus) SetStaging(ctx context.Context, on bool) ([]string, error) {
	if err := m.applyStaging(ctx, on); err != nil {
		return nil, err
	}
	if err := RolledOutStage(m.kube, m.timeouts["multus"]).Wait(ctx); err != nil {
		return nil, err
	}
	ds, err := m.kube.Kube.AppsV1().DaemonSets(m.namespace).Get(ctx, m.daemonSet, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	names := []string{}
	for _, ic := range ds.Spec.Template.Spec.InitContainers {
		names = append(names, ic.Name)
	}
	return names, nil
}

// applyStaging renders the Multus DaemonSet for stageCniPlugins on and
// applies it, without waiting for the roll it starts.
func (m *Multus) applyStaging(ctx context.Context, on bool) error {
	if m.cfg.ExistingCluster() || m.objs == nil {
		return fmt.Errorf("rendering Multus on a cluster the suite did not install it on: %w", evidence.ErrNotObservable)
	}
	rev := fmt.Sprintf("%v-%d", on, time.Now().UnixNano())
	if m.subj != nil {
		// The release's own template decides; the suite removes nothing.
		// (Under Control.StagerKeptWhenOff it renders a copy whose
		// template ignores the value.)
		objs, err := m.releaseObjects(cozystack.StagingValue(on))
		if err != nil {
			return err
		}
		m.objs = objs
	} else if err := m.withReferenceStaging(on, rev); err != nil {
		return err
	}
	return m.kube.Apply.Apply(ctx, m.objs)
}

// withReferenceStaging is the suite's reference subject (no --cozystack):
// the upstream DaemonSet with the stager's init container grafted on or
// taken off. rev annotates the pod template so that the DaemonSet rolls.
func (m *Multus) withReferenceStaging(on bool, rev string) error {
	var stager *corev1.Container
	// A negative control's chart may keep the init container whatever
	// stageCniPlugins says (Control.StagerKeptWhenOff).
	if on || m.cfg.SelectedControl().StagerKeptWhenOff {
		if m.stager == nil {
			return fmt.Errorf("staging on needs --cni-staging=stager and --cni-plugins-image: %w", evidence.ErrNotObservable)
		}
		stager = m.stager
	}
	if err := withStaging(m.objs, stager, m.stagerVol, rev); err != nil {
		return err
	}
	return m.controlRollout(m.objs)
}

func (m *Multus) CNIBin(_ context.Context, pn platform.Node) (map[string]stager.File, error) {
	n, ok := reachable(pn)
	if !ok {
		return nil, fmt.Errorf("reading /opt/cni/bin of %s: %w", pn.Name(), evidence.ErrNotObservable)
	}
	return stager.Listing(n.HostPath(n.CNIBinDir()))
}

// pod is the Multus pod of a node.
func (m *Multus) pod(ctx context.Context, nodeName string) (*corev1.Pod, error) {
	list, err := m.kube.Kube.CoreV1().Pods(m.namespace).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + nodeName})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		p := &list.Items[i]
		if strings.HasPrefix(p.Name, m.daemonSet+"-") && p.DeletionTimestamp == nil {
			return p, nil
		}
	}
	return nil, fmt.Errorf("no %s/%s pod on node %s", m.namespace, m.daemonSet, nodeName)
}

func (m *Multus) Payload(ctx context.Context, pn platform.Node) (map[string]stager.File, error) {
	n, ok := reachable(pn)
	if !ok || m.stager == nil {
		return nil, fmt.Errorf("the stager's payload on %s: %w (needs a kind node and --cni-staging=stager)", pn.Name(), evidence.ErrNotObservable)
	}
	p, err := m.pod(ctx, n.Name())
	if err != nil {
		return nil, err
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.ContainerID == "" {
			continue
		}
		_, id, _ := strings.Cut(cs.ContainerID, "://")
		pid, err := node.ProcessOf([]string{id})
		if err != nil {
			return nil, fmt.Errorf("container %s of %s: %w", cs.Name, p.Name, err)
		}
		return stager.Listing(filepath.Join("/proc", pid, "root", stagerPayloadDir))
	}
	return nil, fmt.Errorf("pod %s/%s has no running container", p.Namespace, p.Name)
}

func (m *Multus) PlaceCNIFile(_ context.Context, pn platform.Node, name string, content []byte) (func() error, error) {
	n, ok := reachable(pn)
	if !ok {
		return nil, fmt.Errorf("writing into /opt/cni/bin of %s: %w", pn.Name(), evidence.ErrNotObservable)
	}
	// Aside and renamed over: the node's plugin of that name may be
	// executing right now (a CNI call on the node).
	return stager.PlaceFile(n.HostPath(n.CNIBinDir()), name, content, 0o755)
}

func (m *Multus) PlaceCNIDir(_ context.Context, pn platform.Node, name string) (func() error, error) {
	n, ok := reachable(pn)
	if !ok {
		return nil, fmt.Errorf("placing a directory in /opt/cni/bin of %s: %w", pn.Name(), evidence.ErrNotObservable)
	}
	return stager.PlaceDir(n.HostPath(n.CNIBinDir()), name)
}

func (m *Multus) Restage(ctx context.Context, pn platform.Node) error {
	if m.objs == nil {
		return fmt.Errorf("re-running the stager: %w (the suite did not install Multus)", evidence.ErrNotObservable)
	}
	old, err := m.pod(ctx, pn.Name())
	if err != nil {
		return err
	}
	if err := m.kube.Kube.CoreV1().Pods(old.Namespace).Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	s := wait.Stage{Name: "multus", What: "a new Multus pod Ready on " + pn.Name(), Timeout: m.timeouts["multus"], Check: func(ctx context.Context) (bool, string, error) {
		p, err := m.pod(ctx, pn.Name())
		if err != nil {
			return false, err.Error(), nil
		}
		if p.UID == old.UID {
			return false, "the old pod is still there", nil
		}
		// A failed init container is restarted with a back-off and the pod
		// never gets Ready: no point waiting out the stage.
		for _, ic := range p.Status.InitContainerStatuses {
			if t := lastTermination(ic); t != nil && t.ExitCode != 0 {
				return false, "", fmt.Errorf("pod %s: init container %s exited %d (%s): %q", p.Name, ic.Name, t.ExitCode, t.Reason, t.Message)
			}
		}
		if podReady(p) {
			return true, "", nil
		}
		return false, "pod " + p.Name + " " + string(p.Status.Phase), nil
	}}
	return s.Wait(ctx)
}

// lastTermination is a container's current termination, or its previous
// one while it waits to be restarted.
func lastTermination(cs corev1.ContainerStatus) *corev1.ContainerStateTerminated {
	if t := cs.State.Terminated; t != nil {
		return t
	}
	return cs.LastTerminationState.Terminated
}

func podReady(p *corev1.Pod) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// StagerRun reads the node's Multus pod, its stager init container's
// status and its log from the API server, as the guide's reader would with
// `kubectl logs <multus-pod> --container install-cni-plugins`.
func (m *Multus) StagerRun(ctx context.Context, pn platform.Node) (platform.StagerRun, error) {
	if m.objs == nil || m.stager == nil {
		return platform.StagerRun{}, fmt.Errorf("the stager's run on %s: %w (the suite did not install Multus with the stager)", pn.Name(), evidence.ErrNotObservable)
	}
	p, err := m.pod(ctx, pn.Name())
	if err != nil {
		return platform.StagerRun{}, err
	}
	r := platform.StagerRun{Pod: p.Namespace + "/" + p.Name, Ready: podReady(p)}
	found := false
	for _, ic := range p.Status.InitContainerStatuses {
		if ic.Name != m.stager.Name {
			continue
		}
		found = true
		if t := ic.State.Terminated; t != nil {
			r.Terminated, r.ExitCode, r.Message = true, t.ExitCode, t.Message
		}
	}
	if !found {
		return r, fmt.Errorf("pod %s reports no init container %s", r.Pod, m.stager.Name)
	}
	raw, err := m.kube.Kube.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: m.stager.Name}).Do(ctx).Raw()
	if err != nil {
		return r, fmt.Errorf("the log of %s in %s: %w", m.stager.Name, r.Pod, err)
	}
	if s := strings.TrimRight(string(raw), "\n"); s != "" {
		r.Log = strings.Split(s, "\n")
	}
	return r, nil
}
