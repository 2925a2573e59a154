package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/vlan-conformance/framework/platform"
)

// stagerPayloadDir is where the stager's image carries the plugins.
const stagerPayloadDir = "/cni-plugins"

// multusPod is the Multus pod of a node.
func (c *Cluster) multusPod(ctx context.Context, nodeName string) (*corev1.Pod, error) {
	list, err := c.c.kube.CoreV1().Pods(multusNamespace).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + nodeName})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		p := &list.Items[i]
		if strings.HasPrefix(p.Name, multusDaemonSet+"-") && p.DeletionTimestamp == nil {
			return p, nil
		}
	}
	return nil, fmt.Errorf("no %s pod on node %s", multusDaemonSet, nodeName)
}

func (c *Cluster) Payload(ctx context.Context, pn platform.Node) (map[string]platform.FileState, error) {
	n, ok := pn.(*node)
	if !ok || n.pid == 0 || c.stager == nil {
		return nil, fmt.Errorf("the stager's payload on %s: %w (needs a kind node and --cni-staging=stager)", pn.Name(), platform.ErrNotObservable)
	}
	p, err := c.multusPod(ctx, n.name)
	if err != nil {
		return nil, err
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.ContainerID == "" {
			continue
		}
		_, id, _ := strings.Cut(cs.ContainerID, "://")
		pid, err := processOf([]string{id})
		if err != nil {
			return nil, fmt.Errorf("container %s of %s: %w", cs.Name, p.Name, err)
		}
		return snapshotDir(filepath.Join("/proc", pid, "root", stagerPayloadDir))
	}
	return nil, fmt.Errorf("pod %s/%s has no running container", p.Namespace, p.Name)
}

func (c *Cluster) PlaceCNIFile(_ context.Context, pn platform.Node, name string, content []byte) (func() error, error) {
	n, ok := pn.(*node)
	if !ok || n.pid == 0 {
		return nil, fmt.Errorf("writing into /opt/cni/bin of %s: %w", pn.Name(), platform.ErrNotObservable)
	}
	path := n.hostPath(filepath.Join(n.CNIBinDir(), name))
	if err := os.WriteFile(path, content, 0o755); err != nil {
		return nil, err
	}
	return func() error { return os.Remove(path) }, nil
}

func (c *Cluster) Restage(ctx context.Context, pn platform.Node) error {
	if c.multus == nil {
		return fmt.Errorf("re-running the stager: %w (the suite did not install Multus)", platform.ErrNotObservable)
	}
	old, err := c.multusPod(ctx, pn.Name())
	if err != nil {
		return err
	}
	if err := c.c.kube.CoreV1().Pods(old.Namespace).Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	s := Stage{Name: "multus", What: "a new Multus pod Ready on " + pn.Name(), Timeout: c.timeouts["multus"], Check: func(ctx context.Context) (bool, string, error) {
		p, err := c.multusPod(ctx, pn.Name())
		if err != nil {
			return false, err.Error(), nil
		}
		if p.UID == old.UID {
			return false, "the old pod is still there", nil
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				return true, "", nil
			}
		}
		return false, "pod " + p.Name + " " + string(p.Status.Phase), nil
	}}
	return s.Wait(ctx)
}
