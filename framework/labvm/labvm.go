// Package labvm runs one command inside a QEMU guest that boots Debian's
// generic kernel (which has the VLAN, bridge, macvlan, veth and dummy drivers
// the host kernel may lack) over the host's root filesystem, shared read-only.
// The command sees the host's binaries, WorkDir read-write at the same path,
// /var writable (a throwaway overlay) and fresh tmpfs on /tmp and /run: the
// host's /tmp is NOT visible, so Command must not live there.
//
// CacheDir holds kernel.json (what is cached), <release>/vmlinux,
// <release>/modules/*.ko, <release>/initramfs-<hash>.cpio,
// accel-<host release> (the KVM probe's verdict) and console.log (the last
// VM's serial console). Host tools: apt packages qemu-system-x86,
// busybox-static and xz-utils (apt-get and dpkg-deb come with Debian).
//
// Environment: LABVM_ACCEL=kvm|tcg skips the KVM probe; LABVM_APPEND adds
// kernel parameters (debugging). Inside the VM, LABVM=1.
package labvm

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Config describes one VM run.
type Config struct {
	CacheDir string   // absolute; holds kernel, modules, initramfs, accel verdict, console.log
	WorkDir  string   // absolute host dir shared read-write at the same path in the VM
	Shares   []string // more absolute host dirs shared read-write at their own paths (e.g. a report dir in /tmp)
	Command  []string // absolute path + args, run in the VM with cwd = WorkDir
	Env      []string // extra KEY=VALUE for the command (LABVM=1 is always set)
	MemoryMB int      // default 1024

	Stdout, Stderr io.Writer // the command's output, streamed while it runs
	Progress       io.Writer // one-line progress messages; may be nil
}

// Inside reports whether this process runs inside the lab VM.
func Inside() bool { return os.Getenv("LABVM") == "1" }

var lastBoot atomic.Int64

// LastBootDuration is the time from QEMU start to the command start in the
// most recent Run (0 if it never got there).
func LastBootDuration() time.Duration { return time.Duration(lastBoot.Load()) }

func progress(cfg Config, format string, args ...any) {
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, format+"\n", args...)
	}
}

// Run boots the VM, runs cfg.Command, streams its output and returns its exit
// code. err is non-nil only when the VM itself failed (it then carries the
// tail of the console log) or ctx was cancelled (QEMU is killed).
func Run(ctx context.Context, cfg Config) (int, error) {
	if len(cfg.Command) == 0 || !filepath.IsAbs(cfg.Command[0]) {
		return -1, fmt.Errorf("labvm: Command must start with an absolute path, got %q", cfg.Command)
	}
	if fi, err := os.Stat(cfg.WorkDir); err != nil || !fi.IsDir() || !filepath.IsAbs(cfg.WorkDir) {
		return -1, fmt.Errorf("labvm: WorkDir %q must be an existing absolute directory", cfg.WorkDir)
	}
	for _, d := range cfg.Shares {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() || !filepath.IsAbs(d) {
			return -1, fmt.Errorf("labvm: share %q must be an existing absolute directory", d)
		}
	}
	if err := need("qemu-system-x86_64", "qemu-system-x86"); err != nil {
		return -1, err
	}
	k, initrd, err := ensure(ctx, cfg)
	if err != nil {
		return -1, err
	}
	accel, err := chooseAccel(ctx, cfg, k, initrd)
	if err != nil {
		return -1, err
	}

	ctl, err := os.MkdirTemp("", "labvm-")
	if err != nil {
		return -1, err
	}
	defer os.RemoveAll(ctl)
	script, err := runScript(cfg)
	if err != nil {
		return -1, err
	}
	for name, data := range map[string]string{
		"config": shareConfig(cfg),
		"run.sh": script, "stdout": "", "stderr": "",
	} {
		if err := os.WriteFile(filepath.Join(ctl, name), []byte(data), 0o644); err != nil {
			return -1, err
		}
	}

	mem := cfg.MemoryMB
	if mem <= 0 {
		mem = 1024
	}
	shares := []string{
		"local,path=/,mount_tag=hostroot,security_model=passthrough,readonly=on,multidevs=remap",
		"local,path=" + qemuEscape(ctl) + ",mount_tag=labctl,security_model=passthrough",
		"local,path=" + qemuEscape(cfg.WorkDir) + ",mount_tag=labwork,security_model=passthrough,multidevs=remap",
	}
	for i, d := range cfg.Shares {
		shares = append(shares, "local,path="+qemuEscape(d)+",mount_tag=labshare"+strconv.Itoa(i)+",security_model=passthrough,multidevs=remap")
	}
	progress(cfg, "labvm: booting (%s)", accel)
	lastBoot.Store(0)
	v, err := startVM(ctx, cfg, k, initrd, accel, mem, "", shares)
	if err != nil {
		return -1, err
	}
	// Output files in the labctl share are written synchronously by the guest
	// (9p, no cache), so tailing them loses nothing, even at power-off.
	// One lock for both, as Stdout and Stderr may be the same writer.
	var wg sync.WaitGroup
	var outMu sync.Mutex
	stop := make(chan struct{})
	for _, s := range []struct {
		name string
		w    io.Writer
	}{{"stdout", cfg.Stdout}, {"stderr", cfg.Stderr}} {
		wg.Add(1)
		go func() { defer wg.Done(); tail(filepath.Join(ctl, s.name), s.w, &outMu, stop) }()
	}

	// Wait for QEMU; if it lingers after the exit code was written, kill it.
	rcFile := filepath.Join(ctl, "rc")
	var rcSeen time.Time
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	marker := v.marker
	booted := func() {
		d := v.markedAt.Sub(v.started)
		lastBoot.Store(int64(d))
		progress(cfg, "labvm: boot %.1fs (%s)", d.Seconds(), accel)
		marker = nil
	}
wait:
	for {
		select {
		case <-marker:
			booted()
		case <-v.exited:
			if marker != nil && !v.markedAt.IsZero() {
				booted() // QEMU ended right after the marker
			}
			break wait
		case <-tick.C:
			if rcSeen.IsZero() {
				if _, err := os.Stat(rcFile); err == nil {
					rcSeen = time.Now()
				}
			} else if time.Since(rcSeen) > 15*time.Second {
				v.cmd.Process.Kill()
			}
		}
	}
	close(stop)
	wg.Wait()

	if ctx.Err() != nil {
		return -1, fmt.Errorf("labvm: %w", ctx.Err())
	}
	b, err := os.ReadFile(rcFile)
	if err == nil {
		if rc, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			return rc, nil
		}
	}
	return -1, fmt.Errorf("labvm: VM ended without the command's exit code (qemu: %v); console tail (%s):\n%s",
		v.err, filepath.Join(cfg.CacheDir, "console.log"), v.consoleTail())
}

// tail copies path to w as it grows until stop is closed, then drains it.
func tail(path string, w io.Writer, mu *sync.Mutex, stop <-chan struct{}) {
	if w == nil {
		w = io.Discard
	}
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	stopped := false
	for {
		n, err := f.Read(buf)
		if n > 0 {
			mu.Lock()
			w.Write(buf[:n])
			mu.Unlock()
			continue
		}
		if err != nil && err != io.EOF || stopped {
			return
		}
		select {
		case <-stop:
			stopped = true // one more pass to EOF
		case <-time.After(50 * time.Millisecond):
		}
	}
}
