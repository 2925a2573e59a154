// Package report turns a run's JUnit file into the conformance report (a
// table claim -> guide sentence -> verdict -> evidence) and records the
// negative controls' outcome (selftest.json / selftest.md).
package report

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/cozystack/vlan-conformance/framework/claims"
)

// TestCase is one Ginkgo spec as the JUnit report has it.
type TestCase struct {
	Name    string  `xml:"name,attr"`
	Status  string  `xml:"status,attr"`
	Time    float64 `xml:"time,attr"`
	Failure *struct {
		Message string `xml:"message,attr"`
		Text    string `xml:",chardata"`
	} `xml:"failure"`
	Error *struct {
		Message string `xml:"message,attr"`
	} `xml:"error"`
	Skipped *struct {
		Message string `xml:"message,attr"`
	} `xml:"skipped"`
}

// Failed reports whether the spec failed (an assertion, a panic or a timeout).
func (t TestCase) Failed() bool {
	return t.Failure != nil || t.Error != nil || t.Status == "failed" || t.Status == "panicked" || t.Status == "timedout"
}

type junit struct {
	Suites []struct {
		Cases []TestCase `xml:"testcase"`
	} `xml:"testsuite"`
}

// ReadJUnit returns the spec test cases of a Ginkgo JUnit file (suite
// nodes such as BeforeSuite are kept: their failure matters too).
func ReadJUnit(path string) ([]TestCase, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var j junit
	if err := xml.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []TestCase
	for _, s := range j.Suites {
		out = append(out, s.Cases...)
	}
	return out, nil
}

var idRE = regexp.MustCompile(`\[((?:VLAN|STG|ARP)-\d\d)\]`)

// ClaimIDs lists the claim IDs a test case names in brackets.
func ClaimIDs(name string) []string {
	var ids []string
	for _, m := range idRE.FindAllStringSubmatch(name, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// Verdict of one claim.
type Verdict struct {
	Claim    claims.Claim
	Verdict  string // passed, FAILED, skipped, not run
	Passed   int
	Failed   int
	Skipped  int
	Reason   string // first failure or skip message
	Evidence string // artifacts dir, relative to the report dir, if any
}

// Verdicts maps every claim of the catalogue to its verdict in cases.
func Verdicts(cases []TestCase, reportDir string) []Verdict {
	var out []Verdict
	for _, c := range claims.All {
		v := Verdict{Claim: c, Verdict: "not run"}
		var failure, skip string
		for _, tc := range cases {
			if !contains(ClaimIDs(tc.Name), c.ID) {
				continue
			}
			switch {
			case tc.Failed():
				v.Failed++
				if failure == "" && tc.Failure != nil {
					failure = firstLine(tc.Failure.Message)
				}
			case tc.Status == "skipped" || tc.Skipped != nil:
				v.Skipped++
				if tc.Skipped != nil && (skip == "" || strings.Contains(skip, "Skip() was called")) {
					skip = strings.TrimPrefix(firstLine(tc.Skipped.Message), "skipped - ")
				}
			default:
				v.Passed++
			}
		}
		switch {
		case v.Failed > 0:
			v.Verdict, v.Reason = "FAILED", failure
		case v.Passed > 0:
			v.Verdict = "passed"
			if v.Skipped > 0 {
				v.Reason = fmt.Sprintf("%d of its specs skipped: %s", v.Skipped, skip)
			}
		case v.Skipped > 0:
			v.Verdict, v.Reason = "skipped", skip
		}
		if c.Tier == "cluster" && v.Verdict == "not run" {
			v.Reason = "cluster tier only"
		}
		dir := filepath.Join("artifacts", c.ID)
		if _, err := os.Stat(filepath.Join(reportDir, dir)); err == nil {
			v.Evidence = dir + "/"
		}
		out = append(out, v)
	}
	return out
}

// Environment describes where a run happened.
type Environment struct {
	Tier, Kernel, Plugins, Control, Where string
	// BrokenParts says which parts of the run wrote no JUnit: their specs
	// have no verdict in this report, and the run failed.
	BrokenParts []string
}

// WriteConformance writes conformance.md from the verdicts.
func WriteConformance(path string, env Environment, vs []Verdict) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Conformance report: KubeVirt VMs on an external VLAN\n\n")
	fmt.Fprintf(&b, "| | |\n|---|---|\n| date | %s |\n| tier | %s |\n| kernel | %s |\n| CNI plugins | %s |\n| ran | %s |\n",
		time.Now().UTC().Format(time.RFC3339), env.Tier, env.Kernel, env.Plugins, env.Where)
	if env.Control != "" {
		fmt.Fprintf(&b, "| negative control | %s |\n", env.Control)
	}
	for _, p := range env.BrokenParts {
		fmt.Fprintf(&b, "| **failed part** | %s |\n", p)
	}
	fmt.Fprintf(&b, "\n| claim | guide | verdict | specs (pass/fail/skip) | evidence |\n|---|---|---|---|---|\n")
	for _, v := range vs {
		verdict := v.Verdict
		if v.Reason != "" {
			verdict += ": " + strings.ReplaceAll(v.Reason, "|", "\\|")
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d/%d/%d | %s |\n", v.Claim.ID, strings.ReplaceAll(v.Claim.Sentence, "|", "\\|"), verdict, v.Passed, v.Failed, v.Skipped, v.Evidence)
	}
	b.WriteString("\nEvidence paths are relative to this file. Failed specs also leave `failure-*/` dumps of every namespace (ip a/link/route/neigh, bridge fdb).\n")
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// ControlOutcome is one negative control's record in selftest.json.
type ControlOutcome struct {
	Claim       string   `json:"claim"`
	Control     string   `json:"control"`
	Description string   `json:"description"`
	SpecFailed  bool     `json:"spec_failed"`
	FailedSpecs []string `json:"failed_specs,omitempty"`
	ExitCode    int      `json:"exit_code"`
	Seconds     float64  `json:"seconds"`
	Note        string   `json:"note,omitempty"`
}

// WriteSelftest writes selftest.json and selftest.md.
func WriteSelftest(dir string, outcomes []ControlOutcome) error {
	sort.SliceStable(outcomes, func(i, j int) bool { return outcomes[i].Control < outcomes[j].Control })
	b, err := json.MarshalIndent(outcomes, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "selftest.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	var m strings.Builder
	m.WriteString("# Negative controls\n\nEach control runs its claim's specs against a deliberately broken subject; the spec must FAIL.\n\n")
	m.WriteString("| claim | control | broken subject | spec failed | failing spec |\n|---|---|---|---|---|\n")
	for _, o := range outcomes {
		verdict := "yes"
		if !o.SpecFailed {
			verdict = "**NO: control not caught**"
		}
		spec := strings.Join(o.FailedSpecs, "; ")
		if o.Note != "" {
			spec += " (" + o.Note + ")"
		}
		fmt.Fprintf(&m, "| %s | %s | %s | %s | %s |\n", o.Claim, o.Control, o.Description, verdict, strings.ReplaceAll(spec, "|", "\\|"))
	}
	return os.WriteFile(filepath.Join(dir, "selftest.md"), []byte(m.String()), 0o644)
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return s
}
