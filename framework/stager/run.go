package stager

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Result is what one run of the subject did and said.
type Result struct {
	Scenario Scenario
	ExitCode int
	// Log is stdout and stderr as one stream, in the order written, as
	// `kubectl logs` shows them (both are the same pipe).
	Log string
	// LogTimes holds when each line of the log arrived (as LogLines).
	LogTimes []time.Time
	// Image says what the image carried at /cni-plugins.
	Image string
	// TerminationMessage is what the kubelet would report: the file at
	// terminationMessagePath, or with FallbackToLogsOnError and a non-zero
	// exit, the log's tail.
	TerminationMessage string
	Before, After      Snapshot
	// Changes covers every name present before or after, sorted.
	Changes  []Change
	Duration time.Duration
	Security Security
	Notes    []string // what the run could not provide as a kubelet would
	// Killed: the lab killed the run (StageKilled) before it ended.
	Killed bool
}

// Change returns the change of name (Verdict Absent when it never existed).
func (r Result) Change(name string) Change {
	for _, c := range r.Changes {
		if c.Name == name {
			return c
		}
	}
	return Change{Name: name, Verdict: Absent}
}

// LogLines splits the log into lines without their newline.
func (r Result) LogLines() []string {
	s := strings.TrimRight(r.Log, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// stageTimeout bounds one run; staging 14 plugins takes well under a second.
const stageTimeout = 2 * time.Minute

// containerPath is the PATH of a typical image (the multus image's included).
const containerPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Stage runs the subject once against the node: it snapshots the node
// directory, runs the init container's command as written in a root of its
// own, and snapshots again. An error means the run could not be made; what
// the subject itself did (exit code, log, files) is in the Result.
func (l *Lab) Stage(ctx context.Context, n *Node) (Result, error) {
	return l.stage(ctx, n, nil)
}

func (l *Lab) stage(ctx context.Context, n *Node, it *interrupt) (Result, error) {
	res := Result{Scenario: n.Scenario, Security: l.Security, Notes: append([]string{}, l.Security.Notes...), Image: n.imageSummary}
	before, err := l.cat.take(n.Dir)
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
		return l.runContained(ctx, n, filepath.Join(run, "root"), termLog, log, it)
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
	res.TerminationMessage = kubeletTerminationMessage(string(msg), l.Subject.Container.TerminationMessagePolicy, res.ExitCode, res.Log)

	if res.After, err = l.cat.take(n.Dir); err != nil {
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

// runContained builds the subject's root at root (see the package
// diagram), runs it there and waits for it. It runs on the private thread.
func (l *Lab) runContained(ctx context.Context, n *Node, root, termLog string, log *lineClock, it *interrupt) (notes []string, code int, err error) {
	code = -1
	if err := unix.Mount("stager-cni-root", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=64m"); err != nil {
		return nil, code, fmt.Errorf("mount the root tmpfs: %w", err)
	}
	defer func() {
		if uerr := unix.Unmount(root, unix.MNT_DETACH); uerr != nil && err == nil {
			err = fmt.Errorf("unmount the root: %w", uerr)
		}
	}()
	in := func(p string) string { return filepath.Join(root, p) }

	for _, d := range []string{"usr", "etc", "dev", "proc", "tmp", "root", "run", "var", "var/tmp"} {
		if err := os.MkdirAll(in(d), 0o755); err != nil {
			return nil, code, err
		}
	}
	if err := os.Chmod(in("tmp"), 0o777|os.ModeSticky); err != nil {
		return nil, code, err
	}
	for _, d := range []string{"/usr", "/etc"} {
		if err := bindMount(d, in(d), true); err != nil {
			return nil, code, err
		}
	}
	// usrmerge: /bin, /sbin, /lib* are symlinks into /usr on the host
	// (Debian 12, as in most images); bind them where they are not.
	for _, d := range []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"} {
		fi, err := os.Lstat("/" + d)
		switch {
		case errors.Is(err, os.ErrNotExist):
			continue
		case err != nil:
			return nil, code, err
		case fi.Mode()&os.ModeSymlink != 0:
			t, err := os.Readlink("/" + d)
			if err != nil {
				return nil, code, err
			}
			if err := os.Symlink(t, in(d)); err != nil {
				return nil, code, err
			}
		default:
			if err := os.Mkdir(in(d), 0o755); err != nil {
				return nil, code, err
			}
			if err := bindMount("/"+d, in(d), true); err != nil {
				return nil, code, err
			}
		}
	}
	if err := l.buildDev(in("dev")); err != nil {
		return nil, code, err
	}
	if err := unix.Mount("proc", in("proc"), "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return nil, code, fmt.Errorf("mount proc: %w", err)
	}

	// The termination message file, where the manifest says.
	tm := in(l.Subject.TerminationMessagePath())
	if err := touch(tm); err != nil {
		return nil, code, err
	}
	if err := bindMount(termLog, tm, false); err != nil {
		return nil, code, err
	}

	// The image's plugins.
	if src := filepath.Join(n.imageDir, "cni-plugins"); exists(src) {
		if err := os.Mkdir(in("cni-plugins"), 0o755); err != nil {
			return nil, code, err
		}
		if err := bindMount(src, in("cni-plugins"), false); err != nil {
			return nil, code, err
		}
	}

	// Volumes: the node's /opt/cni/bin where the manifest mounts it.
	for _, m := range l.Subject.Container.VolumeMounts {
		target := in(m.MountPath)
		if err := os.MkdirAll(target, 0o755); err != nil {
			return notes, code, err
		}
		v := l.Subject.Volumes[m.Name]
		if v.HostPath != nil && strings.TrimRight(v.HostPath.Path, "/") == NodeCNIBinDir {
			if err := bindMount(n.Dir, target, m.ReadOnly); err != nil {
				return notes, code, err
			}
			continue
		}
		notes = append(notes, fmt.Sprintf("volume %s at %s is not provided (an empty directory stands in)", m.Name, m.MountPath))
	}
	if l.Security.ReadOnlyRoot {
		if err := unix.Mount("", root, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
			return notes, code, fmt.Errorf("make the root read-only: %w", err)
		}
	}

	env := []string{"PATH=" + containerPath, "HOME=/root", "HOSTNAME=stager-lab-node"}
	for _, e := range l.Subject.Container.Env {
		if e.ValueFrom != nil {
			notes = append(notes, fmt.Sprintf("env %s comes from valueFrom and is left unset", e.Name))
			continue
		}
		env = append(env, e.Name+"="+e.Value)
	}
	wd := l.Subject.Container.WorkingDir
	if wd == "" {
		wd = "/"
	}
	cmd := exec.CommandContext(ctx, "/usr/bin/setpriv", l.Security.setprivArgs(l.Subject.Argv())...)
	cmd.Path = "/usr/bin/setpriv" // resolved inside the root, where /usr is the host's
	cmd.Env = env
	cmd.Dir = wd
	cmd.Stdin = nil
	cmd.Stdout = log
	cmd.Stderr = log // the same writer: one pipe, so the order is kept
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Chroot:    root,
		Setpgid:   true,
		Pdeathsig: syscall.SIGKILL,
	}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return notes, code, fmt.Errorf("start %s: %w", strings.Join(l.Subject.Argv(), " "), err)
	}
	if it != nil {
		it.watch(cmd.Process.Pid)
	}
	_ = cmd.Wait() // the outcome is in ProcessState
	if it != nil {
		it.exited()
	}
	if ctx.Err() != nil {
		return notes, code, fmt.Errorf("%s did not finish within %s: %w", InitContainerName, stageTimeout, ctx.Err())
	}
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case ws.Exited():
		code = ws.ExitStatus()
	case ws.Signaled():
		code = 128 + int(ws.Signal())
	}
	return notes, code, nil
}

// buildDev fills the root's /dev as a container runtime does.
func (l *Lab) buildDev(dev string) error {
	if err := unix.Mount("stager-cni-dev", dev, "tmpfs", unix.MS_NOSUID, "mode=0755,size=64k"); err != nil {
		return fmt.Errorf("mount /dev: %w", err)
	}
	for _, d := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		if err := touch(filepath.Join(dev, d)); err != nil {
			return err
		}
		if err := bindMount("/dev/"+d, filepath.Join(dev, d), false); err != nil {
			return err
		}
	}
	for name, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(target, filepath.Join(dev, name)); err != nil {
			return err
		}
	}
	return nil
}

func bindMount(src, dst string, readOnly bool) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s at %s: %w", src, dst, err)
	}
	if !readOnly {
		return nil
	}
	if err := unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("make %s read-only: %w", dst, err)
	}
	return nil
}

func touch(p string) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

func exists(p string) bool { _, err := os.Lstat(p); return err == nil }

// lineClock collects the log and notes when each line arrives, so the
// specs can tell a line written while staging went on from one written at
// the end.
type lineClock struct {
	buf   bytes.Buffer
	times []time.Time
}

func (c *lineClock) Write(p []byte) (int, error) {
	now := time.Now()
	for _, b := range p {
		if b == '\n' {
			c.times = append(c.times, now)
		}
	}
	return c.buf.Write(p)
}

func (c *lineClock) done() (string, []time.Time) {
	s := c.buf.String()
	if s != "" && !strings.HasSuffix(s, "\n") {
		c.times = append(c.times, time.Now())
	}
	return s, c.times
}

// kubeletTerminationMessage mirrors the kubelet: the file's content (at most
// 4096 bytes); with FallbackToLogsOnError, an empty file and a failed
// container, the last 80 lines of the log (at most 2048 bytes).
func kubeletTerminationMessage(file, policy string, exitCode int, log string) string {
	if len(file) > 4096 {
		file = file[:4096]
	}
	if file != "" || policy != "FallbackToLogsOnError" || exitCode == 0 {
		return file
	}
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	if len(lines) > 80 {
		lines = lines[len(lines)-80:]
	}
	tail := strings.Join(lines, "\n")
	if len(tail) > 2048 {
		tail = tail[len(tail)-2048:]
	}
	return tail
}
