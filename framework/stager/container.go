package stager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// containerPath is the PATH of a typical image (the multus image's included).
const containerPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// runContained builds the subject's root at root (see the package
// diagram), runs it there and waits for it. It runs on the private thread.
func (h *Harness) runContained(ctx context.Context, n *FakeNode, root, termLog string, log *lineClock, it *interrupt) (notes []string, code int, err error) {
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
	if err := h.buildDev(in("dev")); err != nil {
		return nil, code, err
	}
	if err := unix.Mount("proc", in("proc"), "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return nil, code, fmt.Errorf("mount proc: %w", err)
	}

	// The termination message file, where the manifest says.
	tm := in(h.InitContainer.TerminationMessagePath())
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
	for _, m := range h.InitContainer.Container.VolumeMounts {
		target := in(m.MountPath)
		if err := os.MkdirAll(target, 0o755); err != nil {
			return notes, code, err
		}
		v := h.InitContainer.Volumes[m.Name]
		if v.HostPath != nil && strings.TrimRight(v.HostPath.Path, "/") == NodeCNIBinDir {
			if err := bindMount(n.Dir, target, m.ReadOnly); err != nil {
				return notes, code, err
			}
			continue
		}
		notes = append(notes, fmt.Sprintf("volume %s at %s is not provided (an empty directory stands in)", m.Name, m.MountPath))
	}
	if h.Security.ReadOnlyRoot {
		if err := unix.Mount("", root, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
			return notes, code, fmt.Errorf("make the root read-only: %w", err)
		}
	}

	env := []string{"PATH=" + containerPath, "HOME=/root", "HOSTNAME=stager-lab-node"}
	for _, e := range h.InitContainer.Container.Env {
		if e.ValueFrom != nil {
			notes = append(notes, fmt.Sprintf("env %s comes from valueFrom and is left unset", e.Name))
			continue
		}
		env = append(env, e.Name+"="+e.Value)
	}
	wd := h.InitContainer.Container.WorkingDir
	if wd == "" {
		wd = "/"
	}
	cmd := exec.CommandContext(ctx, "/usr/bin/setpriv", h.Security.setprivArgs(h.InitContainer.Argv())...)
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
		return notes, code, fmt.Errorf("start %s: %w", strings.Join(h.InitContainer.Argv(), " "), err)
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
func (h *Harness) buildDev(dev string) error {
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
