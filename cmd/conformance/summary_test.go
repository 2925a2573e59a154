package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cozystack/vlan-conformance/framework/report"
)

// laneDir is a lane's report dir holding testdata/summary/junit.xml: 2
// passed, 5 failed (failed, panicked, timedout, interrupted, aborted) and 2
// skipped (skipped, pending) specs, among suite nodes of every status.
func laneDir(t *testing.T) (dir, junit string) {
	t.Helper()
	b, err := os.ReadFile("testdata/summary/junit.xml")
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	junit = filepath.Join(dir, "junit.xml")
	if err := os.WriteFile(junit, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, junit
}

// The counts are of Ginkgo's "[It]" specs only, by status; without a
// report beside the JUnit they are the whole summary.
func TestSummaryCountsSpecsNotSuiteNodes(t *testing.T) {
	_, junit := laneDir(t)
	var b strings.Builder
	if code := summary(&b, []string{"offline cluster lane (pod)", junit}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if want := "offline cluster lane (pod): 2 passed, 5 failed, 2 skipped\n"; b.String() != want {
		t.Errorf("got %q, want %q (suite nodes are not specs)", b.String(), want)
	}
}

// A report that says the trunk was untagged (as WriteConformance writes
// it) adds the access-mode suffix; its failures section follows the line.
// Without the row there is no suffix.
func TestSummaryTrunkSuffixAndFailures(t *testing.T) {
	dir, junit := laneDir(t)
	md := filepath.Join(dir, "conformance.md")
	fails := []report.Failure{{Name: "[It] Bridged VMs on the VLAN [VLAN-03] keep their MTU", Message: "MTU 1400, want 1500"}}
	if err := report.WriteConformance(md, report.Environment{Tier: "cluster", AccessTrunk: "no 8021q module"}, nil, fails); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if code := summary(&b, []string{"lane (vm)", junit}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	want := "lane (vm): 2 passed, 5 failed, 2 skipped (on an access-mode trunk: uplink in br100, no uplink.100 on this kernel; the tag claims skipped)\n" +
		"## Failures\n\n### [It] Bridged VMs on the VLAN [VLAN-03] keep their MTU\n\n```\nMTU 1400, want 1500\n```\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}

	if err := report.WriteConformance(md, report.Environment{Tier: "cluster"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	b.Reset()
	summary(&b, []string{"lane (vm)", junit})
	if want := "lane (vm): 2 passed, 5 failed, 2 skipped\n"; b.String() != want {
		t.Errorf("a tagged trunk, no failures: got %q, want %q", b.String(), want)
	}
}

// The failures section starts at the line that is exactly the heading and
// is cut at 60 lines, the heading included.
func TestSummaryFailuresCutAt60Lines(t *testing.T) {
	dir, junit := laneDir(t)
	var md strings.Builder
	md.WriteString("# Conformance report\n\n| tier | cluster |\n\n## Failures of old\n\nnot the section\n\n## Failures\n")
	for i := 1; i <= 100; i++ {
		fmt.Fprintf(&md, "line %d\n", i)
	}
	if err := os.WriteFile(filepath.Join(dir, "conformance.md"), []byte(md.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if code := summary(&b, []string{"lane", junit}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	got := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(got) != 1+60 {
		t.Fatalf("%d lines, want the count line and 60 of the section:\n%s", len(got), b.String())
	}
	if got[0] != "lane: 2 passed, 5 failed, 2 skipped" || got[1] != "## Failures" || got[2] != "line 1" || got[60] != "line 59" {
		t.Errorf("got lines %q, %q, %q ... %q", got[0], got[1], got[2], got[60])
	}
}

// A lane without a JUnit, or with an empty one, did not report: one line
// says so, and the exit code is 1. A summary without its two arguments
// is bad input.
func TestSummaryMissingJUnit(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.xml")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, junit := range []string{filepath.Join(dir, "junit.xml"), empty} {
		var b strings.Builder
		if code := summary(&b, []string{"offline cluster lane (vm)", junit}); code != 1 {
			t.Errorf("%s: exit %d, want 1", junit, code)
		}
		if want := "offline cluster lane (vm): NOT RUN: no JUnit at " + junit + "\n"; b.String() != want {
			t.Errorf("got %q, want %q", b.String(), want)
		}
	}
	truncated := filepath.Join(dir, "truncated.xml")
	if err := os.WriteFile(truncated, []byte(`<testsuites><testsuite><testcase name="[It] a" status="passed">`), 0o644); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if code := summary(&b, []string{"lane", truncated}); code != 1 || !strings.HasPrefix(b.String(), "lane: NOT RUN: unreadable JUnit: ") {
		t.Errorf("a truncated JUnit: exit %d, %q", code, b.String())
	}
	os.Args = []string{"conformance", "summary", "lane"}
	if code := mainCode(); code != 2 {
		t.Errorf("summary LABEL without JUNIT: exit %d, want 2", code)
	}
}
