package wait

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func init() { PollInterval = 5 * time.Millisecond }

// Stage.Wait wraps e2e-framework's wait.For; these pin what the wrapper
// adds: the stage's name, its last status, and a terminal cause kept apart
// from a timeout.
func TestStageWait(t *testing.T) {
	calls := 0
	ready := Stage{Name: "nodes", What: "every node Ready", Timeout: time.Second, Check: func(context.Context) (bool, string, error) {
		calls++
		return calls == 3, "2/3 Ready", nil
	}}
	if err := ready.Wait(context.Background()); err != nil || calls != 3 {
		t.Fatalf("ready after 3 checks: err %v, %d checks", err, calls)
	}

	slow := Stage{Name: "kubevirt", What: "the KubeVirt CR Available", Timeout: 30 * time.Millisecond, Check: func(context.Context) (bool, string, error) {
		return false, "phase Deploying", nil
	}}
	var se *StageError
	err := slow.Wait(context.Background())
	if !errors.As(err, &se) || se.Stage != "kubevirt" || se.Status != "phase Deploying" || se.Err != nil || !strings.Contains(err.Error(), "not reached within 30ms") {
		t.Fatalf("timeout: %v", err)
	}

	// The last check, cut short by the deadline, reads as the deadline
	// (as client-go's rate limiter says it); the error keeps the reading
	// before it. Seen in CI: "reading the APIService: client rate limiter
	// Wait returned an error: context deadline exceeded" hid the condition.
	cut := Stage{Name: "kubevirt-api", Timeout: 40 * time.Millisecond, Check: func(ctx context.Context) (bool, string, error) {
		select {
		case <-ctx.Done():
			return false, "reading the APIService: " + ctx.Err().Error(), nil
		case <-time.After(15 * time.Millisecond):
			return false, "Available=False (FailedDiscoveryCheck: 503)", nil
		}
	}}
	err = cut.Wait(context.Background())
	if !errors.As(err, &se) || se.Status != "Available=False (FailedDiscoveryCheck: 503)" {
		t.Fatalf("cut short: %v", err)
	}

	cause := errors.New("FailedCreatePodSandBox")
	broken := Stage{Name: "vmi", What: "VMI Ready", Timeout: time.Minute, Check: func(context.Context) (bool, string, error) {
		return false, "Scheduling", cause
	}}
	start := time.Now()
	err = broken.Wait(context.Background())
	if !errors.As(err, &se) || !errors.Is(err, cause) || se.Status != "Scheduling" || time.Since(start) > 10*time.Second {
		t.Fatalf("terminal: %v after %s", err, time.Since(start))
	}

	// A zero timeout is spent at once (to wait.For, zero means no timeout).
	spent := Stage{Name: "nad", Timeout: 0, Check: func(context.Context) (bool, string, error) { return false, "", nil }}
	if err := spent.Wait(context.Background()); !errors.As(err, &se) || se.Stage != "nad" {
		t.Fatalf("zero timeout: %v", err)
	}
}

// A launcher pod that cannot be made, or its network, ends a wait at once;
// a VirtualMachine's own FailedCreate only once it repeats, since its
// controller retries (KubeVirt's once-lost race storing a re-created VM's
// controllerRevisions); Normal events and other reasons never do.
func TestTerminalEvent(t *testing.T) {
	ev := func(kind, typ, reason string, count int32) corev1.Event {
		return corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: kind, Name: "x"}, Type: typ, Reason: reason, Count: count, Message: "m"}
	}
	for _, tc := range []struct {
		ev       corev1.Event
		terminal bool
	}{
		{ev("VirtualMachineInstance", corev1.EventTypeWarning, "FailedCreate", 1), true},
		{ev("Pod", corev1.EventTypeWarning, "FailedCreatePodSandBox", 1), true},
		{ev("VirtualMachine", corev1.EventTypeWarning, "FailedCreate", 1), false},
		{ev("VirtualMachine", corev1.EventTypeWarning, "FailedCreate", 2), false},
		{ev("VirtualMachine", corev1.EventTypeWarning, "FailedCreate", 3), true},
		{ev("VirtualMachineInstance", corev1.EventTypeNormal, "FailedCreate", 1), false},
		{ev("VirtualMachineInstance", corev1.EventTypeWarning, "BackOff", 5), false},
	} {
		err := TerminalEvent([]corev1.Event{tc.ev})
		if (err != nil) != tc.terminal {
			t.Errorf("%s %s %s ×%d: %v, want terminal %v", tc.ev.InvolvedObject.Kind, tc.ev.Type, tc.ev.Reason, tc.ev.Count, err, tc.terminal)
		}
	}
}
