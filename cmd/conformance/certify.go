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
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cozystack/vlan-conformance/framework/atomicfile"
	"github.com/cozystack/vlan-conformance/framework/certify"
	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/cozystack"
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
	product := fs.String("product", "", "the vendor's product file (docs/product.example.yaml): the results are judged by the certification profile once copied out (conformance verdicts --certify), into certification.txt; not certified exits 1")
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
	if *product != "" {
		if *printOnly || *plugin {
			errs = append(errs, errors.New("--product: certify judges the results it copies out; with --print-manifests or --sonobuoy-plugin, judge them with conformance verdicts --certify=PRODUCT vm=JUNIT"))
		} else if _, err := certify.Read(*product); err != nil {
			errs = append(errs, fmt.Errorf("--product: %w", err))
		}
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
	runArgs, inputs, err := carry(runArgs)
	if err == nil && inputs != nil && *plugin {
		err = errors.New("--sonobuoy-plugin: a plugin carries no files of this machine (the run's --cozystack, --guide); certify does")
	}
	if err != nil {
		return bad(err)
	}
	opts := suitejob.Options{Image: *image, Args: runArgs, Focus: *focus, Skip: *skip, Deadline: *timeout, Hold: *hold, Inputs: inputs}
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
	if *product != "" {
		code = max(code, judge(stdout, *product, *reportDir))
	}
	return code
}

// judge runs the certification profile on the results certify copied
// into reportDir (their JUnit report, a VM run), printing it and keeping
// it in certification.txt beside the product file it judged by.
func judge(stdout io.Writer, product, reportDir string) int {
	err := copyFile(product, filepath.Join(reportDir, "product.yaml"))
	var out bytes.Buffer
	code := 1
	if err == nil {
		code = verdicts(io.MultiWriter(stdout, &out), []string{"--certify=" + product, "vm=" + filepath.Join(reportDir, "results", "junit.xml")})
		err = os.WriteFile(filepath.Join(reportDir, "certification.txt"), out.Bytes(), 0o644)
	}
	if err != nil {
		fmt.Fprintln(stdout, "certify: the certification:", err)
		return max(code, 1)
	}
	fmt.Fprintf(stdout, "certify: the certification in %s\n", filepath.Join(reportDir, "certification.txt"))
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
		case "stager-manifest", "stager-image", "plugin-dir", "old-plugin-dir":
			// Read where the run is: the image has the suite's own
			// (its fixtures), not this machine's files.
			errs = append(errs, fmt.Errorf("the run's --%s names a file on this machine, which the run inside the cluster cannot read (certify carries --cozystack and --guide in, not the stager's files: the image has its own)", f.Name))
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

// carried are the run's flags naming files of this machine that certify
// carries into the cluster, each under suitejob.InputsDir/<flag>.
var carried = []string{"cozystack", "guide"}

// carry packs the files the run's --cozystack and --guide name (the
// release as the suite reads it, cozystack.CopyTo, with its commit; the
// guide file) and returns the run's flags naming them where the pod
// unpacks them. No such flag: the flags as they are, and no inputs.
func carry(args []string) ([]string, []byte, error) {
	out := slices.Clone(args)
	dir, err := os.MkdirTemp("", "vcf-inputs-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	some := false
	for i := 0; i < len(out); i++ {
		name, value, inline := strings.Cut(strings.TrimLeft(out[i], "-"), "=")
		if !strings.HasPrefix(out[i], "-") || !slices.Contains(carried, name) {
			continue
		}
		at := i // the argument holding the value: this one, or the next
		if !inline {
			if at = i + 1; at == len(out) {
				return nil, nil, fmt.Errorf("the run's --%s: no value", name)
			}
			value, i = out[at], at
		}
		place, err := carryFile(name, value, filepath.Join(dir, name))
		if err != nil {
			return nil, nil, fmt.Errorf("the run's --%s: %w", name, err)
		}
		out[at] = path.Join(suitejob.InputsDir, name, place)
		if inline {
			out[at] = "--" + name + "=" + out[at]
		}
		some = true
	}
	if !some {
		return args, nil, nil
	}
	var packed bytes.Buffer
	if err := suitejob.PackInputs(dir, &packed); err != nil {
		return nil, nil, err
	}
	if packed.Len() > suitejob.InputsLimit {
		return nil, nil, fmt.Errorf("the run's --cozystack and --guide pack to %d bytes, over the %d a ConfigMap carries", packed.Len(), suitejob.InputsLimit)
	}
	return out, packed.Bytes(), nil
}

// carryFile copies what the flag names into dir, as the run will read it,
// and returns its path in dir ("" for dir itself).
func carryFile(flag, value, dir string) (string, error) {
	if flag == "guide" {
		src, err := cozystack.FindGuide(value)
		if err != nil {
			return "", err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		return filepath.Base(src), copyFile(src, filepath.Join(dir, filepath.Base(src)))
	}
	r, err := cozystack.Open(value)
	if err != nil {
		return "", err
	}
	if _, err := r.CopyTo(dir); err != nil {
		return "", err
	}
	// The copy has no git: its commit goes in SOURCE, as a subset's does.
	if r.CommitFrom != "SOURCE" {
		source := fmt.Sprintf("commit: %s\ncarried-from: %s (%s)\n", r.Commit, r.Dir, r.CommitFrom)
		if err := os.WriteFile(filepath.Join(dir, "SOURCE"), []byte(source), 0o644); err != nil {
			return "", err
		}
	}
	return "", nil
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
	if err := atomicfile.WriteFunc(tarball, 0o644, func(w io.Writer) error { return suitejob.Fetch(ctx, k, pod, w) }); err != nil {
		return 1, fmt.Errorf("copying the results out: %w", err)
	}
	f, err := os.Open(tarball)
	if err != nil {
		return 1, err
	}
	defer f.Close()
	if err := suitejob.Unpack(f, unpacked); err != nil {
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
//	conformance job [--hold=DUR] [--inputs=TARBALL] -- run flags
func job(stdout, stderr io.Writer, args []string) int {
	fs := flag.NewFlagSet("conformance job", flag.ContinueOnError)
	fs.SetOutput(stderr)
	hold := fs.Duration("hold", 0, "keep the results this long for certify to copy (conformance results); 0: exit once written")
	inputs := fs.String("inputs", "", "a tarball of the files certify carried in (the run's --cozystack, --guide), unpacked under "+suitejob.InputsDir+" first")
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
	// go-runner's contract for a runner that gives no arguments
	// (Hydrophone's --extra-args).
	args = fs.Args()
	if len(args) == 0 {
		args = strings.Fields(os.Getenv("E2E_EXTRA_ARGS"))
	}
	j := inCluster{program: self, dir: resultsDir(), image: agentImage(ctx, stderr), inputs: *inputs, args: args, hold: *hold}
	return j.run(ctx, stdout, stderr)
}

// agentImage is the node agent's image: $VCF_IMAGE, else the pod's own
// (a runner such as Hydrophone sets no variable of the suite's). Without
// one the run has no agent, and its report says what it could not observe.
func agentImage(ctx context.Context, stderr io.Writer) string {
	if image := os.Getenv("VCF_IMAGE"); image != "" {
		return image
	}
	var k kube.Clients
	err := k.Connect(config.InCluster)
	if err == nil {
		var image string
		if image, err = suitejob.OwnImage(ctx, &k); err == nil {
			return image
		}
	}
	fmt.Fprintf(stderr, "job: no node agent: $VCF_IMAGE is unset and the pod's own image is unknown (%v)\n", err)
	return ""
}

// inCluster is the Job's run: program's `run` with args, on the cluster it
// is in, its results in dir, the node agent from image, the files certify
// carried in (inputs, a tarball; "" none) unpacked first.
type inCluster struct {
	program, dir, image, inputs string
	args                        []string
	hold                        time.Duration // how long the results wait to be fetched
}

// run runs it, then writes the results whatever it did, and holds them up
// to hold. Its output goes to dir's e2e.log too, and its JUnit report to
// junit_01.xml there (go-runner's names, which Hydrophone copies out).
func (j inCluster) run(ctx context.Context, stdout, stderr io.Writer) int {
	dir, report := j.dir, filepath.Join(j.dir, "report")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(stderr, "job:", err)
		return 1
	}
	log, err := os.Create(filepath.Join(dir, e2eLog))
	if err != nil {
		fmt.Fprintln(stderr, "job:", err)
		return 1
	}
	defer log.Close()
	stdout, stderr = io.MultiWriter(stdout, log), io.MultiWriter(stderr, log)
	code := 1
	if err := unpackInputs(j.inputs); err != nil {
		fmt.Fprintf(stderr, "job: the files certify carried in (%s): %v\n", j.inputs, err)
	} else {
		start := time.Now()
		code = j.suite(ctx, report, stdout, stderr)
		// The Ginkgo CLI's last lines, which end go-runner's log: Hydrophone
		// reads the run's end from them.
		verdict := "Passed"
		if code != 0 {
			verdict = "Failed"
		}
		fmt.Fprintf(stdout, "Ginkgo ran 1 suite in %s\nTest Suite %s\n", time.Since(start).Round(time.Millisecond), verdict)
	}
	if err := writeResults(dir, report, code); err != nil {
		fmt.Fprintln(stderr, "job: results:", err)
		return max(code, 1)
	}
	fmt.Fprintln(stdout, suitejob.Ready+filepath.Join(dir, suitejob.Tarball))
	if j.hold > 0 {
		waitFetched(ctx, dir, j.hold, stderr)
	}
	return code
}

// unpackInputs unpacks the tarball of the files certify carried in under
// suitejob.InputsDir, where the run's flags name them.
func unpackInputs(tarball string) error {
	if tarball == "" {
		return nil
	}
	f, err := os.Open(tarball)
	if err != nil {
		return err
	}
	defer f.Close()
	return suitejob.UnpackInputs(f, suitejob.InputsDir)
}

// suite is `conformance run` in the pod, its report in report; its exit
// code.
func (j inCluster) suite(ctx context.Context, report string, stdout, stderr io.Writer) int {
	run := append([]string{"run", "--tier=cluster", "--kubeconfig=" + config.InCluster, "--report-dir=" + report, "--node-agent-image=" + j.image}, j.args...)
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
	cmd := exec.CommandContext(ctx, j.program, run...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// The pod's SIGTERM (the Job's deadline, a deletion) is the run's: it
	// removes what it made, as on Ctrl-C.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = suitejob.Grace - 30*time.Second
	err := cmd.Run()
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "job: the run: %v\n", err)
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() > 0 {
		return exit.ExitCode()
	}
	return 1
}

// The run's log and JUnit report under go-runner's names, beside done.
const (
	e2eLog = "e2e.log"
	junit  = "junit_01.xml"
)

// stagerLabel is suites/labels.Stager's own label (the driver does not
// link Ginkgo's spec tree).
const stagerLabel = "stager"

// writeResults packs the report with the run's exit code and log into the
// tarball, then writes done naming it (last: done means complete).
func writeResults(dir, report string, code int) error {
	if err := os.MkdirAll(report, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(report, suitejob.ExitCode), fmt.Appendf(nil, "%d\n", code), 0o644); err != nil {
		return err
	}
	for _, c := range []struct{ from, to string }{
		{filepath.Join(dir, e2eLog), filepath.Join(report, e2eLog)},
		{filepath.Join(report, "junit.xml"), filepath.Join(dir, junit)},
	} {
		if err := copyFile(c.from, c.to); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	tarball := filepath.Join(dir, suitejob.Tarball)
	if err := atomicfile.WriteFunc(tarball, 0o644, func(w io.Writer) error { return suitejob.Pack(report, w) }); err != nil {
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
// $SONOBUOY_RESULTS_DIR when it runs the image as a plugin, go-runner's
// $RESULTS_DIR.
func resultsDir() string {
	for _, v := range []string{"SONOBUOY_RESULTS_DIR", "RESULTS_DIR"} {
		if d := os.Getenv(v); d != "" {
			return d
		}
	}
	return suitejob.ResultsDir
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}
