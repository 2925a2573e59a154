package report

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// How a negative control's run is judged (selftest).
const (
	Caught     = "caught"
	BrokeSetup = "control broke the setup"
	NotCaught  = "not caught"
)

// Judgement is the verdict on one control's run.
type Judgement struct {
	Verdict     string   // Caught, BrokeSetup or NotCaught
	Matched     string   // the failure message that matched the control's expectation
	FailedSpecs []string // the claim's specs caught by the rule
	Note        string   // why it was not caught, if it was not
}

// Ginkgo's JUnit failure text ends with the node the failure happened in.
var failedInRE = regexp.MustCompile(`In \[(\w+)\] at:`)

// Judge applies the rule: a control is caught only if its claim's own It
// failed, as an assertion (not a panic or a timeout), in the It itself
// (not in BeforeAll or another setup node), with a failure message that
// contains want. Anything else that failed is the control breaking the setup.
func Judge(cases []TestCase, claim, want string) Judgement {
	j := Judgement{Verdict: NotCaught}
	var setup, other []string
	for _, tc := range cases {
		if !tc.Failed() {
			continue
		}
		msg := tc.message()
		if !strings.HasPrefix(tc.Name, "[It]") {
			setup = append(setup, fmt.Sprintf("%s failed: %s", tc.Name, firstLine(msg)))
			continue
		}
		if !slices.Contains(ClaimIDs(tc.Name), claim) {
			continue
		}
		node := ""
		if tc.Failure != nil {
			if m := failedInRE.FindAllStringSubmatch(tc.Failure.Text, -1); m != nil {
				node = m[len(m)-1][1]
			}
		}
		switch {
		case tc.Status == "panicked":
			setup = append(setup, "panicked: "+firstLine(msg))
		case tc.Status == "timedout" || tc.Status == "interrupted":
			setup = append(setup, tc.Status+": "+firstLine(msg))
		case node != "It":
			setup = append(setup, fmt.Sprintf("failed in [%s]: %s", node, firstLine(msg)))
		case want == "" || !strings.Contains(msg, want):
			other = append(other, "failed for another reason: "+firstLine(msg))
		default:
			j.FailedSpecs = append(j.FailedSpecs, tc.Name)
			if j.Matched == "" {
				j.Matched = matchedLine(msg, want)
			}
		}
	}
	switch {
	case len(j.FailedSpecs) > 0:
		j.Verdict = Caught
	case len(setup) > 0:
		j.Verdict, j.Note = BrokeSetup, strings.Join(setup, "; ")
	case len(other) > 0:
		j.Note = strings.Join(other, "; ")
	default:
		j.Note = "no spec of " + claim + " failed"
	}
	return j
}

// message is the failure (or error) message of a failed case.
func (t TestCase) message() string {
	switch {
	case t.Failure != nil:
		return t.Failure.Message
	case t.Error != nil:
		return t.Error.Message
	}
	return ""
}

// matchedLine is the line of msg that holds want, for the report.
func matchedLine(msg, want string) string {
	for _, l := range strings.Split(msg, "\n") {
		if strings.Contains(l, want) {
			return firstLine(l)
		}
	}
	return firstLine(msg)
}

// PassesAgain tells whether claim's specs passed in a run without any
// control after the controls had run on the same cluster: at least one of
// its Its passed and none of them, nor any setup node, failed. It shows a
// control's breakage did not outlive its run. what says what the run
// gave, for the report.
func PassesAgain(cases []TestCase, claim string) (ok bool, what string) {
	passed := 0
	var failed []string
	for _, tc := range cases {
		switch {
		case !strings.HasPrefix(tc.Name, "[It]"):
			if tc.Failed() {
				failed = append(failed, fmt.Sprintf("%s failed: %s", tc.Name, firstLine(tc.message())))
			}
		case !slices.Contains(ClaimIDs(tc.Name), claim):
		case tc.Failed():
			failed = append(failed, fmt.Sprintf("%s failed: %s", tc.Name, firstLine(tc.message())))
		case tc.Skipped == nil && tc.Status != "skipped":
			passed++
		}
	}
	switch {
	case len(failed) > 0:
		return false, "FAILED without a control: " + strings.Join(failed, "; ")
	case passed == 0:
		return false, "no spec of " + claim + " passed without a control"
	}
	return true, fmt.Sprintf("passed again without a control (%d spec(s))", passed)
}

// JudgeAfterwards records in each control's outcome whether its claim
// passed again (PassesAgain) in cases: a run without any control made on
// the same cluster after the controls. err is why that run left no cases.
// It returns one line per claim, for the log.
func JudgeAfterwards(outcomes []ControlOutcome, cases []TestCase, err error) []string {
	var lines []string
	seen := map[string]bool{}
	for i := range outcomes {
		id := outcomes[i].Claim
		ok, what := PassesAgain(cases, id)
		if err != nil {
			ok, what = false, "no JUnit: "+err.Error()
		}
		outcomes[i].Afterwards, outcomes[i].AfterwardsFailed = what, !ok
		if !seen[id] {
			seen[id] = true
			lines = append(lines, id+": "+what)
		}
	}
	return lines
}
