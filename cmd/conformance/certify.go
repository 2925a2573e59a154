package main

import (
	"bytes"
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

	"github.com/cozystack/vlan-conformance/framework/atomicfile"
	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/kube"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/suitejob"
)

// certifyCommand runs the suite inside the cluster a kubeconfig names, from the
// suite's image, and copies its results out (suitejob says how):
//
//	conformance certify --kubeconfig=K --image=IMG [--report-dir=D] [--focus=F] [--skip=S] [--timeout=3h] [-- run flags]
//	conformance certify --image=IMG --print-manifests [-- run flags]
//	conformance certify --image=IMG --sonobuoy-plugin [-- run flags]
//
// It exits with the run's own code: 0 every selected claim passed, 1 one
// failed (or the run could not give verdicts), 2 bad input.
func certifyCommand(stdout, stderr io.Writer, args []string) int {
	fs := flag.NewFlagSet("conformance certify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", "", "the cluster to certify (the run goes inside it)")
	image := fs.String("image", "", "the suite's image, as the cluster's nodes can pull it (make conformance-image): the Job's and the node agent's")
	reportDir := fs.String("report-dir", "reports/certify", "where the results tarball goes, and its contents unpacked under results/")
	focus := fs.String("focus", "", "E2E_FOCUS: a Ginkgo label filter of the specs to run, by claim ID or area (e.g. 'NODE-01 || VLAN-02'); empty: all")
	skip := fs.String("skip", "", "E2E_SKIP: a Ginkgo label filter of specs to leave out")
	timeout := fs.Duration("timeout", 3*time.Hour, "the Job's deadline (activeDeadlineSeconds), and how long certify waits for it")
	hold := fs.Duration("hold", 30*time.Minute, "how long the run's pod keeps its results for certify to copy")
	printOnly := fs.Bool("print-manifests", false, "print the manifests (namespace, ServiceAccount, ClusterRole, binding, Job) for kubectl apply, and create nothing")
	plugin := fs.Bool("sonobuoy-plugin", false, "print the same run as a Sonobuoy Job plugin (sonobuoy run --plugin FILE), and create nothing")
	flags, runArgs := args, []string(nil)
	for i, a := range args {
		if a == "--" {
			flags, runArgs = args[:i], args[i+1:]
			break
		}
	}
	bad := func(err error) int {
		fmt.Fprintf(stderr, "conformance certify: invalid input, nothing was created:\n%v\n", err)
		return config.ExitBadInput
	}
	if err := fs.Parse(flags); err != nil {
		return config.ExitBadInput
	}
	var errs []error
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments %q (the run's flags go after --)", fs.Args()))
	}
	if *image == "" {
		errs = append(errs, errors.New("--image: the suite's image is required (make conformance-image prints its reference)"))
	}
	if *timeout <= 0 || *hold <= 0 {
		errs = append(errs, fmt.Errorf("--timeout %s, --hold %s: want both > 0", *timeout, *hold))
	}
	if *printOnly && *plugin {
		errs = append(errs, errors.New("--print-manifests and --sonobuoy-plugin: one or the other"))
	}
	if !*printOnly && !*plugin {
		if *kubeconfig == "" {
			errs = append(errs, errors.New("--kubeconfig: the cluster to certify is required"))
		} else if _, err := os.Stat(*kubeconfig); err != nil {
			errs = append(errs, fmt.Errorf("--kubeconfig %q: %v", *kubeconfig, errors.Unwrap(err)))
		}
	}
	if err := checkRunArgs(runArgs, *kubeconfig); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return bad(errors.Join(errs...))
	}
	opts := suitejob.Options{Image: *image, Args: runArgs, Focus: *focus, Skip: *skip, Deadline: *timeout, Hold: *hold}
	objs := suitejob.Render(opts)
	if *printOnly || *plugin {
		y, err := objs.YAML()
		if *plugin {
			y, err = suitejob.SonobuoyPlugin(opts)
		}
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		stdout.Write(y)
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	k := &kube.Clients{}
	if err := k.Connect(*kubeconfig); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	code, err := certifyIn(ctx, k, objs, *reportDir, *timeout, stdout)
	// Everything it made goes, on failure and Ctrl-C too.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), suitejob.Grace+15*time.Minute)
	defer cancel()
	if rerr := suitejob.Remove(rctx, k, stdout); rerr != nil {
		err = errors.Join(err, fmt.Errorf("removing what certify made: %w", rerr))
	}
	if err != nil {
		fmt.Fprintln(stderr, "certify:", err)
		return max(code, 1)
	}
	fmt.Fprintf(stdout, "certify: the run exited %d; nothing of it is left in the cluster\n", code)
	return code
}

// checkRunArgs validates the in-cluster run's flags here, before anything
// is created: as `conformance run` would on this cluster, but for the
// flags certify sets itself.
func checkRunArgs(args []string, kubeconfig string) error {
	fs := flag.NewFlagSet("the run's flags (after --)", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg := config.Register(fs)
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("the run's flags (after --): %w", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("the run's flags (after --): unexpected arguments %q", fs.Args())
	}
	var errs []error
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "tier", "kubeconfig", "report-dir", "node-agent-image":
			errs = append(errs, fmt.Errorf("the run's --%s is certify's to set", f.Name))
		case "cozystack", "guide", "stager-manifest", "stager-image", "plugin-dir", "old-plugin-dir":
			// Read where the run is: the image has the suite's own
			// (its fixtures), not this machine's files.
			errs = append(errs, fmt.Errorf("the run's --%s names a file on this machine, which the run inside the cluster cannot read (not yet carried into it)", f.Name))
		}
	})
	if !cfg.Given("stager-manifest") {
		cfg.StagerManifest = "" // the image's own, read in the pod
	}
	if cfg.Cluster.Workload == "pod" {
		errs = append(errs, errors.New("the run's --workload=pod: the suite enters a pod guest's network namespace from its node's host (a kind node's processes are the machine's), which a run inside the cluster is not; certify runs VMs"))
	}
	cfg.Tier = "cluster"
	// The cluster the run will be in is the one certify reaches.
	cfg.Kubeconfig = kubeconfig
	if kubeconfig == "" {
		cfg.Kubeconfig = os.DevNull
	}
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// certifyIn is certify's run once its objects are rendered: it creates
// them, follows the run's log, and copies the results into reportDir. The
// code is the run's.
func certifyIn(ctx context.Context, k *kube.Clients, objs suitejob.Objects, reportDir string, timeout time.Duration, progress io.Writer) (int, error) {
	tarball := filepath.Join(reportDir, suitejob.Tarball)
	unpacked := filepath.Join(reportDir, "results")
	// An earlier certify's results must never stand in for this one's.
	if err := errors.Join(os.Remove(tarball), os.RemoveAll(unpacked)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return 1, err
	}
	if err := os.MkdirAll(reportDir, 0o755); err != nil {
		return 1, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := suitejob.Deploy(ctx, k, objs, progress); err != nil {
		return 1, err
	}
	started, cancelStart := context.WithTimeout(ctx, 10*time.Minute)
	pod, err := suitejob.Pod(started, k, progress)
	cancelStart()
	if err != nil {
		return 1, err
	}
	fmt.Fprintf(progress, "certify: the run started in pod %s/%s; its log follows\n", suitejob.Namespace, pod)
	if _, err := suitejob.Follow(ctx, k, pod, progress); err != nil {
		return 1, err
	}
	var got bytes.Buffer
	if err := suitejob.Fetch(ctx, k, pod, &got); err != nil {
		return 1, fmt.Errorf("copying the results out: %w", err)
	}
	if err := atomicfile.Write(tarball, bytes.NewReader(got.Bytes()), 0o644); err != nil {
		return 1, err
	}
	if err := suitejob.Unpack(&got, unpacked); err != nil {
		return 1, fmt.Errorf("%s: %w", tarball, err)
	}
	code, err := suitejob.ReadExitCode(unpacked)
	if err != nil {
		return 1, fmt.Errorf("%s: %w", tarball, err)
	}
	fmt.Fprintf(progress, "certify: results in %s (report %s)\n", tarball, filepath.Join(unpacked, "conformance.md"))
	return code, nil
}

// job is the in-cluster run, the Job's container: `conformance run` on the
// cluster it is in, then, whatever it did, its report as a tarball with
// done beside it (go-runner's and Sonobuoy's contract), then the results
// held until certify copied them (--hold; 0: exit at once, as a Sonobuoy
// plugin does). E2E_FOCUS and E2E_SKIP are label filters.
//
//	conformance job [--hold=DUR] -- run flags
func job(stdout, stderr io.Writer, args []string) int {
	fs := flag.NewFlagSet("conformance job", flag.ContinueOnError)
	fs.SetOutput(stderr)
	hold := fs.Duration("hold", 0, "keep the results this long for certify to copy (conformance results); 0: exit once written")
	if err := fs.Parse(args); err != nil {
		return config.ExitBadInput
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runJob(ctx, self, resultsDir(), fs.Args(), *hold, stdout, stderr)
}

// runJob runs program's `run` on the cluster it is in, its report in dir,
// then writes the results, and holds them up to hold.
func runJob(ctx context.Context, program, dir string, args []string, hold time.Duration, stdout, stderr io.Writer) int {
	report := filepath.Join(dir, "report")
	run := append([]string{"run", "--tier=cluster", "--kubeconfig=" + config.InCluster, "--report-dir=" + report, "--node-agent-image=" + os.Getenv("VCF_IMAGE")}, args...)
	// A pod's log is read as text: no colours. The stager's harness specs
	// are left out: they run the release's init container on the suite's
	// own machine, as root (a mount namespace, chroot), and observe no
	// cluster; `make conformance` runs them.
	filter := "!" + stagerLabel
	if f := suitejob.LabelFilter(os.Getenv("E2E_FOCUS"), os.Getenv("E2E_SKIP")); f != "" {
		filter = "(" + f + ") && " + filter
	}
	run = append(run, "--", "--ginkgo.no-color", "--ginkgo.label-filter="+filter)
	fmt.Fprintf(stdout, "job: conformance %s\n", strings.Join(run, " "))
	cmd := exec.CommandContext(ctx, program, run...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// The pod's SIGTERM (the Job's deadline, a deletion) is the run's: it
	// removes what it made, as on Ctrl-C.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = suitejob.Grace - 30*time.Second
	code := 0
	if err := cmd.Run(); err != nil {
		code = 1
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() > 0 {
			code = exit.ExitCode()
		}
		fmt.Fprintf(stderr, "job: the run: %v\n", err)
	}
	if err := writeResults(dir, report, code); err != nil {
		fmt.Fprintln(stderr, "job: results:", err)
		return max(code, 1)
	}
	fmt.Fprintln(stdout, suitejob.Ready+filepath.Join(dir, suitejob.Tarball))
	if hold > 0 {
		waitFetched(ctx, dir, hold, stderr)
	}
	return code
}

// stagerLabel is suites/labels.Stager's own label (the driver does not
// link Ginkgo's spec tree).
const stagerLabel = "stager"

// writeResults packs the report with the run's exit code into the
// tarball, then writes done naming it (last: done means complete).
func writeResults(dir, report string, code int) error {
	if err := os.MkdirAll(report, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(report, suitejob.ExitCode), fmt.Appendf(nil, "%d\n", code), 0o644); err != nil {
		return err
	}
	var packed bytes.Buffer
	if err := suitejob.Pack(report, &packed); err != nil {
		return err
	}
	tarball := filepath.Join(dir, suitejob.Tarball)
	if err := atomicfile.Write(tarball, &packed, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "done"), []byte(tarball), 0o644)
}

// fetched is the file `conformance results` leaves once it streamed the
// tarball: the pod may end.
const fetched = "fetched"

func waitFetched(ctx context.Context, dir string, hold time.Duration, stderr io.Writer) {
	bound := time.After(hold)
	for {
		if _, err := os.Stat(filepath.Join(dir, fetched)); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-bound:
			fmt.Fprintf(stderr, "job: no one copied the results within %s\n", hold)
			return
		case <-time.After(time.Second):
		}
	}
}

// results streams the results tarball to stdout (certify execs it in the
// run's pod) and marks it fetched.
func results(dir string, stdout, stderr io.Writer) int {
	done, err := os.ReadFile(filepath.Join(dir, "done"))
	if err != nil {
		fmt.Fprintln(stderr, "results: no done file yet:", err)
		return 1
	}
	f, err := os.Open(strings.TrimSpace(string(done)))
	if err != nil {
		fmt.Fprintln(stderr, "results:", err)
		return 1
	}
	defer f.Close()
	if _, err := io.Copy(stdout, f); err != nil {
		fmt.Fprintln(stderr, "results:", err)
		return 1
	}
	if err := os.WriteFile(filepath.Join(dir, fetched), nil, 0o644); err != nil {
		fmt.Fprintln(stderr, "results:", err)
		return 1
	}
	return 0
}

// resultsDir is where the in-cluster run keeps its results: Sonobuoy's
// $SONOBUOY_RESULTS_DIR when it runs the image as a plugin.
func resultsDir() string {
	if d := os.Getenv("SONOBUOY_RESULTS_DIR"); d != "" {
		return d
	}
	return suitejob.ResultsDir
}
