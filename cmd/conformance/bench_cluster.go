package main

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cozystack/vlan-conformance/framework/platform/cluster"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/timeline"
	"github.com/cozystack/vlan-conformance/framework/report"
)

// Goals for the VM lane on a 2-core machine with a warm image cache (issue
// 34, "The VM lane in 15 minutes"). Printed beside the figures, never
// asserted.
const (
	goalKubeVirt = 5 * time.Minute  // KubeVirt Available, after the nodes are Ready
	goalLogin    = 60 * time.Second // first guest logged in, after KubeVirt is Available
	goalRecreate = 45 * time.Second // a re-created VM answering on the VLAN, after its delete
	goalVMLane   = 15 * time.Minute // the whole VM lane
)

// benchCluster runs the cluster tier with the flags `run` takes and prints
// when it reached each milestone, counted from the start of building the
// platform (the suite writes them: cluster.TimelineFile), the whole run's
// wall time, the machine's peak memory in use while it ran, every spec's
// wall time from the lane's JUnit and every VM boot.
func (d *driver) benchCluster(ctx context.Context) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	tlPath, junit := filepath.Join(d.cfg.ReportDir, cluster.TimelineFile), d.junitPath("all")
	// Never an earlier run's figures: run removes its JUnit only once it
	// gets that far.
	os.Remove(tlPath)
	os.Remove(junit)
	mem := sampleMemory(time.Second)
	start := time.Now()
	cmd := child(ctx, self, append([]string{"run"}, d.rawArgs...)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	runErr := cmd.Run()
	r := benchClusterRun{Workload: d.cfg.Cluster.Workload, Total: time.Since(start)}
	r.Base, r.Peak = mem.stop()

	if r.Timeline, err = timeline.ReadFile(tlPath); err != nil {
		fmt.Fprintln(os.Stderr, "bench: no milestones from the run:", err)
	}
	if r.Specs, err = report.ReadJUnit(junit); err != nil {
		fmt.Fprintln(os.Stderr, "bench: no spec times from the run:", err)
	}
	md := renderBenchCluster(r)
	fmt.Print("\n" + md)
	if err := os.WriteFile(filepath.Join(d.cfg.ReportDir, "bench-cluster.md"), []byte(md), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
	}
	if runErr != nil {
		fmt.Fprintln(os.Stderr, "bench: the cluster run failed:", runErr)
		return 1
	}
	return 0
}

// benchClusterRun is what one bench-cluster run measured.
type benchClusterRun struct {
	Workload   string            // vm or pod
	Timeline   timeline.Run      // the suite's milestones and VM boots
	Specs      []report.TestCase // the lane's JUnit, in run order
	Total      time.Duration     // driver start to exit, cluster deleted
	Base, Peak uint64            // the machine's memory in use before the run and at its peak, bytes
}

// renderBenchCluster is bench-cluster.md: the milestones and the
// re-creations against the goals, then every spec's wall time and every VM
// boot, so the next slow step shows without a profiler.
func renderBenchCluster(r benchClusterRun) string {
	marks := r.Timeline.Milestones()
	vms := r.Workload == "vm"
	at := func(name string) string {
		if s, ok := marks[name]; ok {
			return fmt.Sprintf("%.0f s", s)
		}
		if !vms && (name == timeline.KubeVirt || name == timeline.KubeVirtAPI || name == timeline.VMI || name == timeline.Login) {
			return "none in a pod run"
		}
		return "not reached"
	}
	lane := fmt.Sprintf("goal for the VM lane ≤ %s: %s", span(goalVMLane), met(r.Total <= goalVMLane))
	if !vms {
		lane = "a pod run: the VM lane's goal does not apply"
	}
	// after judges the time from one milestone to the next against a goal.
	after := func(from, to string, goal time.Duration) string {
		if !vms {
			return ""
		}
		a, okA := marks[from]
		b, okB := marks[to]
		if !okA || !okB {
			return fmt.Sprintf("goal ≤ %s after %s: not measured", span(goal), from)
		}
		gap := time.Duration((b - a) * float64(time.Second))
		return fmt.Sprintf("%.0f s after %s; goal ≤ %s: %s", gap.Seconds(), from, span(goal), met(gap <= goal))
	}
	rows := [][3]string{
		{"kind cluster created (or found)", at(timeline.Cluster), ""},
		{"nodes Ready", at(timeline.Nodes), ""},
		{"Multus rolled out", at(timeline.Multus), ""},
		{"KubeVirt Available", at(timeline.KubeVirt), after(timeline.Nodes, timeline.KubeVirt, goalKubeVirt)},
		{"virt-api's APIService Available (serial consoles reachable)", at(timeline.KubeVirtAPI), ""},
		{"first VMI Ready", at(timeline.VMI), ""},
		{"first guest logged in (serial console)", at(timeline.Login), after(timeline.KubeVirt, timeline.Login, goalLogin)},
	}
	rows = append(rows, recreations(r.Timeline.Boots, vms)...)
	rows = append(rows,
		[3]string{"specs done", at(timeline.Lane), ""},
		[3]string{"whole run (driver start to exit, cluster deleted)", fmt.Sprintf("%.0f s", r.Total.Seconds()), lane},
		[3]string{"peak memory in use on the machine", fmt.Sprintf("%d MiB", r.Peak>>20), fmt.Sprintf("%d MiB above the %d MiB in use before the run", (r.Peak-r.Base)>>20, r.Base>>20)},
	)
	var b strings.Builder
	fmt.Fprintf(&b, "# Bench: cluster tier (%s)\n\nTimes from the start of building the platform; a re-creation's from its delete.\n\n| milestone | at | against the goal |\n|---|---|---|\n", r.Workload)
	for _, row := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", row[0], row[1], row[2])
	}
	writeSpecTimes(&b, r.Specs)
	writeOrder(&b, r.Timeline.Specs)
	writeBoots(&b, r.Timeline, vms)
	return b.String()
}

// writeOrder is the containers in the order they ran, a row for each run
// of one container's specs, in seconds from the start of building the
// platform: beside the boots' table it shows what the lane waited for.
func writeOrder(b *strings.Builder, specs []timeline.Span) {
	b.WriteString("\n## Containers in the order they ran (seconds from the start of building the platform)\n\n")
	if len(specs) == 0 {
		b.WriteString("None recorded (a run from before they were, or one that ran no spec).\n")
		return
	}
	specs = slices.Clone(specs)
	slices.SortStableFunc(specs, func(x, y timeline.Span) int { return cmp.Compare(x.At, y.At) })
	b.WriteString("| container | began at | ended at | seconds | specs |\n|---|---|---|---|---|\n")
	for i := 0; i < len(specs); {
		j, end := i, specs[i].At+specs[i].Took
		for j+1 < len(specs) && specs[j+1].Container == specs[i].Container {
			j++
			end = max(end, specs[j].At+specs[j].Took)
		}
		fmt.Fprintf(b, "| %s | %.0f | %.0f | %.1f | %d |\n", cell(specs[i].Container), specs[i].At, end, end-specs[i].At, j-i+1)
		i = j + 1
	}
}

// recreations are the rows for the re-created VMs: the slowest and the
// median time from the delete to the guest logged in again, each against
// goalRecreate. A re-creation that never logged in missed it.
func recreations(boots []timeline.Boot, vms bool) [][3]string {
	const slowest, median = "slowest re-created VM (delete to guest logged in again)", "median re-created VM (delete to guest logged in again)"
	if !vms {
		return [][3]string{{slowest, "none in a pod run", ""}, {median, "none in a pod run", ""}}
	}
	var secs []float64
	lost := 0
	for _, b := range boots {
		switch {
		case b.Kind != timeline.BootRecreate:
		case b.Login == 0:
			lost++
		default:
			secs = append(secs, b.Login)
		}
	}
	goal := "goal ≤ " + span(goalRecreate)
	if len(secs)+lost == 0 {
		return [][3]string{{slowest, "none in this run", goal + ": not measured"}, {median, "none in this run", goal + ": not measured"}}
	}
	judge := func(s float64) string { return fmt.Sprintf("%s: %s", goal, met(s <= goalRecreate.Seconds())) }
	var rows [][3]string
	if lost > 0 {
		rows = append(rows, [3]string{slowest, fmt.Sprintf("%d of %d never logged in", lost, lost+len(secs)), goal + ": missed"})
	} else {
		rows = append(rows, [3]string{slowest, fmt.Sprintf("%.1f s", slices.Max(secs)), judge(slices.Max(secs))})
	}
	if len(secs) == 0 {
		return append(rows, [3]string{median, "not reached", goal + ": missed"})
	}
	slices.Sort(secs)
	m := secs[len(secs)/2]
	if len(secs)%2 == 0 {
		m = (secs[len(secs)/2-1] + m) / 2
	}
	return append(rows, [3]string{median, fmt.Sprintf("%.1f s (of %d)", m, len(secs)), judge(m)})
}

// writeSpecTimes is the table of every spec's wall time, slowest first,
// with their total.
func writeSpecTimes(b *strings.Builder, cases []report.TestCase) {
	b.WriteString("\n## Specs, slowest first (junit.xml)\n\n")
	if len(cases) == 0 {
		b.WriteString("No spec times: the run's JUnit was not read, or lists no spec.\n")
		return
	}
	cases = slices.Clone(cases)
	// Stable: specs of equal time stay in run order.
	slices.SortStableFunc(cases, func(x, y report.TestCase) int { return cmp.Compare(y.Time, x.Time) })
	total := 0.0
	b.WriteString("| spec | status | seconds |\n|---|---|---|\n")
	for _, tc := range cases {
		fmt.Fprintf(b, "| %s | %s | %.1f |\n", cell(tc.Name), tc.Status, tc.Time)
		total += tc.Time
	}
	fmt.Fprintf(b, "| **total (%d specs)** | | %.1f |\n", len(cases), total)
}

// writeBoots is the table of every VM boot in the order they began, and
// the sum of their times.
func writeBoots(b *strings.Builder, tl timeline.Run, vms bool) {
	boots := tl.Boots
	b.WriteString("\n## VM boots (seconds from the create; a re-creation's from its delete, a restart's from its request)\n\n")
	if len(boots) == 0 {
		if vms {
			b.WriteString("No VM boot recorded.\n")
		} else {
			b.WriteString("None in a pod run.\n")
		}
		return
	}
	boots = slices.Clone(boots)
	slices.SortStableFunc(boots, func(x, y timeline.Boot) int { return cmp.Compare(x.At, y.At) })
	stage := func(s float64) string {
		if s == 0 {
			return "not reached"
		}
		return fmt.Sprintf("%.1f", s)
	}
	b.WriteString("| VM | kind | began at (s) | VMI Ready | logged in | cloud-init done |\n|---|---|---|---|---|---|\n")
	for _, bt := range boots {
		fmt.Fprintf(b, "| %s | %s | %.0f | %s | %s | %s |\n", cell(bt.VM), bt.Kind, bt.At, stage(bt.VMI), stage(bt.Login), stage(bt.CloudInit))
	}
	fmt.Fprintf(b, "\nSum of boot time: %s.\n", bootTime(boots, tl.SideBySide))
}

// bootTime sums the boots' times (each to the last stage it reached) and
// says what they alone take of the lane at most slots at a time (as the
// run recorded it; 0 from a run that did not): under
// TCG a boot keeps a core busy, so the lane cannot end sooner than that
// however its specs are ordered; the rest of it is what specs do between
// boots.
func bootTime(boots []timeline.Boot, slots int) string {
	sum := 0.0
	for _, bt := range boots {
		sum += bt.Took()
	}
	text := fmt.Sprintf("%.1f s over %d boots (each to the last stage it reached)", sum, len(boots))
	if slots == 0 {
		return text + "; how many booted at once was not recorded"
	}
	return text + fmt.Sprintf("; at most %d at once, the boots alone take at least %.0f s of the lane", slots, sum/float64(slots))
}

// laneFigures is a VM lane's figures from its timeline, in one line for
// a soak's list of runs: when its specs were done against the lane's
// goal, the first login after KubeVirt, the re-creations, the boots.
func laneFigures(tl timeline.Run) string {
	marks := tl.Milestones()
	var parts []string
	if s, ok := marks[timeline.Lane]; ok {
		parts = append(parts, fmt.Sprintf("specs done at %.0f s (goal for the VM lane ≤ %s: %s)", s, span(goalVMLane), met(s <= goalVMLane.Seconds())))
	} else {
		parts = append(parts, "its specs never ended")
	}
	if k, ok := marks[timeline.KubeVirt]; ok {
		if l, ok := marks[timeline.Login]; ok {
			parts = append(parts, fmt.Sprintf("first login %.0f s after KubeVirt (goal ≤ %s: %s)", l-k, span(goalLogin), met(l-k <= goalLogin.Seconds())))
		}
	}
	rows := recreations(tl.Boots, true)
	parts = append(parts, fmt.Sprintf("re-created VMs: median %s, slowest %s (goal ≤ %s)", rows[1][1], rows[0][1], span(goalRecreate)))
	if len(tl.Boots) > 0 {
		parts = append(parts, bootTime(tl.Boots, tl.SideBySide))
	}
	return strings.Join(parts, "; ")
}

// cell keeps a table cell's text from ending the cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// span prints a goal as the issue states it.
func span(d time.Duration) string {
	if d < 2*time.Minute {
		return fmt.Sprintf("%.0f s", d.Seconds())
	}
	return fmt.Sprintf("%.0f min", d.Minutes())
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

// memSampler records the machine's memory in use (MemTotal - MemAvailable):
// the kind nodes, KubeVirt and the QEMU guests run in containers outside
// this process tree, so the machine's figure is the one that counts.
type memSampler struct {
	done chan struct{}
	out  chan [2]uint64
}

func sampleMemory(every time.Duration) *memSampler {
	m := &memSampler{done: make(chan struct{}), out: make(chan [2]uint64, 1)}
	go func() {
		base, _ := memInUse()
		peak := base
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-m.done:
				m.out <- [2]uint64{base, peak}
				return
			case <-t.C:
				if v, err := memInUse(); err == nil && v > peak {
					peak = v
				}
			}
		}
	}()
	return m
}

// stop returns the memory in use when sampling began and its peak, in bytes.
func (m *memSampler) stop() (base, peak uint64) {
	close(m.done)
	r := <-m.out
	return r[0], r[1]
}

func memInUse() (uint64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	kb := map[string]uint64{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 2 {
			v, _ := strconv.ParseUint(fields[1], 10, 64)
			kb[strings.TrimSuffix(fields[0], ":")] = v
		}
	}
	if kb["MemTotal"] == 0 {
		return 0, fmt.Errorf("/proc/meminfo: no MemTotal")
	}
	return (kb["MemTotal"] - kb["MemAvailable"]) << 10, nil
}
