package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cozystack/vlan-conformance/framework/report"
)

func TestLabelFilterCombinesTheUsersFilter(t *testing.T) {
	for _, tc := range []struct{ part, user, want string }{
		{"all", "", ""},
		{"all", "VLAN-01", "VLAN-01"},
		{"native", "", "native"},
		{"labvm", "", "!native"},
		{"labvm", "VLAN-01 || ARP-03", "(VLAN-01 || ARP-03) && !native"},
	} {
		if got := labelFilter(tc.part, tc.user); got != tc.want {
			t.Errorf("labelFilter(%q, %q) = %q, want %q", tc.part, tc.user, got, tc.want)
		}
	}
	rest, f := splitLabelFilter([]string{"--ginkgo.v", "--ginkgo.label-filter=VLAN-03", "--ginkgo.no-color"})
	if f != "VLAN-03" || strings.Join(rest, " ") != "--ginkgo.v --ginkgo.no-color" {
		t.Errorf("splitLabelFilter: %q %q", rest, f)
	}
}

// Each spec appears once in the merged JUnit: where it ran, not where the
// part's filter left it out.
func TestMergeJUnitKeepsEachSpecOnce(t *testing.T) {
	dir := t.TempDir()
	write := func(name, cases string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(`<?xml version="1.0"?><testsuites tests="2"><testsuite name="s">`+cases+`</testsuite></testsuites>`), 0o644)
		return p
	}
	ran := `<testcase name="[It] a [STG-01]" status="passed" time="1"></testcase>`
	filtered := `<testcase name="[It] b [VLAN-01]" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>`
	skipped := `<testcase name="[It] c [VLAN-08]" status="skipped" time="0"><skipped message="skipped - vendor mode"></skipped></testcase>`
	native := write("n.xml", ran+filtered)
	lab := write("l.xml", `<testcase name="[It] b [VLAN-01]" status="passed" time="2"></testcase>`+skipped+
		`<testcase name="[It] a [STG-01]" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>`)
	out := filepath.Join(dir, "junit.xml")
	if missing, err := mergeJUnit(out, native, lab); err != nil || missing != nil {
		t.Fatal(missing, err)
	}
	cases, err := report.ReadJUnit(out)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cases {
		got = append(got, c.Name+"="+c.Status)
	}
	want := "[It] a [STG-01]=passed [It] b [VLAN-01]=passed [It] c [VLAN-08]=skipped"
	if strings.Join(got, " ") != want {
		t.Errorf("merged: %q\nwant %q", strings.Join(got, " "), want)
	}
}

// A spec no part ran (an interrupt or a deadline skips it as bare
// "skipped", as a filter does) is kept once, so its claim still shows.
func TestMergeJUnitKeepsASpecNoPartRan(t *testing.T) {
	dir := t.TempDir()
	bare := `<testcase name="[It] d [ARP-03]" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>`
	var parts []string
	for _, n := range []string{"n.xml", "l.xml"} {
		p := filepath.Join(dir, n)
		os.WriteFile(p, []byte(`<testsuites><testsuite name="s">`+bare+`</testsuite></testsuites>`), 0o644)
		parts = append(parts, p)
	}
	out := filepath.Join(dir, "junit.xml")
	if _, err := mergeJUnit(out, parts...); err != nil {
		t.Fatal(err)
	}
	cases, err := report.ReadJUnit(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) != 1 || cases[0].Name != "[It] d [ARP-03]" {
		t.Errorf("merged %v, want the spec once", cases)
	}
}

// --report-dir and --work-dir outside the checkout are shared with the lab
// VM (created if missing); those inside it, or inside one another, are not
// shared twice.
func TestVMSharesCoverDirsOutsideTheCheckout(t *testing.T) {
	wd, out := t.TempDir(), t.TempDir()
	got, err := vmShares(wd, "reports", filepath.Join(out, "x"), filepath.Join(out, "x", "work"), "", filepath.Join(wd, "w"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Join(out, "x")}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("vmShares = %q, want %q", got, want)
	}
	for _, d := range []string{filepath.Join(wd, "reports"), filepath.Join(out, "x", "work")} {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			t.Errorf("%s not created: %v", d, err)
		}
	}
}

// A part that wrote no JUnit is reported missing, never read from an
// earlier run's file, and the other part's verdicts still count.
func TestMergeJUnitReportsAMissingPart(t *testing.T) {
	dir := t.TempDir()
	native := filepath.Join(dir, "junit-native.xml")
	os.WriteFile(native, []byte(`<testsuites><testsuite name="s"><testcase name="[It] a [STG-01]" status="passed"></testcase></testsuite></testsuites>`), 0o644)
	lab := filepath.Join(dir, "junit-labvm.xml")
	out := filepath.Join(dir, "junit.xml")
	missing, err := mergeJUnit(out, native, lab)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) != 1 || missing[0] != lab {
		t.Errorf("missing = %q, want [%s]", missing, lab)
	}
	cases, err := report.ReadJUnit(out)
	if err != nil || len(cases) != 1 {
		t.Errorf("merged cases %v, %v: want the native part's one spec", cases, err)
	}
}

// The soak counts each spec's outcomes over its runs; a spec that failed in
// any run is counted as flaky or failing.
func TestSoakTalliesEachSpec(t *testing.T) {
	stats := map[string]*specStat{}
	run := func(status string) []report.TestCase {
		return []report.TestCase{{Name: "[It] a [VLAN-01]", Status: "passed", Time: 1}, {Name: "[It] b [VLAN-02]", Status: status, Time: 3}, {Name: "[BeforeSuite]", Status: "passed"}}
	}
	tally(stats, run("passed"))
	tally(stats, run("failed"))
	out := filepath.Join(t.TempDir(), "soak.md")
	flaky, err := writeSoak(out, "the cluster tier (--workload=vm)", []string{"run 1", "run 2"}, stats)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(out); err != nil || !strings.HasPrefix(string(b), "# Soak: 2 runs of the cluster tier (--workload=vm) in a row\n") {
		t.Errorf("soak.md begins %.60q (%v), want it to say what ran", b, err)
	}
	if flaky != 1 || len(stats) != 2 || stats["[It] a [VLAN-01]"].Passed != 2 || stats["[It] b [VLAN-02]"].Failed != 1 {
		t.Errorf("flaky %d, stats %+v", flaky, stats)
	}
	if got := soakRunArgs([]string{"--runs=3", "--vlan=100", "--", "--ginkgo.v"}, "/r"); strings.Join(got, " ") != "--vlan=100 --report-dir=/r -- --ginkgo.v" {
		t.Errorf("soakRunArgs: %q", got)
	}
}
