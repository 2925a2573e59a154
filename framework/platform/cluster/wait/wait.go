// Package wait is how the cluster tier waits: readiness stages, each with
// its own timeout and an error that names it, so a slow KubeVirt is never
// reported as a broken VM.
//
//	nodes -> multus -> kubevirt            (once, when the platform is built)
//	nad -> vmi (or pod)                    (per workload)
package wait

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	e2ewait "sigs.k8s.io/e2e-framework/klient/wait"
)

// Stage is one readiness stage of a run.
type Stage struct {
	Name    string // nodes, multus, kubevirt, nad, vmi, pod
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

// PollInterval is how often stages check; tests shorten it.
var PollInterval = 2 * time.Second

// Wait polls the stage with e2e-framework's wait.For until it is done,
// fails, or its timeout passes. A bare wait.For reports only "context
// deadline exceeded"; the condition here keeps the last status and a
// terminal cause so the error names the stage and what it last saw.
func (s Stage) Wait(ctx context.Context) error {
	// A stage's own deadline, so that a zero timeout is spent at once
	// rather than meaning "none" as it does to wait.For.
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	status := "not checked yet"
	var terminal error
	err := e2ewait.For(func(ctx context.Context) (bool, error) {
		done, st, err := s.Check(ctx)
		// A check the deadline cut short saw nothing of the stage ("client
		// rate limiter Wait returned an error: context deadline exceeded"):
		// the error quotes the last status that was a real reading.
		if st != "" && ctx.Err() == nil {
			status = st
		}
		switch {
		case err != nil && ctx.Err() != nil:
			return false, nil // a request cut short by the deadline: a timeout
		case err != nil:
			terminal = err
			return false, err
		}
		return done, nil
	}, e2ewait.WithContext(ctx), e2ewait.WithTimeout(s.Timeout), e2ewait.WithInterval(PollInterval), e2ewait.WithImmediate())
	switch {
	case err == nil:
		return nil
	case terminal != nil:
		return &StageError{Stage: s.Name, What: s.What, Timeout: s.Timeout, Status: status, Err: terminal}
	}
	return &StageError{Stage: s.Name, What: s.What, Timeout: s.Timeout, Status: status}
}

// All runs stages in order and stops at the first that fails.
func All(ctx context.Context, stages []Stage) error {
	for _, s := range stages {
		if err := s.Wait(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Gone is a stage that waits until an object is deleted (exists reports
// false, or an error, once it is).
func Gone(name, what string, timeout time.Duration, exists func(ctx context.Context) bool) Stage {
	return Stage{Name: name, What: what + " deleted", Timeout: timeout, Check: func(ctx context.Context) (bool, string, error) {
		return !exists(ctx), "still there", nil
	}}
}

// Reasons of Warning events that end a wait at once: the launcher pod
// cannot be made (virt-controller), or its network cannot be set up
// (kubelet, with Multus's and the CNI plugin's error in the message).
var terminalReasons = []string{"FailedCreate", "FailedCreatePodSandBox"}

// vmRetries is how often a VirtualMachine's own FailedCreate must repeat
// to end a wait. Its controller requeues every sync error, and a race it
// lost once is won on the next sync: KubeVirt v1.8.4 failed to store a
// re-created VM's instancetype controllerRevisions once (a 422 on its own
// patch) and went on to start it. A persistent error repeats within a
// second (the requeue backs off from 5 ms).
const vmRetries = 3

// TerminalEvent is the first Warning event that ends a wait for good.
func TerminalEvent(evs []corev1.Event) error {
	for _, e := range evs {
		if e.Type != corev1.EventTypeWarning || !slices.Contains(terminalReasons, e.Reason) {
			continue
		}
		if e.InvolvedObject.Kind == "VirtualMachine" && e.Count < vmRetries {
			continue
		}
		return fmt.Errorf("%s %s: %s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
	}
	return nil
}

// Events lists a namespace's events whose object matches, oldest first.
// (Filtered here: field selectors are not portable to fakes.)
func Events(ctx context.Context, kube kubernetes.Interface, ns string, match func(corev1.ObjectReference) bool) ([]corev1.Event, error) {
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
