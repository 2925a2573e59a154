// Command conformance drives the suite: it validates the flags (exit 2 on
// bad input, before anything is created), checks the kernel, runs the
// compiled suite natively or inside the lab VM, and writes the reports.
//
//	conformance run       [flags] [-- suite/ginkgo flags]   the lab tier, reports/conformance.md
//	conformance selftest  [flags]                           every negative control must make its spec FAIL
//	conformance bench     [flags]                           wall times: lab VM boot, full conformance
//	conformance preflight                                   kernel options the lab needs, and which are missing
//	conformance controls                                    list the negative controls
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/kernel"
	"github.com/cozystack/vlan-conformance/framework/labvm"
	"github.com/cozystack/vlan-conformance/framework/report"
)

type driver struct {
	sub       string
	cfg       *config.Config
	labVM     string // auto, always, never
	suite     string // compiled suite binary
	cacheDir  string
	suiteArgs []string // the config flags as given, for the suite binary
	extra     []string // after "--": passed to the suite verbatim
	rawArgs   []string // everything after the subcommand, for re-running in the VM
}

func main() {
	os.Exit(mainCode())
}

func mainCode() int {
	if len(os.Args) < 2 {
		usage()
		return config.ExitBadInput
	}
	d := &driver{sub: os.Args[1], rawArgs: os.Args[2:]}
	switch d.sub {
	case "controls":
		for _, c := range config.Controls() {
			fmt.Printf("%-34s %-8s %s\n", c.ID, c.Claim, c.Description)
		}
		return 0
	case "run", "selftest", "bench", "preflight":
	default:
		usage()
		return config.ExitBadInput
	}
	if err := d.parse(); err != nil {
		fmt.Fprintf(os.Stderr, "conformance %s: invalid input, nothing was created:\n%v\n", d.sub, err)
		return config.ExitBadInput
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if d.sub == "preflight" {
		return d.preflight()
	}
	// bench stays on the host to time the VM boot; its inner run goes in.
	if d.sub != "bench" {
		if code, handled := d.maybeInVM(ctx); handled {
			return code
		}
	}
	switch d.sub {
	case "run":
		return d.run(ctx)
	case "selftest":
		return d.selftest(ctx)
	default:
		return d.bench(ctx)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: conformance run|selftest|bench|preflight|controls [flags] [-- suite flags]\n  conformance run -h   lists the flags")
}

func (d *driver) parse() error {
	fs := flag.NewFlagSet("conformance "+d.sub, flag.ContinueOnError)
	d.cfg = config.Register(fs)
	fs.StringVar(&d.labVM, "lab-vm", "auto", "run the lab tier in a QEMU VM with a Debian kernel: auto (when the kernel lacks options), always, never")
	fs.StringVar(&d.suite, "suite-binary", "bin/suites.test", "the compiled suite")
	fs.StringVar(&d.cacheDir, "cache-dir", ".cache", "cache for the lab VM's kernel and initramfs")
	args := d.rawArgs
	for i, a := range args {
		if a == "--" {
			d.extra = args[i+1:]
			args = args[:i]
			break
		}
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (suite flags go after --)", fs.Args())
	}
	driverFlags := map[string]bool{"lab-vm": true, "suite-binary": true, "cache-dir": true}
	fs.Visit(func(f *flag.Flag) {
		if !driverFlags[f.Name] {
			d.suiteArgs = append(d.suiteArgs, "--"+f.Name+"="+f.Value.String())
		}
	})
	var errs []error
	switch d.labVM {
	case "auto", "always", "never":
	default:
		errs = append(errs, fmt.Errorf("--lab-vm %q: want auto, always or never", d.labVM))
	}
	if d.sub != "preflight" {
		if _, err := os.Stat(d.suite); err != nil {
			errs = append(errs, fmt.Errorf("--suite-binary %q: %v (build it with `make build`)", d.suite, errors.Unwrap(err)))
		}
	}
	errs = append(errs, d.cfg.Validate())
	return errors.Join(errs...)
}

func (d *driver) preflight() int {
	missing, err := kernel.Missing()
	if err != nil {
		fmt.Fprintln(os.Stderr, "preflight:", err)
		return 1
	}
	fmt.Printf("kernel options the lab needs:\n%s", kernel.Describe(kernel.Options))
	if len(missing) == 0 {
		fmt.Println("all present: the lab runs natively")
		return 0
	}
	fmt.Printf("missing on this kernel:\n%s(make conformance runs the lab in a VM with a Debian kernel)\n", kernel.Describe(missing))
	return 1
}

// maybeInVM re-runs this very command inside the lab VM when the kernel
// lacks what the lab needs, and returns its exit code.
func (d *driver) maybeInVM(ctx context.Context) (int, bool) {
	if d.cfg.Tier != "lab" || labvm.Inside() || d.labVM == "never" {
		if d.labVM == "never" && !labvm.Inside() && d.cfg.Tier == "lab" {
			if missing, err := kernel.Missing(); err == nil && len(missing) > 0 {
				fmt.Fprintf(os.Stderr, "%v:\n%s", kernel.ErrMissing, kernel.Describe(missing))
				return 1, true
			}
		}
		return 0, false
	}
	if d.labVM == "auto" {
		missing, err := kernel.Missing()
		if err != nil {
			fmt.Fprintln(os.Stderr, "preflight:", err)
			return 1, true
		}
		if len(missing) == 0 {
			return 0, false
		}
		fmt.Fprintf(os.Stderr, "preflight: this kernel lacks\n%srunning the lab tier in the lab VM\n", kernel.Describe(missing))
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1, true
	}
	wd, _ := os.Getwd()
	cache, _ := filepath.Abs(filepath.Join(d.cacheDir, "labvm"))
	cmd := append([]string{self, d.sub}, d.rawArgs...)
	// --lab-vm=never goes before any "--" so the inner driver does not recurse.
	cmd = insertBeforeDashDash(cmd, "--lab-vm=never")
	code, err := labvm.Run(ctx, labvm.Config{
		CacheDir: cache, WorkDir: wd, Command: cmd,
		Env:    []string{"CI=" + os.Getenv("CI")},
		Stdout: os.Stdout, Stderr: os.Stderr, Progress: os.Stderr,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "lab VM:", err)
		return 1, true
	}
	return code, true
}

func insertBeforeDashDash(args []string, flag string) []string {
	for i, a := range args {
		if a == "--" {
			out := append([]string{}, args[:i]...)
			out = append(out, flag)
			return append(out, args[i:]...)
		}
	}
	return append(args, flag)
}

// runSuite runs the compiled suite with args and returns its exit code. On
// Ctrl-C the suite gets SIGINT (Ginkgo then runs its cleanup); afterwards
// anything with the suite's prefix is swept regardless.
func (d *driver) runSuite(ctx context.Context, args []string) int {
	return d.runSuiteTo(ctx, args, os.Stdout)
}

func (d *driver) runSuiteTo(ctx context.Context, args []string, out io.Writer) int {
	before, err := fabric.HostSnapshot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "host snapshot:", err)
		return 1
	}
	code := d.execSuite(ctx, args, out)
	after, err := fabric.HostSnapshot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "host snapshot:", err)
		return max(code, 1)
	}
	// Never touch the host's own interfaces, addresses or routes: prove it.
	if diff := fabric.DiffSnapshots(before, after); diff != "" {
		fmt.Fprintf(os.Stderr, "the run changed this namespace's links, addresses or routes:\n%s\n", diff)
		return max(code, 1)
	}
	return code
}

func (d *driver) execSuite(ctx context.Context, args []string, out io.Writer) int {
	cmd := exec.CommandContext(ctx, d.suite, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	err := cmd.Run()
	if serr := fabric.Sweep(); serr != nil {
		fmt.Fprintln(os.Stderr, "sweep:", serr)
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	default:
		fmt.Fprintln(os.Stderr, "suite:", err)
		return 1
	}
}

func (d *driver) run(ctx context.Context) int {
	junit := filepath.Join(d.cfg.ReportDir, "junit.xml")
	if err := os.MkdirAll(d.cfg.ReportDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	os.RemoveAll(filepath.Join(d.cfg.ReportDir, "artifacts"))
	args := append(append([]string{}, d.suiteArgs...), "--ginkgo.junit-report="+junit)
	args = append(args, d.extra...)
	code := d.runSuite(ctx, args)
	cases, err := report.ReadJUnit(junit)
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		return max(code, 1)
	}
	out := filepath.Join(d.cfg.ReportDir, "conformance.md")
	if err := report.WriteConformance(out, d.environment(), report.Verdicts(cases, d.cfg.ReportDir)); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		return max(code, 1)
	}
	fmt.Printf("report: %s, %s\n", out, junit)
	return code
}

func (d *driver) environment() report.Environment {
	env := report.Environment{Tier: d.cfg.Tier, Control: d.cfg.Control, Where: "natively"}
	if labvm.Inside() {
		env.Where = "in the lab VM (QEMU, Debian kernel)"
	}
	var u syscall.Utsname
	if syscall.Uname(&u) == nil {
		env.Kernel = utsString(u.Release[:])
	}
	out, _ := exec.Command(filepath.Join(d.cfg.PluginDir, "bridge")).CombinedOutput()
	env.Plugins = strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0] + " (" + d.cfg.PluginDir + ")"
	return env
}

func utsString(b []int8) string {
	var s strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		s.WriteByte(byte(c))
	}
	return s.String()
}
