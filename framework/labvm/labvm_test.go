package labvm

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cozystack/vlan-conformance/framework/config"
)

// syncBuf is an io.Writer safe for concurrent use that can signal when its
// content first contains a string.
type syncBuf struct {
	mu     sync.Mutex
	b      bytes.Buffer
	want   string
	gotcha chan struct{}
}

func newSyncBuf(want string) *syncBuf { return &syncBuf{want: want, gotcha: make(chan struct{})} }

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	had := s.want != "" && strings.Contains(s.b.String(), s.want)
	s.b.Write(p)
	if s.want != "" && !had && strings.Contains(s.b.String(), s.want) {
		close(s.gotcha)
	}
	return len(p), nil
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// vmConfig skips unless a VM can boot here, and shares the suite's build
// cache (config.CacheRoot) so the kernel is fetched once.
func vmConfig(t *testing.T) Config {
	t.Helper()
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("qemu-system-x86_64 not installed (apt-get install qemu-system-x86)")
	}
	if os.Geteuid() != 0 {
		t.Skip("the lab VM needs root (9p passthrough of the host root)")
	}
	return Config{CacheDir: filepath.Join(config.CacheRoot(), "labvm"), WorkDir: t.TempDir()}
}

func TestRunVLANInVM(t *testing.T) {
	cfg := vmConfig(t)
	stdout, stderr, prog := newSyncBuf(""), newSyncBuf(""), newSyncBuf("")
	cfg.Stdout, cfg.Stderr, cfg.Progress = stdout, stderr, prog
	// A second share outside WorkDir, as --report-dir=/tmp/x makes.
	cfg.Shares = []string{t.TempDir()}
	cfg.Env = []string{"WORKDIR_FILE=" + filepath.Join(cfg.WorkDir, "result"), "SHARE_FILE=" + filepath.Join(cfg.Shares[0], "result")}
	cfg.Command = []string{"/bin/sh", "-c", `echo out; echo err >&2
		[ "$LABVM" = 1 ] && [ "$(pwd)" = "` + cfg.WorkDir + `" ] || exit 10
		ip link add v0 type veth peer name v1 &&
		ip link add link v0 name v0.100 type vlan id 100 &&
		ip link add d0 type dummy &&
		ip link add br0 type bridge &&
		ip link add link v1 name mv0 type macvlan &&
		ip netns add ns1 && ip link set v1 netns ns1 &&
		echo ok > "$WORKDIR_FILE" && echo shared > "$SHARE_FILE"
		exit 3`}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	rc, err := Run(ctx, cfg)
	t.Logf("progress:\n%s", prog)
	if err != nil {
		t.Fatalf("Run: %v\nstderr: %s", err, stderr)
	}
	if rc != 3 {
		t.Errorf("exit code %d, want 3; stdout %q stderr %q", rc, stdout, stderr)
	}
	if stdout.String() != "out\n" {
		t.Errorf("stdout %q, want %q (console noise must stay out)", stdout, "out\n")
	}
	if !strings.Contains(stderr.String(), "err") {
		t.Errorf("stderr %q lacks err", stderr)
	}
	if b, err := os.ReadFile(filepath.Join(cfg.WorkDir, "result")); err != nil || string(b) != "ok\n" {
		t.Errorf("file written in the VM: %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(cfg.Shares[0], "result")); err != nil || string(b) != "shared\n" {
		t.Errorf("file written in the VM to a share outside WorkDir: %q, %v", b, err)
	}
	if !strings.Contains(prog.String(), "labvm: boot ") || LastBootDuration() <= 0 {
		t.Errorf("no boot time reported: progress %q, LastBootDuration %v", prog, LastBootDuration())
	}
	t.Logf("boot to command start: %v", LastBootDuration())
}

// Output must stream while the command runs, and cancelling ctx must kill the
// VM promptly.
func TestRunStreamsAndCancels(t *testing.T) {
	cfg := vmConfig(t)
	stdout := newSyncBuf("started")
	cfg.Stdout, cfg.Stderr = stdout, newSyncBuf("")
	cfg.Command = []string{"/bin/sh", "-c", "echo started; exec sleep 600"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stdout.gotcha:
		case <-time.After(3 * time.Minute):
		}
		cancel()
	}()
	start := time.Now()
	_, err := Run(ctx, cfg)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run after cancel: err %v, want context.Canceled; stdout %q", err, stdout)
	}
	if d := time.Since(start); d > 2*time.Minute {
		t.Errorf("Run took %v: output did not stream or cancel was slow", d)
	}
}

// The KVM probe, with fake QEMUs: one that hangs (the nested-KVM failure) and
// one that reaches init. No real VM is booted.
func TestAccelProbe(t *testing.T) {
	t.Setenv("LABVM_ACCEL", "")
	bin, cache := t.TempDir(), t.TempDir()
	kvm := filepath.Join(t.TempDir(), "kvm")
	if err := os.WriteFile(kvm, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	oldDev, oldTimeout := kvmDevice, probeTimeout
	kvmDevice, probeTimeout = kvm, 2*time.Second
	defer func() { kvmDevice, probeTimeout = oldDev, oldTimeout }()
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	cfg := Config{CacheDir: cache}

	for _, c := range []struct{ script, want string }{
		{"exec sleep 600", "tcg"},
		{"echo '" + markerProbe + "'; exec sleep 600", "kvm"},
	} {
		qemu := filepath.Join(bin, "qemu-system-x86_64")
		if err := os.WriteFile(qemu, []byte("#!/bin/sh\n"+c.script+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		matches, _ := filepath.Glob(filepath.Join(cache, "accel-*"))
		for _, m := range matches {
			os.Remove(m)
		}
		got, err := chooseAccel(context.Background(), cfg, KernelInfo{}, "")
		if err != nil || got != c.want {
			t.Fatalf("probe with %q: %q, %v; want %q", c.script, got, err, c.want)
		}
		// The verdict is cached: a broken QEMU is not run again.
		os.WriteFile(qemu, []byte("#!/bin/sh\nexit 1\n"), 0o755)
		if got, err := chooseAccel(context.Background(), cfg, KernelInfo{}, ""); err != nil || got != c.want {
			t.Fatalf("cached verdict: %q, %v; want %q", got, err, c.want)
		}
	}
	t.Setenv("LABVM_ACCEL", "tcg")
	if got, _ := chooseAccel(context.Background(), cfg, KernelInfo{}, ""); got != "tcg" {
		t.Errorf("LABVM_ACCEL=tcg gave %q", got)
	}
}

func TestRunScriptQuoting(t *testing.T) {
	s, err := runScript(Config{WorkDir: "/w d", Command: []string{"/bin/echo", "it's", "$HOME"}, Env: []string{"A=b c"}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("/bin/sh", "-c", strings.Replace(s, "cd '/w d' || exit 126\n", "", 1)).Output()
	if err != nil || string(out) != "it's $HOME\n" {
		t.Errorf("script output %q, %v\n%s", out, err, s)
	}
	if !strings.Contains(s, "export LABVM='1'\n") {
		t.Errorf("LABVM=1 missing:\n%s", s)
	}
	if _, err := runScript(Config{Command: []string{"/x"}, Env: []string{"no-equals"}}); err == nil {
		t.Error("bad Env entry accepted")
	}
}
