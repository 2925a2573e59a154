package stager

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

// delNetConf is what the executing plugin is handed once staging is over:
// the guide's NAD, for a CNI DEL.
const delNetConf = `{"cniVersion":"0.3.1","name":"vlan100","type":"bridge","bridge":"br100","ipam":{}}`

// Executing is a plugin from the node's directory caught in the middle of a
// CNI DEL: it has started and waits for its network configuration on
// stdin, as a plugin does while the runtime writes it. It runs in a network
// namespace of its own, so it can touch nothing of the host.
type Executing struct {
	Path   string
	Hash   string // of the file it was started from
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	output bytes.Buffer
	done   chan struct{}
	err    error // from Wait, once done is closed
}

// StartExecuting starts the node's copy of plugin. Once it returns, the
// binary is executing: writing over its file fails with "Text file busy".
func StartExecuting(n *FakeNode, plugin string) (*Executing, error) {
	p := filepath.Join(n.Dir, plugin)
	h, err := hashFile(p)
	if err != nil {
		return nil, err
	}
	e := &Executing{Path: p, Hash: h, done: make(chan struct{})}
	e.cmd = exec.Command(p)
	e.cmd.Env = []string{
		"CNI_COMMAND=DEL", "CNI_CONTAINERID=stager-executing", "CNI_IFNAME=net1",
		"CNI_PATH=" + n.Dir, "PATH=" + containerPath,
	}
	e.cmd.Stdout = &e.output
	e.cmd.Stderr = &e.output
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	if e.stdin, err = e.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	// Pdeathsig fires when the thread that forked the plugin exits, not the
	// process: fork from a thread locked for the plugin's lifetime, so the
	// plugin dies with the suite but not with some other goroutine's thread.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := e.cmd.Start(); err != nil {
			started <- err
			close(e.done)
			return
		}
		started <- nil
		e.err = e.cmd.Wait()
		close(e.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start %s: %w", p, err)
	}
	return e, nil
}

// Running reports whether the process has not exited.
func (e *Executing) Running() bool {
	select {
	case <-e.done:
		return false
	default:
		return true
	}
}

// Pid is the process id.
func (e *Executing) Pid() int { return e.cmd.Process.Pid }

// ExeHash hashes what the running process executes (/proc/PID/exe), which
// stays the inode it was started from whatever happens to the name.
func (e *Executing) ExeHash() (string, error) {
	if !e.Running() {
		return "", errors.New("the plugin is no longer running")
	}
	return hashFile("/proc/" + strconv.Itoa(e.Pid()) + "/exe")
}

// ExeLink is /proc/PID/exe's target; " (deleted)" ends it once the name
// was replaced.
func (e *Executing) ExeLink() (string, error) {
	return os.Readlink("/proc/" + strconv.Itoa(e.Pid()) + "/exe")
}

// Finish hands the plugin its configuration and waits for it to exit. It
// returns the exit code and what it printed.
func (e *Executing) Finish(timeout time.Duration) (int, string, error) {
	if _, err := io.WriteString(e.stdin, delNetConf); err != nil {
		return -1, e.output.String(), fmt.Errorf("write the network configuration: %w", err)
	}
	if err := e.stdin.Close(); err != nil {
		return -1, "", err
	}
	select {
	case <-e.done:
	case <-time.After(timeout):
		return -1, "", fmt.Errorf("the plugin did not finish its DEL within %s", timeout)
	}
	ws := e.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return 128 + int(ws.Signal()), e.output.String(), nil
	}
	return ws.ExitStatus(), e.output.String(), nil
}

// Stop kills the plugin if it still runs (for cleanup on every path).
func (e *Executing) Stop() error {
	if !e.Running() {
		return nil
	}
	_ = e.stdin.Close()
	if err := e.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	<-e.done
	return nil
}
