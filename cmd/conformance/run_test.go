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
		{"native", "", "stager"},
		{"labvm", "", "!stager"},
		{"labvm", "VLAN-01 || ARP-03", "(VLAN-01 || ARP-03) && !stager"},
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
	if err := mergeJUnit(out, native, lab); err != nil {
		t.Fatal(err)
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
