package stager

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// Result is what one run of the subject did and said.
type Result struct {
	Scenario Scenario
	Output
	// Image says what the image carried at /cni-plugins.
	Image         string
	Before, After Snapshot
	// Changes covers every name present before or after, sorted.
	Changes  []FileChange
	Duration time.Duration
	Security Security
	Notes    []string // what the run could not provide as a kubelet would
	// Killed: the harness killed the run (StageKilled) before it ended.
	Killed bool
}

// Change returns the change of name (Verdict Absent when it never existed).
func (r Result) Change(name string) FileChange {
	for _, c := range r.Changes {
		if c.Name == name {
			return c
		}
	}
	return FileChange{Name: name, Verdict: Absent}
}

// stageTimeout bounds one run; staging 14 plugins takes well under a second.
const stageTimeout = 2 * time.Minute

// Stage runs the subject once against the fake node: it snapshots the node
// directory, runs the init container's command as written in a root of its
// own, and snapshots again. An error means the run could not be made; what
// the subject itself did (exit code, log, files) is in the Result.
func (h *Harness) Stage(ctx context.Context, n *FakeNode) (Result, error) {
	return h.stage(ctx, n, nil)
}

func (h *Harness) stage(ctx context.Context, n *FakeNode, it *interrupt) (Result, error) {
	res := Result{Scenario: n.Scenario, Security: h.Security, Notes: append([]string{}, h.Security.Notes...), Image: n.imageSummary}
	before, err := h.cat.take(n.Dir)
	if err != nil {
		return res, fmt.Errorf("snapshot before: %w", err)
	}
	res.Before = before
	held, err := hold(before)
	if err != nil {
		return res, err
	}
	defer held.close()

	run := filepath.Join(n.base, "run")
	if err := os.RemoveAll(run); err != nil {
		return res, err
	}
	if err := os.MkdirAll(filepath.Join(run, "root"), 0o755); err != nil {
		return res, err
	}
	termLog := filepath.Join(run, "termination-log")
	if err := os.WriteFile(termLog, nil, 0o644); err != nil {
		return res, err
	}

	ctx, cancel := context.WithTimeout(ctx, stageTimeout)
	defer cancel()
	start := time.Now()
	log := &lineClock{}
	if it != nil {
		it.start(n.Dir, before)
	}
	notes, exitCode, err := inPrivateMountNS(func() ([]string, int, error) {
		return h.runContained(ctx, n, filepath.Join(run, "root"), termLog, log, it)
	})
	if it != nil {
		res.Killed = it.stop()
		res.Notes = append(res.Notes, it.note)
	}
	res.Duration = time.Since(start)
	res.Notes = append(res.Notes, notes...)
	res.Log, res.LogTimes = log.done()
	res.ExitCode = exitCode
	if err != nil {
		return res, err
	}

	msg, err := os.ReadFile(termLog)
	if err != nil {
		return res, err
	}
	res.TerminationMessage = kubeletTerminationMessage(string(msg), string(h.InitContainer.Container.TerminationMessagePolicy), res.ExitCode, res.Log)

	if res.After, err = h.cat.take(n.Dir); err != nil {
		return res, fmt.Errorf("snapshot after: %w", err)
	}
	if res.Changes, err = compare(res.Before, res.After, held); err != nil {
		return res, err
	}
	return res, os.RemoveAll(run)
}

// inPrivateMountNS runs fn on an OS thread of its own that has left the
// host's mount namespace. The thread is never handed back to the Go
// runtime: when fn returns it exits, and the namespace with its mounts goes
// with it (with the subject's processes, which Pdeathsig ties to it).
func inPrivateMountNS(fn func() ([]string, int, error)) ([]string, int, error) {
	type out struct {
		notes []string
		code  int
		err   error
	}
	done := make(chan out, 1)
	go func() {
		runtime.LockOSThread() // never unlocked, see above
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			done <- out{code: -1, err: fmt.Errorf("unshare a mount namespace: %w", err)}
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			done <- out{code: -1, err: fmt.Errorf("make the mount namespace private: %w", err)}
			return
		}
		notes, code, err := fn()
		done <- out{notes, code, err}
	}()
	o := <-done
	return o.notes, o.code, o.err
}
