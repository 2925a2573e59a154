package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cozystack/vlan-conformance/framework/atomicfile"
	"github.com/cozystack/vlan-conformance/framework/claims"
	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/controls"
	"github.com/cozystack/vlan-conformance/framework/report"
)

// selftest runs each negative control of the run's tier against its broken
// subject and requires the claim's spec to FAIL. All lab controls share one
// lab VM boot; each cluster control is a cluster run of its own.
func (d *driver) selftest(ctx context.Context) int {
	if d.part != "all" {
		return d.selftestPart(ctx, d.part)
	}
	os.RemoveAll(filepath.Join(d.cfg.ReportDir, "selftest"))
	parts := []string{"all"}
	if d.inVM {
		parts = []string{"native", "labvm"}
	}
	var outcomes []report.ControlOutcome
	for _, part := range parts {
		if part == "labvm" {
			d.runInVM(ctx)
		} else {
			d.selftestPart(ctx, part)
		}
		b, err := os.ReadFile(d.partOutcomes(part))
		var got []report.ControlOutcome
		if err == nil {
			err = json.Unmarshal(b, &got)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "selftest: the %s part left no outcomes: %v\n", part, err)
			return 1
		}
		outcomes = append(outcomes, got...)
	}
	caught, missed, lasting := 0, []string{}, []string{}
	for _, o := range outcomes {
		if o.SpecFailed {
			caught++
		} else {
			missed = append(missed, o.Control+" ("+o.Verdict+")")
		}
		if o.AfterwardsFailed {
			lasting = append(lasting, o.Control+": "+o.Claim+" "+o.Afterwards)
		}
	}
	notRun := d.controlsNotRun()
	if err := report.WriteSelftest(d.cfg.ReportDir, outcomes); err != nil {
		fmt.Fprintln(os.Stderr, "selftest report:", err)
		return 1
	}
	fmt.Printf("selftest: %d/%d controls caught (their claim's It failed with the declared message); %s\n", caught, len(outcomes), filepath.Join(d.cfg.ReportDir, "selftest.md"))
	// The summary is what a CI log's tail keeps: it names what was missed.
	for _, m := range missed {
		fmt.Printf("selftest: NOT CAUGHT %s\n", m)
	}
	for _, n := range notRun {
		fmt.Printf("selftest: NOT RUN %s\n", n)
	}
	for _, id := range d.outOfTime {
		fmt.Printf("selftest: NOT RUN %s: the --time-budget of %s ran out before it\n", id, d.timeBudget)
	}
	for _, l := range lasting {
		fmt.Printf("selftest: NOT PASSING AGAIN after the controls %s\n", l)
	}
	if d.cfg.Tier == "cluster" && d.afterwards == "later" && len(outcomes) > 0 {
		fmt.Printf("selftest: the controls' claims are judged again by the next run on this cluster: conformance afterwards %s <its junit.xml>\n", d.cfg.ReportDir)
	}
	selected, _ := d.selectedControls()
	if caught != len(outcomes) || len(lasting) > 0 || len(outcomes)+len(notRun)+len(d.outOfTime) != len(selected) {
		return 1
	}
	return 0
}

func (d *driver) partOutcomes(part string) string {
	return filepath.Join(d.cfg.ReportDir, "selftest", "outcomes-"+part+".json")
}

// inPart reports whether a control's claim runs in a part (see labelFilter).
func inPart(c controls.Control, part string) bool {
	native := claims.Staging(c.Claim) || c.Native
	return part == "all" || (part == "native") == native
}

// selftestPart runs the controls of one part here and records their
// outcomes for the merge.
func (d *driver) selftestPart(ctx context.Context, part string) int {
	dir := filepath.Join(d.cfg.ReportDir, "selftest")
	var outcomes []report.ControlOutcome
	selected, _ := d.selectedControls()
	clusterControlsFirst(selected)
	var led ledger // a cluster's controls only: the lab runs every one
	if d.cfg.Tier == "cluster" {
		var err error
		if led, err = readLedger(d.ledgerPath()); err != nil {
			// The order is only a fairness: a broken ledger is said, and the
			// next run rewrites it.
			fmt.Fprintf(os.Stderr, "selftest: %v; the controls run in the registry's order\n", err)
		}
	}
	if d.timeBudget > 0 {
		leastRecentFirst(selected, led)
		fmt.Printf("selftest: under the --time-budget, the controls on VMs run least recently run first (on this machine: %s)\n", d.ledgerPath())
	}
	start := time.Now()
	took := durations{} // the longest control so far of each tier: what the next may take
	for _, c := range selected {
		if !inPart(c, part) || d.notRunReason(c) != "" {
			continue
		}
		if ctx.Err() != nil {
			return 130
		}
		if next := took.next(c.Tier); !fits(d.timeBudget, time.Since(start), next) {
			// Said once, when it happens; the summary names each control
			// left (time only grows, and the tiers run one after the other,
			// so no later control fits either).
			if len(d.outOfTime) == 0 {
				fmt.Printf("selftest: the --time-budget of %s runs out: %s spent, and a control of this kind took up to %s; no more controls start\n",
					d.timeBudget, time.Since(start).Round(time.Second), next.Round(time.Second))
			}
			d.outOfTime = append(d.outOfTime, c.ID)
			continue
		}
		fmt.Printf("selftest: %s (%s): %s\n", c.ID, c.Claim, c.Description)
		cdir := filepath.Join(dir, strings.NewReplacer("/", "_", ".", "_").Replace(c.ID))
		began := time.Now()
		o := d.runControl(ctx, c, part, cdir)
		// One more attempt for a control that was not caught: TCG timing can
		// spoil one run; the report keeps the first attempt's verdict, so a
		// control caught only on its second attempt is visible as flaky.
		// Only within the --time-budget, as long again as the first: CI
		// stops the whole phase past it, and every outcome with it.
		switch {
		case o.SpecFailed || ctx.Err() != nil:
		case !fits(d.timeBudget, time.Since(start), time.Since(began)):
			fmt.Printf("selftest: %s %s (%.1fs); not tried again: the --time-budget of %s would run out\n", c.ID, describeMiss(o, cdir), o.Seconds, d.timeBudget)
		default:
			fmt.Printf("selftest: %s %s (%.1fs); trying it once more\n", c.ID, describeMiss(o, cdir), o.Seconds)
			first := o
			o = d.runControl(ctx, c, part, cdir+"-again")
			o.FirstAttempt = strings.ToUpper(first.Verdict) + ": " + first.Note
			cdir += "-again"
		}
		verdict := "CAUGHT: " + o.Matched
		if !o.SpecFailed {
			verdict = describeMiss(o, cdir)
		} else if o.FirstAttempt != "" {
			verdict += " (on the second attempt)"
		}
		fmt.Printf("selftest: %s %s (%.1fs)\n", c.ID, verdict, o.Seconds)
		outcomes = append(outcomes, o)
		if led != nil && ctx.Err() == nil { // one stopped half-way has not run
			led[c.ID] = time.Now().UTC()
			if err := led.write(d.ledgerPath()); err != nil {
				fmt.Fprintln(os.Stderr, "selftest:", err)
			}
		}
		took[c.Tier] = max(took[c.Tier], time.Since(began))
	}
	if d.cfg.Tier == "cluster" && d.afterwards == "run" && len(outcomes) > 0 && ctx.Err() == nil {
		d.passAgain(ctx, outcomes, filepath.Join(dir, "afterwards"))
	}
	b, err := json.Marshal(outcomes)
	if err == nil {
		os.MkdirAll(dir, 0o755)
		err = os.WriteFile(d.partOutcomes(part), b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "selftest:", err)
		return 1
	}
	return 0
}

// passAgain runs the controls' claims' specs once more on the same
// cluster, without a control, and records in each outcome whether its
// claim passed: every control there breaks a cluster that the next runs
// share, and this shows the breakage did not outlive the control's run.
func (d *driver) passAgain(ctx context.Context, outcomes []report.ControlOutcome, dir string) {
	var ids []string
	for _, o := range outcomes {
		if !slices.Contains(ids, o.Claim) {
			ids = append(ids, o.Claim)
		}
	}
	fmt.Printf("selftest: after the controls, %s without a control on the same cluster\n", strings.Join(ids, ", "))
	junit := filepath.Join(dir, "junit.xml")
	args := append(append([]string{}, d.suiteArgs...),
		"--report-dir="+dir, "--ginkgo.label-filter="+labelFilter("all", strings.Join(ids, " || ")),
		"--ginkgo.junit-report="+junit, "--ginkgo.no-color", "--dump-on-failure=false")
	start := time.Now()
	d.runSuiteQuiet(ctx, args, filepath.Join(dir, "output.txt"))
	cases, err := report.ReadJUnit(junit)
	fmt.Printf("selftest: after the controls (%.1fs, %s):\n", time.Since(start).Seconds(), dir)
	for _, l := range report.JudgeAfterwards(outcomes, cases, err) {
		fmt.Printf("  %s\n", l)
	}
}

// runControl runs a control's claim specs once against its broken subject
// and judges the outcome.
func (d *driver) runControl(ctx context.Context, c controls.Control, part, cdir string) report.ControlOutcome {
	junit := filepath.Join(cdir, "junit.xml")
	args := append(append([]string{}, d.suiteArgs...),
		"--control="+c.ID, "--report-dir="+cdir,
		"--ginkgo.label-filter="+labelFilter(part, strings.Join(append([]string{c.Claim}, c.Alongside...), " || ")), "--ginkgo.junit-report="+junit, "--ginkgo.no-color", "--dump-on-failure=false")
	args = append(args, c.ExtraArgs...)
	start := time.Now()
	code := d.runSuiteQuiet(ctx, args, filepath.Join(cdir, "output.txt"))
	o := report.ControlOutcome{Claim: c.Claim, Control: c.ID, Description: c.Description, Expected: c.Expect, ExitCode: code, Seconds: time.Since(start).Seconds()}
	cases, err := report.ReadJUnit(junit)
	j := report.Judge(cases, c.Claim, c.Expect)
	o.Verdict, o.Matched, o.FailedSpecs, o.Note = j.Verdict, j.Matched, j.FailedSpecs, j.Note
	switch {
	case code == config.ExitBadInput:
		o.Verdict, o.Matched, o.FailedSpecs, o.Note = report.BrokeSetup, "", nil, "the suite rejected the control's flags"
	case err != nil:
		o.Verdict, o.Matched, o.FailedSpecs, o.Note = report.BrokeSetup, "", nil, "no JUnit: "+err.Error()
	}
	o.SpecFailed = o.Verdict == report.Caught
	return o
}

func describeMiss(o report.ControlOutcome, cdir string) string {
	return strings.ToUpper(o.Verdict) + ": " + o.Note + " (see " + cdir + "/output.txt)"
}

// notRunReason is why a control cannot run against this run's subject,
// "" when it can: its broken subject is made from a release, or its claim
// is one the release does not make.
func (d *driver) notRunReason(c controls.Control) string {
	switch {
	case c.NeedsRelease && d.cfg.Cozystack == "":
		return "no release under test (pass --cozystack=DIR)"
	case claims.Staging(c.Claim) && !d.subj.Stages():
		return "the release does not stage the CNI plugins: it makes no STG claim"
	case c.WantsVMs(d.cfg.Tier, d.cfg.Cluster.Workload):
		return "on a cluster it breaks VMs, and this one runs pods (--workload=" + d.cfg.Cluster.Workload + ")"
	}
	return ""
}

// controlsNotRun are the selected controls that cannot run, each with why.
func (d *driver) controlsNotRun() []string {
	var out []string
	selected, _ := d.selectedControls()
	for _, c := range selected {
		if why := d.notRunReason(c); why != "" {
			out = append(out, c.ID+": "+why)
		}
	}
	return out
}

// selectedControls are the tier's controls selftest runs: all of them, or
// those --only names by ID or by claim. A name that is neither, or whose
// controls are another tier's, is bad input.
func (d *driver) selectedControls() ([]controls.Control, error) {
	all := controls.On(d.cfg.Tier)
	if d.only == "" {
		return all, nil
	}
	names := map[string]bool{}
	for _, n := range strings.Split(d.only, ",") {
		names[strings.TrimSpace(n)] = true
	}
	var out []controls.Control
	used := map[string]bool{}
	for _, c := range all {
		if names[c.ID] || names[c.Claim] {
			out = append(out, c)
			used[c.ID], used[c.Claim] = true, true
		}
	}
	var unknown []string
	for n := range names {
		if !used[n] {
			unknown = append(unknown, n)
		}
	}
	slices.Sort(unknown)
	if len(unknown) > 0 {
		return nil, fmt.Errorf("--only %s: no control of --tier=%s by that ID or claim (`conformance controls` lists them)", strings.Join(unknown, ","), d.cfg.Tier)
	}
	return out, nil
}

// runSuiteQuiet runs the suite with its output in a file (a control's
// failure is the expected outcome, not something to print).
func (d *driver) runSuiteQuiet(ctx context.Context, args []string, logPath string) int {
	os.MkdirAll(filepath.Dir(logPath), 0o755)
	f, err := os.Create(logPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer f.Close()
	return d.runSuiteTo(ctx, args, f)
}

// clusterControlsFirst puts the cluster's own controls first, keeping the
// order otherwise: the lab cannot break their claims, while every other
// control's claim has one there too, so they are the last a --time-budget
// should leave out.
func clusterControlsFirst(cs []controls.Control) {
	slices.SortStableFunc(cs, func(a, b controls.Control) int {
		switch ac, bc := a.Tier == "cluster", b.Tier == "cluster"; {
		case ac && !bc:
			return -1
		case bc && !ac:
			return 1
		}
		return 0
	})
}

// ledger is when each control last ran on this machine. A --time-budget
// that cannot hold every control (CI's: about ten of the seventeen on VMs)
// would otherwise leave out the same ones, in the registry's order, on every
// run, and their mechanisms would go unchecked for good; run least recently
// run first, each is run within a few runs.
type ledger map[string]time.Time

// ledgerPath is per tier and workload: a pod lane's controls are not a VM
// lane's.
func (d *driver) ledgerPath() string {
	return filepath.Join(d.cacheDir, "selftest", d.cfg.Tier+"-"+d.cfg.Cluster.Workload+".json")
}

// readLedger returns an empty ledger where there is none yet or it cannot
// be read (the order then is the registry's), and why it could not be.
func readLedger(path string) (ledger, error) {
	led := ledger{}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return led, nil
	}
	if err == nil {
		err = json.Unmarshal(b, &led)
	}
	if err != nil {
		return ledger{}, fmt.Errorf("the ledger of the controls' last runs, %s: %w", path, err)
	}
	return led, nil
}

func (l ledger) write(path string) error {
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, bytes.NewReader(b), 0o644)
}

// leastRecentFirst orders the controls after the cluster's own (which
// clusterControlsFirst put first, and which stay in front) by when they
// last ran, never first; ties keep the registry's order.
func leastRecentFirst(cs []controls.Control, led ledger) {
	i := slices.IndexFunc(cs, func(c controls.Control) bool { return c.Tier != "cluster" })
	if i < 0 {
		return
	}
	slices.SortStableFunc(cs[i:], func(a, b controls.Control) int {
		return led[a.ID].Compare(led[b.ID])
	})
}

// durations are the longest control run so far of each tier. The next
// control may take as long as the longest of its own kind: a cluster
// control such as ARP-07's restarts its VM four times (358 s in CI),
// while a lab control on VMs boots one or two (85-180 s), and the
// all-time longest left VLAN-14's 85 s control out of a CI run with 5
// minutes to spare. Before any of its kind ran, the longest of any.
type durations map[string]time.Duration

func (d durations) next(tier string) time.Duration {
	if t, ok := d[tier]; ok {
		return t
	}
	var longest time.Duration
	for _, t := range d {
		longest = max(longest, t)
	}
	return longest
}

// fits tells whether a control may start with spent of a --time-budget
// gone, when the longest control so far took longest: the next may take as
// long. A zero budget fits every control.
func fits(budget, spent, longest time.Duration) bool {
	return budget == 0 || spent+longest <= budget
}
