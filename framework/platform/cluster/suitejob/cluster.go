package suitejob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/vlan-conformance/framework/platform/cluster/kube"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/wait"
)

// goneWithin bounds the wait for a namespace to go (its VMs' grace).
const goneWithin = 5 * time.Minute

// Deploy creates the run's objects. What a killed certify left (its
// namespace, ClusterRole, binding) is removed first.
func Deploy(ctx context.Context, k *kube.Clients, objs Objects, progress io.Writer) error {
	if err := Remove(ctx, k, progress); err != nil {
		return fmt.Errorf("what an earlier certify left: %w", err)
	}
	c := k.Kube
	steps := []struct {
		what   string
		create func() error
	}{
		{"namespace " + Namespace, func() error {
			_, err := c.CoreV1().Namespaces().Create(ctx, objs.Namespace, metav1.CreateOptions{})
			return err
		}},
		{"ServiceAccount " + Namespace + "/" + Name, func() error {
			_, err := c.CoreV1().ServiceAccounts(Namespace).Create(ctx, objs.ServiceAccount, metav1.CreateOptions{})
			return err
		}},
		{"ClusterRole " + Name, func() error {
			_, err := c.RbacV1().ClusterRoles().Create(ctx, objs.Role, metav1.CreateOptions{})
			return err
		}},
		{"ClusterRoleBinding " + Name, func() error {
			_, err := c.RbacV1().ClusterRoleBindings().Create(ctx, objs.Binding, metav1.CreateOptions{})
			return err
		}},
		{"ConfigMap " + Namespace + "/" + Name + " (the inputs)", func() error {
			if objs.Inputs == nil {
				return nil
			}
			_, err := c.CoreV1().ConfigMaps(Namespace).Create(ctx, objs.Inputs, metav1.CreateOptions{})
			return err
		}},
		{"Job " + Namespace + "/" + Name, func() error {
			_, err := c.BatchV1().Jobs(Namespace).Create(ctx, objs.Job, metav1.CreateOptions{})
			return err
		}},
	}
	for _, s := range steps {
		if err := s.create(); err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
	}
	fmt.Fprintf(progress, "certify: created namespace %s (ServiceAccount, Job %s) and ClusterRole %s with its binding\n", Namespace, Name, Name)
	return nil
}

// Remove ends the run and deletes all it and certify made, in that order.
// The Job goes first, and its pod's end is waited for: the run removes
// what it made (its tenants, the node agent) on the pod's SIGTERM, while
// its role still grants it, within the pod's grace. Then whatever a run
// killed past its grace left (the namespaces labelled kube.OwnedLabel, as
// the next run's sweep would), the Job's namespace, the binding and the
// role; the namespaces' end is waited for too.
func Remove(ctx context.Context, k *kube.Clients, progress io.Writer) error {
	c := k.Kube
	var errs []error
	ignore := func(err error) {
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	background := metav1.DeletePropagationBackground
	del := metav1.DeleteOptions{PropagationPolicy: &background}
	if _, err := c.CoreV1().Namespaces().Get(ctx, Namespace, metav1.GetOptions{}); err == nil {
		ignore(c.BatchV1().Jobs(Namespace).Delete(ctx, Name, del))
		fmt.Fprintf(progress, "certify: stopping the run (Job %s/%s deleted) and waiting for its pod to end (it removes what it made)\n", Namespace, Name)
		ignore(wait.Gone("certify", "the run's pod", podGoneWithin, func(ctx context.Context) bool {
			list, err := c.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + Name})
			return err != nil || len(list.Items) > 0
		}).Wait(ctx))
	} else {
		ignore(err)
	}
	left, err := kube.SweepNamespaces(ctx, k)
	ignore(err)
	if len(left) > 0 {
		fmt.Fprintf(progress, "certify: deleting what the run left: namespaces %s\n", strings.Join(left, ", "))
	}
	ignore(c.CoreV1().Namespaces().Delete(ctx, Namespace, del))
	ignore(wait.Gone("certify", "namespace "+Namespace, goneWithin, func(ctx context.Context) bool {
		_, err := c.CoreV1().Namespaces().Get(ctx, Namespace, metav1.GetOptions{})
		return !apierrors.IsNotFound(err)
	}).Wait(ctx))
	// The run's own, still terminating when its pod ended, too: nothing of
	// it is left once certify returns.
	ignore(wait.Gone("certify", "the namespaces labelled "+kube.OwnedLabel, goneWithin, func(ctx context.Context) bool {
		list, err := c.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: kube.OwnedLabel + "=true"})
		return err != nil || len(list.Items) > 0
	}).Wait(ctx))
	ignore(c.RbacV1().ClusterRoleBindings().Delete(ctx, Name, metav1.DeleteOptions{}))
	ignore(c.RbacV1().ClusterRoles().Delete(ctx, Name, metav1.DeleteOptions{}))
	return errors.Join(errs...)
}

// podGoneWithin bounds the wait for the run's pod to end: its grace, and
// a minute for the kubelet.
const podGoneWithin = Grace + time.Minute

// Pod is the Job's pod once it is scheduled and its container started; a
// pod that cannot start (an image that cannot be pulled, a pod the
// namespace's policy refuses) is said on progress while it waits, and is
// an error once the Job fails.
func Pod(ctx context.Context, k *kube.Clients, progress io.Writer) (string, error) {
	said := ""
	for {
		list, err := k.Kube.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + Name})
		if err != nil {
			return "", err
		}
		status := "no pod yet"
		for _, p := range list.Items {
			switch why := waiting(p); {
			case why == "":
				return p.Name, nil
			default:
				status = p.Name + ": " + why
			}
		}
		if job, err := k.Kube.BatchV1().Jobs(Namespace).Get(ctx, Name, metav1.GetOptions{}); err == nil {
			for _, c := range job.Status.Conditions {
				if c.Status == corev1.ConditionTrue && (c.Type == "Failed" || c.Type == "FailureTarget") {
					return "", fmt.Errorf("Job %s/%s failed before its pod ran: %s: %s (%s)", Namespace, Name, c.Reason, c.Message, status)
				}
			}
		}
		if status != said {
			fmt.Fprintf(progress, "certify: waiting for the run's pod: %s\n", status)
			said = status
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("the run's pod: %s: %w", status, context.Cause(ctx))
		case <-time.After(2 * time.Second):
		}
	}
}

// waiting is why the pod's container has not started ("" once it has).
func waiting(p corev1.Pod) string {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running != nil || cs.State.Terminated != nil {
			return ""
		}
		if cs.State.Waiting != nil {
			return strings.TrimSpace(cs.State.Waiting.Reason + " " + cs.State.Waiting.Message)
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			return c.Reason + ": " + c.Message
		}
	}
	return string(p.Status.Phase)
}

// Follow copies the pod's log to progress as it comes (Ginkgo's progress
// dots are not lines) until the run says its results are ready, and
// returns the tarball's path in the pod. A log stream the API server cut
// is followed again, past what was already copied; a container that
// ended without results is an error.
func Follow(ctx context.Context, k *kube.Clients, pod string, progress io.Writer) (string, error) {
	copied := 0 // bytes of the log already copied
	var line []byte
	for {
		stream, err := k.Kube.CoreV1().Pods(Namespace).GetLogs(pod, &corev1.PodLogOptions{Container: Name, Follow: true}).Stream(ctx)
		if err != nil {
			return "", fmt.Errorf("the run's log (pod %s/%s): %w", Namespace, pod, err)
		}
		at := 0 // this stream's offset in the log
		buf := make([]byte, 32*1024)
		for {
			n, err := stream.Read(buf)
			chunk := buf[:n]
			if skip := min(max(copied-at, 0), n); skip > 0 {
				chunk = chunk[skip:]
			}
			at += n
			if len(chunk) > 0 {
				progress.Write(chunk)
				copied += len(chunk)
				for _, b := range chunk {
					if b != '\n' {
						line = append(line, b)
						continue
					}
					if path, ok := strings.CutPrefix(string(line), Ready); ok {
						stream.Close()
						return strings.TrimSpace(path), nil
					}
					line = line[:0]
				}
			}
			if err != nil {
				break
			}
		}
		stream.Close()
		if ctx.Err() != nil {
			return "", context.Cause(ctx)
		}
		p, err := k.Kube.CoreV1().Pods(Namespace).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		for _, cs := range p.Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil {
				return "", fmt.Errorf("the run's pod %s/%s ended without results: exit %d (%s) %s", Namespace, pod, t.ExitCode, t.Reason, t.Message)
			}
		}
		time.Sleep(time.Second)
	}
}

// Fetch copies the results tarball out of the pod into w (`conformance
// results` streams it: the image has no tar), and tells the pod it may end.
func Fetch(ctx context.Context, k *kube.Clients, pod string, w io.Writer) error {
	var stderr strings.Builder
	cmd := []string{binary, "results"}
	if err := k.Exec(ctx, Namespace, pod, Name, cmd, nil, w, &stderr); err != nil {
		return fmt.Errorf("%s in pod %s/%s: %s (%w)", strings.Join(cmd, " "), Namespace, pod, strings.TrimSpace(stderr.String()), err)
	}
	return nil
}

// serviceAccountNamespace is where a pod finds its own namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// OwnImage is the image of the container running the suite in this pod
// (its name is the hostname): the one carrying E2E_FOCUS, the go-runner
// contract's variable, which every runner of the image sets on it
// (certify's Job, the Sonobuoy plugin, Hydrophone) and on no other
// container. The node agent runs the same image.
func OwnImage(ctx context.Context, k *kube.Clients) (string, error) {
	ns, err := os.ReadFile(serviceAccountNamespace)
	if err != nil {
		return "", err
	}
	name, err := os.Hostname()
	if err != nil {
		return "", err
	}
	pod, err := k.Kube.CoreV1().Pods(strings.TrimSpace(string(ns))).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return runnerImage(pod)
}

func runnerImage(pod *corev1.Pod) (string, error) {
	var images []string
	for _, c := range pod.Spec.Containers {
		if slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "E2E_FOCUS" }) {
			images = append(images, c.Image)
		}
	}
	if len(images) != 1 {
		return "", fmt.Errorf("pod %s/%s: %d containers carry E2E_FOCUS, want 1", pod.Namespace, pod.Name, len(images))
	}
	return images[0], nil
}
