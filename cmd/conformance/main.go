// Command conformance drives the suite: it validates the flags (exit 2 on
// bad input, before anything is created), checks the kernel, runs the
// compiled suite natively or inside the lab VM, and writes the reports.
//
//	conformance run       [flags] [-- suite/ginkgo flags]   the lab tier, reports/conformance.md
//	conformance selftest  [flags]                           every negative control must make its spec FAIL
//	conformance bench     [flags]                           wall times: lab VM boot, full conformance; with --tier=cluster the cluster milestones and peak memory
//	conformance soak      --runs=N [flags] [-- suite flags] N runs in a row: each spec's pass count and wall time
//	conformance preflight                                   kernel options the lab needs, and which are missing
//	conformance controls                                    list the negative controls
//	conformance node      wait | observe WHAT               the node agent's side, in its pod on a node
//	conformance certify   --kubeconfig=K --image=IMG        the run inside the cluster, its results copied out
//	conformance job       [--hold=DUR] [--inputs=TGZ] -- run flags  the image's default: the run in the pod, then its tarball and done
//	conformance results                                     the tarball on stdout, in certify's Job's pod
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
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/controls"
	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/kernel"
	"github.com/cozystack/vlan-conformance/framework/labvm"
	"github.com/cozystack/vlan-conformance/framework/subject"
)

type driver struct {
	sub       string
	cfg       *config.Config
	subj      *subject.Subject // the release --cozystack names, opened once the flags are valid; nil without
	labVM     string           // auto, always, never
	suite     string           // compiled suite binary
	cacheDir  string
	suiteArgs []string // the config flags as given, for the suite binary
	extra     []string // after "--": passed to the suite verbatim
	rawArgs   []string // everything after the subcommand, for re-running in the VM
	part      string   // which specs/controls this process runs: all, native, labvm
	runs      int      // soak: how many runs in a row
	inVM      bool     // the lab part must run in the lab VM (decided once)
	only      string   // selftest: the controls to run, by ID or claim ("" = all)
	// afterwards: how a cluster selftest shows its controls' claims pass
	// again: run (a run of them after the controls) or later (the next run
	// on the cluster does, judged by `conformance afterwards`).
	afterwards string
	// timeBudget: a cluster selftest starts no control past it (0: none);
	// outOfTime are the controls it left for that.
	timeBudget time.Duration
	outOfTime  []string
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
	case "verdicts":
		return verdicts(os.Stdout, os.Args[2:])
	case "summary":
		return summary(os.Stdout, os.Args[2:])
	case "afterwards":
		return afterwards(os.Stdout, os.Args[2:])
	case "node":
		return node(os.Stdin, os.Stdout, os.Stderr, os.Args[2:])
	case "certify":
		return certifyCommand(os.Stdout, os.Stderr, os.Args[2:])
	case "job":
		return job(os.Stdout, os.Stderr, os.Args[2:])
	case "results":
		return results(resultsDir(), os.Stdout, os.Stderr)
	case "controls":
		for _, c := range controls.All() {
			tier := c.TierName()
			switch {
			case c.OnVMs && c.Tier == "":
				tier += "+vm" // also a cluster control on VMs (--workload=vm)
			case c.OnVMs:
				tier += "/vm" // a cluster control on VMs only
			}
			fmt.Printf("%-38s %-8s %-10s %s\n", c.ID, c.Claim, tier, c.Description)
		}
		return 0
	case "run", "selftest", "bench", "soak", "preflight", "kind-up", "kind-down":
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

	if d.sub != "preflight" && !d.cfg.Cluster.DryRun {
		// One run at a time on this machine (fabric.LockFile says why); a
		// dry run only prints, and touches nothing.
		lock, err := fabric.Exclusive(os.Stderr)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer lock.Close()
	}
	if code, handled := d.clusterCommand(ctx); handled {
		return code
	}
	if d.sub == "preflight" {
		return d.preflight()
	}
	if d.sub != "bench" && d.sub != "soak" {
		code, ok := d.decideVM()
		if !ok {
			return code
		}
	}
	switch d.sub {
	case "run":
		return d.run(ctx)
	case "selftest":
		return d.selftest(ctx)
	case "soak":
		return d.soak(ctx)
	default:
		return d.bench(ctx)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: conformance run|selftest|bench|soak|preflight|kind-up|kind-down [flags] [-- suite flags]\n       conformance controls\n       conformance verdicts WORKLOAD=JUNIT... (WORKLOAD: vm, pod, lab)\n       conformance summary LABEL JUNIT   a lane's counts and its report's failures\n       conformance afterwards SELFTEST_DIR JUNIT   the cluster controls' claims judged by a run after them (selftest --afterwards=later)\n       conformance node wait|observe WHAT   the node agent, in its pod on a node\n       conformance certify --kubeconfig=K --image=IMG [--print-manifests] [-- run flags]   the run inside the cluster, results in reports/certify\n  conformance run -h   lists the flags")
}

func (d *driver) parse() error {
	fs := flag.NewFlagSet("conformance "+d.sub, flag.ContinueOnError)
	d.cfg = config.Register(fs)
	fs.StringVar(&d.labVM, "lab-vm", "auto", "run the lab tier in a QEMU VM with a Debian kernel: auto (when the kernel lacks options), always, never")
	fs.StringVar(&d.suite, "suite-binary", "bin/suites.test", "the compiled suite")
	fs.StringVar(&d.cacheDir, "cache-dir", config.CacheRoot(), "build cache (the lab VM's kernel and initramfs go in its labvm/); $VCF_CACHE sets the default")
	fs.StringVar(&d.part, "part", "all", "internal: which specs this process runs (all, native, labvm)")
	fs.IntVar(&d.runs, "runs", 10, "soak: how many conformance runs in a row")
	fs.StringVar(&d.only, "only", "", "selftest: only these controls, each a control ID or a claim (all its controls), comma-separated; `conformance controls` lists them")
	fs.DurationVar(&d.timeBudget, "time-budget", 0, "selftest on a cluster: start no control once it could not end within this time (0: no limit); those left are named, and do not fail the run")
	fs.StringVar(&d.afterwards, "afterwards", "run", "selftest on a cluster: how its controls' claims are shown to pass again on it: run (their specs once more, after the controls) or later (by the next run on the cluster: `conformance afterwards`)")
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
	driverFlags := map[string]bool{"lab-vm": true, "suite-binary": true, "cache-dir": true, "part": true, "runs": true, "only": true, "afterwards": true, "time-budget": true}
	fs.Visit(func(f *flag.Flag) {
		if driverFlags[f.Name] {
			return
		}
		// A repeatable flag is passed on as given: once per value.
		if r, ok := f.Value.(interface{ Values() []string }); ok {
			for _, v := range r.Values() {
				d.suiteArgs = append(d.suiteArgs, "--"+f.Name+"="+v)
			}
			return
		}
		d.suiteArgs = append(d.suiteArgs, "--"+f.Name+"="+f.Value.String())
	})
	var errs []error
	switch d.labVM {
	case "auto", "always", "never":
	default:
		errs = append(errs, fmt.Errorf("--lab-vm %q: want auto, always or never", d.labVM))
	}
	if d.sub != "preflight" && d.sub != "kind-up" && d.sub != "kind-down" && !d.cfg.Cluster.DryRun {
		if _, err := os.Stat(d.suite); err != nil {
			errs = append(errs, fmt.Errorf("--suite-binary %q: %v (build it with `make build`)", d.suite, errors.Unwrap(err)))
		}
	}
	if d.only != "" {
		if d.sub != "selftest" {
			errs = append(errs, fmt.Errorf("--only selects controls for selftest, not for %s", d.sub))
		} else if _, err := d.selectedControls(); err != nil {
			errs = append(errs, err)
		}
	}
	switch {
	case d.afterwards != "run" && d.afterwards != "later":
		errs = append(errs, fmt.Errorf("--afterwards %q: want run or later", d.afterwards))
	case d.afterwards == "later" && (d.sub != "selftest" || d.cfg.Tier != "cluster"):
		errs = append(errs, fmt.Errorf("--afterwards=later is for selftest --tier=cluster, whose controls share a cluster with the runs after them"))
	}
	switch {
	case d.timeBudget < 0:
		errs = append(errs, fmt.Errorf("--time-budget %s: want a duration of 0 or more", d.timeBudget))
	case d.timeBudget > 0 && (d.sub != "selftest" || d.cfg.Tier != "cluster"):
		errs = append(errs, fmt.Errorf("--time-budget is for selftest --tier=cluster, where each control is a cluster run of minutes"))
	}
	errs = append(errs, d.cfg.Validate())
	if err := errors.Join(errs...); err != nil {
		return err
	}
	var err error
	d.subj, err = subject.Of(d.cfg)
	return err
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

// decideVM works out whether the lab part of this run needs the lab VM: the
// tier is lab, we are not inside it already, and the kernel lacks options
// (or --lab-vm=always). With --lab-vm=never and a kernel that lacks them,
// it is an error. ok=false means stop with code.
func (d *driver) decideVM() (code int, ok bool) {
	if d.cfg.Tier != "lab" || labvm.Inside() || d.part != "all" {
		return 0, true
	}
	if d.labVM == "always" {
		d.inVM = true
		return 0, true
	}
	missing, err := kernel.Missing()
	if err != nil {
		fmt.Fprintln(os.Stderr, "preflight:", err)
		return 1, false
	}
	if len(missing) == 0 {
		return 0, true
	}
	if d.labVM == "never" {
		// The stager specs need none of them; the lab's specs will fail
		// naming the option their fabric could not build.
		fmt.Fprintf(os.Stderr, "preflight: warning: %v (--lab-vm=never):\n%s", kernel.ErrMissing, kernel.Describe(missing))
		return 0, true
	}
	fmt.Fprintf(os.Stderr, "preflight: this kernel lacks\n%sthe datapath and ARP specs run in the lab VM; the stager specs run here\n", kernel.Describe(missing))
	d.inVM = true
	return 0, true
}

// runInVM runs this command's lab part inside the lab VM and returns its
// exit code. The VM shares the working directory, so reports come back.
func (d *driver) runInVM(ctx context.Context) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	wd, _ := os.Getwd()
	cache, _ := filepath.Abs(filepath.Join(d.cacheDir, "labvm"))
	cmd := append([]string{self, d.sub}, d.rawArgs...)
	cmd = insertBeforeDashDash(cmd, "--lab-vm=never", "--part=labvm")
	// The VM sees the host read-only and only wd writable: a report or work
	// dir elsewhere (e.g. /tmp, a tmpfs in the VM) must be shared too, or
	// the VM's verdicts never reach the host. So must the release under
	// test: beside a checkout in /tmp (CI's `git clone . /tmp/ci-check`,
	// ../shared a link) the VM's own /tmp hides it. So must --guide's,
	// the --image-archive files and what --pull-pinned pulled: the VM
	// re-validates them, from the same cache and without the network.
	dirs := []string{d.cfg.ReportDir, d.cfg.WorkDir, d.cfg.Cozystack, readDir(d.cfg.Guide)}
	for _, a := range d.cfg.ImageArchives {
		dirs = append(dirs, readDir(a))
	}
	if d.cfg.PullPinned {
		dirs = append(dirs, config.PulledCache())
	}
	shares, err := vmShares(wd, dirs...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lab VM:", err)
		return 1
	}
	vcfCache, _ := filepath.Abs(config.CacheRoot())
	code, err := labvm.Run(ctx, labvm.Config{
		CacheDir: cache, WorkDir: wd, Shares: shares, Command: cmd,
		Env:    []string{"CI=" + os.Getenv("CI"), "VCF_CACHE=" + vcfCache},
		Stdout: os.Stdout, Stderr: os.Stderr, Progress: os.Stderr,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "lab VM:", err)
		return 1
	}
	return code
}

// readDir is the directory a flag naming a file or a directory reads in
// (the lab VM re-reads it): the one it names, or the named file's.
func readDir(p string) string {
	if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
		return filepath.Dir(p)
	}
	return p
}

// vmShares lists the directories of dirs ("" = none; relative = under wd)
// that lie outside wd, created if missing, each once, none inside another.
func vmShares(wd string, dirs ...string) ([]string, error) {
	var abs []string
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(wd, d)
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
		abs = append(abs, filepath.Clean(d))
	}
	sort.Slice(abs, func(i, j int) bool { return len(abs[i]) < len(abs[j]) })
	var out []string
	for _, d := range abs {
		if under(d, wd) || slices.ContainsFunc(out, func(s string) bool { return under(d, s) }) {
			continue
		}
		out = append(out, d)
	}
	return out, nil
}

// under reports whether path is dir or lies below it.
func under(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

func insertBeforeDashDash(args []string, flags ...string) []string {
	for i, a := range args {
		if a == "--" {
			out := append([]string{}, args[:i]...)
			out = append(out, flags...)
			return append(out, args[i:]...)
		}
	}
	return append(args, flags...)
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
	// (The cluster tier's container runtime adds host links of its own.)
	if diff := fabric.DiffSnapshots(before, after); diff != "" && d.cfg.Tier == "lab" {
		fmt.Fprintf(os.Stderr, "the run changed this namespace's links, addresses or routes:\n%s\n", diff)
		return max(code, 1)
	}
	return code
}

// interruptGrace is how long an interrupted child run gets to remove what
// it made before it is killed: a cluster run deletes its VMs and its kind
// cluster (CI's lane allows 4 minutes: .ci/run's WITHIN_GRACE).
const interruptGrace = 3 * time.Minute

// withGracePeriod gives the suite's cleanup nodes, once interrupted, the
// time the driver gives the suite (less a margin for the sweep after it),
// not Ginkgo's default 30 s: the AfterSuite of an interrupted VM lane
// deletes every VM booted ahead, and was measured cut off at 30 s with two
// tenants' VMs left running. A --ginkgo.grace-period given is kept.
func withGracePeriod(args []string) []string {
	for _, a := range args {
		if strings.HasPrefix(strings.TrimLeft(a, "-"), "ginkgo.grace-period") {
			return args
		}
	}
	return append(slices.Clone(args), "--ginkgo.grace-period="+(interruptGrace-30*time.Second).String())
}

// child is a run the driver starts for part of its work (the suite, or
// itself for bench and soak). On Ctrl-C or SIGTERM the child gets exactly
// one SIGINT, from the driver, and interruptGrace to clean up. Its own
// process group keeps a signal sent to the driver's group (a terminal's
// Ctrl-C, CI's kill of the phase) from reaching it as well: a second
// interrupt makes Ginkgo skip its cleanup, and exec's default, SIGKILL,
// skips it too. Both left a kind cluster behind.
func child(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = interruptGrace
	return cmd
}

func (d *driver) execSuite(ctx context.Context, args []string, out io.Writer) int {
	cmd := child(ctx, d.suite, withGracePeriod(args)...)
	cmd.Stdout, cmd.Stderr = out, out
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
