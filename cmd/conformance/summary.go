package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/report"
)

// failureSummaryLines is how much of the report's failures section a CI
// log ends with: enough to say why, short enough to stay the log's end.
const failureSummaryLines = 60

// trunkSuffix ends the counts of a lane whose report has the access-mode
// trunk row: br100 enslaved the uplink itself.
const trunkSuffix = " (on an access-mode trunk: uplink in br100, no uplink.100 on this kernel; the tag claims skipped)"

// summary is `conformance summary LABEL JUNIT`: the line a CI lane's log
// ends with, "LABEL: N passed, N failed, N skipped", counted from the
// JUnit's specs, then the failures section of the report beside it
// (conformance.md), so that the end of a long log says why. A missing or
// empty JUnit is a lane that did not report, said as such (exit 1).
func summary(w io.Writer, args []string) int {
	if len(args) != 2 {
		fmt.Fprintf(os.Stderr, "conformance summary: %q: want LABEL JUNIT\n", args)
		return config.ExitBadInput
	}
	label, junit := args[0], args[1]
	if fi, err := os.Stat(junit); err != nil || fi.Size() == 0 {
		fmt.Fprintf(w, "%s: NOT RUN: no JUnit at %s\n", label, junit)
		return 1
	}
	cases, err := report.ReadJUnit(junit)
	if err != nil {
		// A truncated file is no count of zero specs.
		fmt.Fprintf(w, "%s: NOT RUN: unreadable JUnit: %v\n", label, err)
		return 1
	}
	var passed, failed, skipped int
	for _, tc := range cases {
		// Specs only: Ginkgo's suite nodes ([BeforeSuite] and the like)
		// are testcases too, and would inflate the counts.
		if !strings.HasPrefix(tc.Name, "[It]") {
			continue
		}
		switch tc.Status {
		case "passed":
			passed++
		case "failed", "panicked", "timedout", "interrupted", "aborted":
			failed++
		case "skipped", "pending":
			skipped++
		}
	}
	// A missing report only loses the suffix and the failures.
	md, _ := os.ReadFile(filepath.Join(filepath.Dir(junit), "conformance.md"))
	lines := strings.SplitAfter(string(md), "\n")
	trunk, failures := "", -1
	for i, l := range lines {
		if strings.HasPrefix(l, report.AccessTrunkRow) {
			trunk = trunkSuffix
		}
		if failures < 0 && strings.TrimSuffix(l, "\n") == report.FailuresHeading {
			failures = i
		}
	}
	fmt.Fprintf(w, "%s: %d passed, %d failed, %d skipped%s\n", label, passed, failed, skipped, trunk)
	if failures >= 0 {
		section := lines[failures:]
		if len(section) > failureSummaryLines {
			section = section[:failureSummaryLines]
		}
		fmt.Fprint(w, strings.Join(section, ""))
	}
	return 0
}
