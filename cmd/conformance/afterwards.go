package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/report"
)

// afterwards judges a cluster selftest's controls by the run made on the
// same cluster after them (`selftest --afterwards=later`): each control's
// claim must pass there, showing that no control's breakage outlived its
// run. .ci/run runs the controls before the VM lane, so the lane itself is
// that run, and the controls' claims are not run a second time for it.
// It fills the afterwards column of SELFTEST_DIR's selftest.json and .md.
func afterwards(w io.Writer, args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: conformance afterwards SELFTEST_DIR JUNIT  (SELFTEST_DIR: a cluster selftest's --report-dir; JUNIT: a run on the same cluster after it)")
		return config.ExitBadInput
	}
	dir, junit := args[0], args[1]
	var outcomes []report.ControlOutcome
	b, err := os.ReadFile(filepath.Join(dir, "selftest.json"))
	if err == nil {
		err = json.Unmarshal(b, &outcomes)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "afterwards: %s holds no selftest outcomes: %v\n", dir, err)
		return config.ExitBadInput
	}
	cases, err := report.ReadJUnit(junit)
	fmt.Fprintf(w, "selftest: after the controls, the run on the same cluster (%s):\n", junit)
	for _, l := range report.JudgeAfterwards(outcomes, cases, err) {
		fmt.Fprintf(w, "  %s\n", l)
	}
	if err := report.WriteSelftest(dir, outcomes); err != nil {
		fmt.Fprintln(os.Stderr, "afterwards:", err)
		return 1
	}
	code := 0
	for _, o := range outcomes {
		if o.AfterwardsFailed {
			fmt.Fprintf(w, "selftest: NOT PASSING AGAIN after the controls %s: %s %s\n", o.Control, o.Claim, o.Afterwards)
			code = 1
		}
	}
	return code
}
