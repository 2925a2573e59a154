package labvm

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// vm is a running QEMU whose serial console goes to CacheDir/console.log.
type vm struct {
	cmd      *exec.Cmd
	started  time.Time
	marker   chan struct{} // closed when the console shows the marker line
	markedAt time.Time
	exited   chan struct{} // closed after QEMU exited and the console was read
	err      error         // QEMU's exit status

	mu   sync.Mutex
	last []string // console tail
}

func (v *vm) consoleTail() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return strings.Join(v.last, "\n")
}

// startVM starts QEMU. extraAppend is added to the kernel command line; the
// marker awaited is markerProbe when extraAppend asks for a probe.
func startVM(ctx context.Context, cfg Config, k KernelInfo, initrd, accel string, mem int, extraAppend string, shares []string) (*vm, error) {
	cpu := "max"
	if accel == "kvm" {
		cpu = "host"
	}
	// LABVM_APPEND adds kernel parameters when debugging (e.g. "loglevel=7").
	appendLine := strings.TrimSpace("console=ttyS0 quiet panic=-1 rdinit=/init acpi=noirq cryptomgr.notests " + extraAppend + " " + os.Getenv("LABVM_APPEND"))
	args := []string{
		"-accel", accel, "-cpu", cpu, "-m", strconv.Itoa(mem), "-smp", "1",
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-serial", "stdio",
		"-kernel", k.Vmlinux, "-initrd", initrd, "-append", appendLine,
	}
	for _, s := range shares {
		args = append(args, "-virtfs", s)
	}
	marker := markerStart
	if extraAppend != "" {
		marker = markerProbe
	}

	// Written under a unique name and renamed to console.log at the end, so
	// that concurrent VMs do not interleave their logs.
	logf, err := os.CreateTemp(cfg.CacheDir, "console-*.log")
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		logf.Close()
		os.Remove(logf.Name())
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "qemu-system-x86_64", args...)
	cmd.Stdout, cmd.Stderr = w, w // console and QEMU's own errors
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	v := &vm{cmd: cmd, marker: make(chan struct{}), exited: make(chan struct{})}
	v.started = time.Now()
	err = cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		logf.Close()
		os.Remove(logf.Name())
		return nil, fmt.Errorf("labvm: start qemu: %w", err)
	}

	consoleDone := make(chan struct{})
	go func() {
		defer close(consoleDone)
		defer os.Rename(logf.Name(), filepath.Join(cfg.CacheDir, "console.log"))
		defer logf.Close()
		defer r.Close()
		br := bufio.NewReader(r)
		for {
			line, err := br.ReadString('\n')
			logf.WriteString(line)
			if l := strings.TrimRight(line, "\r\n"); l != "" {
				if strings.Contains(l, marker) && v.markedAt.IsZero() {
					v.markedAt = time.Now()
					close(v.marker)
				}
				v.mu.Lock()
				if v.last = append(v.last, l); len(v.last) > 40 {
					v.last = v.last[1:]
				}
				v.mu.Unlock()
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		v.err = cmd.Wait()
		<-consoleDone
		close(v.exited)
	}()
	return v, nil
}

// qemuEscape escapes commas, QEMU's option separator.
func qemuEscape(s string) string { return strings.ReplaceAll(s, ",", ",,") }
