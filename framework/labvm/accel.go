package labvm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Variables so that tests can fake a KVM host.
var (
	kvmDevice    = "/dev/kvm"
	probeTimeout = 20 * time.Second
)

// chooseAccel returns "kvm" when KVM really works, else "tcg". The verdict of
// the boot probe is cached per host kernel release; LABVM_ACCEL overrides.
func chooseAccel(ctx context.Context, cfg Config, k KernelInfo, initrd string) (string, error) {
	switch a := os.Getenv("LABVM_ACCEL"); a {
	case "kvm", "tcg":
		return a, nil
	case "":
	default:
		return "", fmt.Errorf("labvm: LABVM_ACCEL=%q, want kvm or tcg", a)
	}
	f, err := os.OpenFile(kvmDevice, os.O_RDWR, 0)
	if err != nil {
		return "tcg", nil
	}
	f.Close()
	hostRel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	cache := filepath.Join(cfg.CacheDir, "accel-"+strings.TrimSpace(string(hostRel)))
	if b, err := os.ReadFile(cache); err == nil {
		if a := strings.TrimSpace(string(b)); a == "kvm" || a == "tcg" {
			return a, nil
		}
	}
	progress(cfg, "labvm: probing KVM (once per host kernel)")
	verdict, err := probeKVM(ctx, cfg, k, initrd)
	if err != nil {
		return "", err
	}
	progress(cfg, "labvm: KVM probe says %s", verdict)
	return verdict, writeAtomic(cache, []byte(verdict+"\n"), 0o644)
}

// probeKVM boots a KVM guest that only prints a marker: a KVM that hangs at the
// first guest instructions (seen on nested hosts) never gets there.
func probeKVM(ctx context.Context, cfg Config, k KernelInfo, initrd string) (string, error) {
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	v, err := startVM(pctx, cfg, k, initrd, "kvm", 256, "labvm.probe", nil)
	if err != nil {
		return "", err
	}
	verdict := "tcg"
	select {
	case <-v.marker:
		verdict = "kvm"
	case <-v.exited:
	case <-pctx.Done():
	}
	cancel()
	<-v.exited
	if ctx.Err() != nil {
		return "", fmt.Errorf("labvm: %w", ctx.Err())
	}
	return verdict, nil
}
