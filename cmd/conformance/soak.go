package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cozystack/vlan-conformance/framework/platform/cluster"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/timeline"
	"github.com/cozystack/vlan-conformance/framework/report"
)

// specStat is one spec's record over the soak's runs.
type specStat struct {
	Passed, Failed, Skipped int
	Seconds                 []float64
}

// soak runs the conformance run --runs times in a row, each with its own
// report dir, and reports every spec's pass count and wall time: flakes
// are measured, not hoped about. A run that leaves no JUnit counts as a
// failure of every spec.
func (d *driver) soak(ctx context.Context) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	base := filepath.Join(d.cfg.ReportDir, "soak")
	if err := os.RemoveAll(base); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	stats := map[string]*specStat{}
	var runs []string
	for i := 1; i <= d.runs && ctx.Err() == nil; i++ {
		dir := filepath.Join(base, fmt.Sprintf("run-%02d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		start := time.Now()
		code := runLogged(ctx, filepath.Join(dir, "output.txt"), self, append([]string{"run"}, soakRunArgs(d.rawArgs, dir)...)...)
		cases, err := report.ReadJUnit(filepath.Join(dir, "junit.xml"))
		line := fmt.Sprintf("run %d: exit %d, %.0f s", i, code, time.Since(start).Seconds())
		if err != nil {
			line += ", no JUnit: every spec counts as failed"
			for _, s := range stats {
				s.Failed++
			}
		}
		// A VM lane's figures against the goals, run by run: how far apart
		// the same lane lands on one machine.
		if d.cfg.Tier == "cluster" && d.cfg.Cluster.Workload == "vm" {
			if tl, err := timeline.ReadFile(filepath.Join(dir, cluster.TimelineFile)); err == nil {
				line += "; " + laneFigures(tl)
			}
		}
		fmt.Println("soak:", line)
		runs = append(runs, line)
		tally(stats, cases)
	}
	what := "the " + d.cfg.Tier + " tier"
	if d.cfg.Tier == "cluster" {
		what += " (--workload=" + d.cfg.Cluster.Workload + ")"
	}
	flaky, err := writeSoak(filepath.Join(d.cfg.ReportDir, "soak.md"), what, runs, stats)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		return 1
	}
	fmt.Printf("soak: %d runs, %d specs, %d flaky or failing; %s\n", len(runs), len(stats), flaky, filepath.Join(d.cfg.ReportDir, "soak.md"))
	if flaky > 0 || len(runs) < d.runs {
		return 1
	}
	return 0
}

// tally adds one run's specs ([It] nodes) to stats.
func tally(stats map[string]*specStat, cases []report.TestCase) {
	for _, tc := range cases {
		if !strings.HasPrefix(tc.Name, "[It]") {
			continue
		}
		s := stats[tc.Name]
		if s == nil {
			s = &specStat{}
			stats[tc.Name] = s
		}
		switch {
		case tc.Failed():
			s.Failed++
		case tc.Status == "skipped" || tc.Skipped != nil:
			s.Skipped++
			continue
		default:
			s.Passed++
		}
		s.Seconds = append(s.Seconds, tc.Time)
	}
}

// writeSoak writes the per-spec table of runs of what and returns how many
// specs failed in at least one run.
func writeSoak(path, what string, runs []string, stats map[string]*specStat) (int, error) {
	names := make([]string, 0, len(stats))
	for n := range stats {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "# Soak: %d runs of %s in a row\n\n", len(runs), what)
	for _, r := range runs {
		b.WriteString("- " + r + "\n")
	}
	b.WriteString("\n| spec | passed | failed | skipped | mean s | max s |\n|---|---|---|---|---|---|\n")
	flaky := 0
	for _, n := range names {
		s := stats[n]
		if s.Failed > 0 {
			flaky++
		}
		var sum, most float64
		for _, t := range s.Seconds {
			sum, most = sum+t, max(most, t)
		}
		mean := 0.0
		if len(s.Seconds) > 0 {
			mean = sum / float64(len(s.Seconds))
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %.1f | %.1f |\n", strings.ReplaceAll(n, "|", "\\|"), s.Passed, s.Failed, s.Skipped, mean, most)
	}
	fmt.Fprintf(&b, "\n%d of %d specs failed in at least one run.\n", flaky, len(names))
	return flaky, os.WriteFile(path, []byte(b.String()), 0o644)
}

// soakRunArgs are the soak's own arguments for one run: its report dir,
// without --runs.
func soakRunArgs(raw []string, dir string) []string {
	var out []string
	for _, a := range raw {
		if strings.HasPrefix(a, "--runs=") || strings.HasPrefix(a, "-runs=") {
			continue
		}
		out = append(out, a)
	}
	return insertBeforeDashDash(out, "--report-dir="+dir)
}

// runLogged runs a command with its output in a file and returns its exit code.
func runLogged(ctx context.Context, logPath, name string, args ...string) int {
	f, err := os.Create(logPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer f.Close()
	cmd := child(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		fmt.Fprintln(f, err)
		return 1
	}
	return 0
}
