// Package nodeagent is the suite's way onto an existing cluster's nodes: a
// DaemonSet of the suite's own image (`conformance node wait`) in the
// node's network namespace (hostNetwork), which the suite asks for one
// observation at a time through pods/exec (`conformance node observe`).
// The observations are framework/nodenet's, the code the suite runs in a
// node it enters: one implementation, run where the node is.
//
//	suite ──pods/exec──▶ apiserver ──▶ kubelet on worker-1
//	                                     └─ vcf-node-agent pod (hostNetwork)
//	                                          conformance node observe links
//	                                          └─ netlink in worker-1's own netns
package nodeagent

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/cozystack/vlan-conformance/framework/nodenet"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/kube"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/wait"
)

// Name is the agent's namespace, DaemonSet and container; a run deletes
// the namespace at its end, and the next run's sweep one a killed run left
// (it carries kube.OwnedLabel).
const Name = "vcf-node-agent"

// binary is the driver's path in the suite's image (images/conformance).
const binary = "/conformance"

// Render is the agent's namespace and DaemonSet, running image on every
// node. Pod security: the namespace admits privileged pods (hostNetwork is
// not in the baseline profile Talos enforces by default); the container
// itself drops every capability, since what it reads needs none: netlink
// dumps of links, addresses, routes and br100's FDB, and ETHTOOL_GDRVINFO.
func Render(image string) (*corev1.Namespace, *appsv1.DaemonSet) {
	labels := map[string]string{"app.kubernetes.io/name": Name}
	ns := kube.RenderNamespace(Name)
	ns.Labels["pod-security.kubernetes.io/enforce"] = "privileged"
	no, yes, nobody := false, true, int64(65534)
	grace := int64(1)
	ds := &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: Name, Namespace: Name, Labels: kube.Owned()},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					HostNetwork:                   true,
					AutomountServiceAccountToken:  &no,
					TerminationGracePeriodSeconds: &grace,
					Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{
						Name:            Name,
						Image:           image,
						ImagePullPolicy: corev1.PullIfNotPresent,
						Command:         []string{binary, "node", "wait"},
						SecurityContext: &corev1.SecurityContext{
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
							RunAsUser:                &nobody,
							RunAsNonRoot:             &yes,
							ReadOnlyRootFilesystem:   &yes,
							AllowPrivilegeEscalation: &no,
						},
					}},
				},
			},
		},
	}
	return ns, ds
}

// Deploy creates the agent's namespace and DaemonSet. A namespace of that
// name still terminating (the sweep of one a killed run left) is waited
// out first.
func Deploy(ctx context.Context, k *kube.Clients, image string) error {
	ns, ds := Render(image)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute) // a namespace's pods take their grace period to go
	defer cancel()
	for {
		_, err := k.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
		if err == nil {
			break
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("namespace %s: %w", Name, err)
		}
		if err := Remove(ctx, k); err != nil {
			return fmt.Errorf("namespace %s, left by an earlier run: %w", Name, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace %s, left by an earlier run, is still terminating: %w", Name, context.Cause(ctx))
		case <-time.After(time.Second):
		}
	}
	if _, err := k.Kube.AppsV1().DaemonSets(Name).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("DaemonSet %s/%s: %w", Name, Name, err)
	}
	return nil
}

// Remove deletes the agent's namespace, the DaemonSet with it.
func Remove(ctx context.Context, k *kube.Clients) error {
	err := k.Kube.CoreV1().Namespaces().Delete(ctx, Name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// Pods are the agent's ready pods, by the node they run on, and what keeps
// each of the others from being ready.
func Pods(ctx context.Context, k *kube.Clients) (ready map[string]string, notReady map[string]string, err error) {
	list, err := k.Kube.CoreV1().Pods(Name).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + Name})
	if err != nil {
		return nil, nil, err
	}
	ready, notReady = map[string]string{}, map[string]string{}
	for _, p := range list.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		if why := unready(p); why != "" {
			notReady[p.Spec.NodeName] = p.Name + ": " + why
			continue
		}
		ready[p.Spec.NodeName] = p.Name
	}
	return ready, notReady, nil
}

// unready is why the pod is not ready ("" when it is): its container's
// waiting reason or last exit, else its phase.
func unready(p corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.Status.Phase == corev1.PodRunning {
			return ""
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		switch {
		case cs.State.Waiting != nil && cs.LastTerminationState.Terminated != nil:
			t := cs.LastTerminationState.Terminated
			return fmt.Sprintf("%s, last exit %d (%s) after %d restarts", cs.State.Waiting.Reason, t.ExitCode, t.Reason, cs.RestartCount)
		case cs.State.Waiting != nil:
			return cs.State.Waiting.Reason + " " + cs.State.Waiting.Message
		case cs.State.Terminated != nil:
			return fmt.Sprintf("exited %d (%s)", cs.State.Terminated.ExitCode, cs.State.Terminated.Reason)
		}
	}
	return string(p.Status.Phase)
}

// ReadyStage waits until every one of nodes runs a ready agent pod (nodes
// is read when it checks: the plan lists the nodes before this stage).
func ReadyStage(k *kube.Clients, nodes func() []string, timeout time.Duration) wait.Stage {
	return wait.Stage{Name: "node-agent", What: "a ready " + Name + " pod on every VLAN node", Timeout: timeout, Check: func(ctx context.Context) (bool, string, error) {
		ready, notReady, err := Pods(ctx, k)
		switch {
		case apierrors.IsForbidden(err):
			return false, "", fmt.Errorf("listing the agent's pods: %w", err)
		case err != nil:
			return false, "", nil // the status stays the last real reading
		}
		var missing []string
		all := nodes()
		for _, n := range all {
			if _, ok := ready[n]; !ok {
				why := notReady[n]
				if why == "" {
					why = "no pod yet"
				}
				missing = append(missing, n+" ("+why+")")
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			return false, fmt.Sprintf("%d/%d nodes with a ready agent; without: %s", len(all)-len(missing), len(all), strings.Join(missing, "; ")), nil
		}
		return true, fmt.Sprintf("%d/%d nodes with a ready agent", len(all), len(all)), nil
	}}
}

// Pod is the agent on one node: nodenet's Agent, through pods/exec.
type Pod struct {
	Kube *kube.Clients
	Name string
}

var _ nodenet.Agent = Pod{}

// Observe runs `conformance node observe` in the agent's container and
// returns what it printed; its stderr is the error when it fails.
func (p Pod) Observe(ctx context.Context, o nodenet.Observation) ([]byte, error) {
	cmd := []string{binary, "node", "observe", o.What}
	if o.Iface != "" {
		cmd = append(cmd, "--iface="+o.Iface)
	}
	var stdout, stderr bytes.Buffer
	if err := p.exec(ctx, cmd, &stdout, &stderr); err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return nil, fmt.Errorf("%s in pod %s/%s: %s (%w)", strings.Join(cmd, " "), Name, p.Name, msg, err)
		}
		return nil, fmt.Errorf("%s in pod %s/%s: %w", strings.Join(cmd, " "), Name, p.Name, err)
	}
	return stdout.Bytes(), nil
}

// exec runs cmd in the pod: over a websocket, or SPDY where the API
// server offers only that.
func (p Pod) exec(ctx context.Context, cmd []string, stdout, stderr *bytes.Buffer) error {
	req := p.Kube.Kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(Name).Name(p.Name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: Name, Command: cmd, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(p.Kube.Rest, "GET", req.URL().String())
	if err != nil {
		return err
	}
	spdy, err := remotecommand.NewSPDYExecutor(p.Kube.Rest, "POST", req.URL())
	if err != nil {
		return err
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return err
	}
	return ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: stdout, Stderr: stderr})
}
