package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/report"
)

// A run after the controls on the same cluster judges each control's
// claim: one whose spec passed there passed again, one whose spec failed
// did not, and the command fails for it; the selftest report carries both.
func TestAfterwardsJudgesTheControlsByTheRunAfterThem(t *testing.T) {
	dir := t.TempDir()
	outcomes := []report.ControlOutcome{
		{Claim: "VLAN-01", Control: "VLAN-01/no-vlan-subinterface", Verdict: report.Caught, SpecFailed: true},
		{Claim: "VLAN-03", Control: "VLAN-03/macvlan-passthru", Verdict: report.Caught, SpecFailed: true},
	}
	if err := report.WriteSelftest(dir, outcomes); err != nil {
		t.Fatal(err)
	}
	junit := filepath.Join(dir, "lane.xml")
	lane := `<?xml version="1.0" encoding="UTF-8"?>
<testsuites><testsuite name="VLAN conformance" tests="2">
<testcase name="[SynchronizedBeforeSuite]" status="passed"></testcase>
<testcase name="[It] Bridged VMs [VLAN-01] reach the gateway [cluster, claim:VLAN-01]" status="passed"></testcase>
<testcase name="[It] A macvlan VM [VLAN-03] gets no reply [cluster, claim:VLAN-03]" status="failed"><failure message="vm-mv got 3/3 replies" type="failed">vm-mv got 3/3 replies</failure></testcase>
</testsuite></testsuites>`
	if err := os.WriteFile(junit, []byte(lane), 0o644); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if code := afterwards(&out, []string{dir, junit}); code != 1 {
		t.Errorf("exit %d, want 1 (VLAN-03 did not pass again)", code)
	}
	for _, want := range []string{
		"  VLAN-01: passed again without a control (1 spec(s))\n",
		"selftest: NOT PASSING AGAIN after the controls VLAN-03/macvlan-passthru: VLAN-03 FAILED without a control",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	md, err := os.ReadFile(filepath.Join(dir, "selftest.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "after the controls, on the same cluster: passed again") {
		t.Errorf("selftest.md lacks VLAN-01's afterwards:\n%s", md)
	}
}

// Without a selftest's outcomes, or with the wrong arguments, there is
// nothing to judge: bad input.
func TestAfterwardsWithoutOutcomesIsBadInput(t *testing.T) {
	for _, args := range [][]string{{t.TempDir(), "junit.xml"}, {"only-one"}} {
		var out strings.Builder
		if code := afterwards(&out, args); code != config.ExitBadInput {
			t.Errorf("%q: exit %d, want %d", args, code, config.ExitBadInput)
		}
	}
}
