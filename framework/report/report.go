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
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cozystack/vlan-conformance/framework/claims"
	"github.com/cozystack/vlan-conformance/framework/evidence"
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
	// Entries are the spec's report entries (Ginkgo's AddReportEntry),
	// which its JUnit carries as properties: their names mark what a
	// spec's messages only describe (NotObservableEntry).
	Entries *struct {
		Property []struct {
			Name string `xml:"name,attr"`
		} `xml:"property"`
	} `xml:"properties"`
}

// NotObservableEntry names the report entry a spec adds when it skips
// because its platform cannot observe what it needs
// (evidence.ErrNotObservable; suites/skip): the report counts those skips
// by it, not by the words of their messages.
const NotObservableEntry = "not observable"

// has tells whether the spec added a report entry of that name.
func (t TestCase) has(entry string) bool {
	if t.Entries == nil {
		return false
	}
	for _, p := range t.Entries.Property {
		if p.Name == entry {
			return true
		}
	}
	return false
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

// ClaimIDs lists the claim IDs a test case names in brackets.
func ClaimIDs(name string) []string { return claims.IDs(name) }

// Verdict of one claim.
type Verdict struct {
	Claim   claims.Claim
	Verdict string // passed, FAILED, skipped, not run
	Passed  int
	Failed  int
	Skipped int
	// NotObservable counts the skipped specs whose platform could not see
	// what they need (evidence.ErrNotObservable): a vendor's gateway, a
	// node the API does not show.
	NotObservable int
	Reason        string // first failure or skip message
	Evidence      string // artifacts dir, relative to the report dir, if any
}

// Failure is a failed case: its name and the start of its message.
type Failure struct{ Name, Message string }

// failureLines is how much of a failure message a report keeps: Gomega
// puts the description and the error first, then dumps the error's struct.
const failureLines = 15

// Failures lists the failed cases in run order, suite nodes included: a
// failed BeforeSuite names no claim, yet it is why every claim did not run.
func Failures(cases []TestCase) []Failure {
	var out []Failure
	for _, tc := range cases {
		if !tc.Failed() {
			continue
		}
		lines := strings.Split(strings.TrimSpace(tc.message()), "\n")
		if len(lines) > failureLines {
			lines = append(lines[:failureLines], fmt.Sprintf("... (%d more lines in the JUnit)", len(lines)-failureLines))
		}
		out = append(out, Failure{Name: tc.Name, Message: strings.Join(lines, "\n")})
	}
	return out
}

// suiteFailure is the first failed case that names no claim (BeforeSuite
// and the like), as "NAME failed: first line", or "".
func suiteFailure(cases []TestCase) string {
	for _, tc := range cases {
		if tc.Failed() && len(ClaimIDs(tc.Name)) == 0 {
			return tc.Name + " failed: " + firstLine(tc.message())
		}
	}
	return ""
}

// Verdicts maps every claim of the catalogue to its verdict in cases.
func Verdicts(cases []TestCase, reportDir string) []Verdict {
	reasons := containerSkips(cases)
	suite := suiteFailure(cases)
	var out []Verdict
	for _, c := range claims.All {
		v := Verdict{Claim: c, Verdict: "not run"}
		var failure, skip string
		for _, tc := range cases {
			if !slices.Contains(ClaimIDs(tc.Name), c.ID) {
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
				r := skipReason(tc, reasons)
				if skip == "" {
					skip = r.reason
				}
				if r.notObservable {
					v.NotObservable++
				}
			default:
				v.Passed++
			}
		}
		switch {
		case v.Failed > 0:
			v.Verdict, v.Reason = "FAILED", failure
		case v.Passed > 0 && v.Skipped > 0:
			v.Verdict = fmt.Sprintf("passed (%d of %d specs; skipped: %s)", v.Passed, v.Passed+v.Skipped, skip)
		case v.Passed > 0:
			v.Verdict = "passed"
		case v.Skipped > 0:
			v.Verdict, v.Reason = "skipped", skip
		}
		switch {
		case v.Verdict != "not run":
		case suite != "":
			v.Reason = suite
		case c.Tier == "cluster":
			v.Reason = "cluster tier only"
		case c.Tier == "lab":
			v.Reason = "lab tier only"
		}
		dir := filepath.Join("artifacts", c.ID)
		if _, err := os.Stat(filepath.Join(reportDir, dir)); err == nil {
			v.Evidence = dir + "/"
		}
		out = append(out, v)
	}
	return out
}

// ginkgoDefaultSkip is how Ginkgo marks the specs after the first of an
// Ordered container whose BeforeAll called Skip: not the spec's words.
const ginkgoDefaultSkip = "Skip() was called in BeforeAll"

// container is the text of a spec's containers: its name up to the first
// claim ID.
func container(name string) string {
	if i := claims.FirstIDAt(name); i >= 0 {
		return strings.TrimSpace(name[:i])
	}
	return name
}

// skip is why a spec was skipped: the reason in the spec's own words,
// and whether its platform could not observe what it needs.
type skip struct {
	reason        string
	notObservable bool
}

// containerSkips maps each container to the first skip a spec of it gave
// in its own words (the BeforeAll's Skip, and its report entries, reach
// the first spec only).
func containerSkips(cases []TestCase) map[string]skip {
	out := map[string]skip{}
	for _, tc := range cases {
		if tc.Skipped == nil {
			continue
		}
		m := strings.TrimPrefix(firstLine(tc.Skipped.Message), "skipped - ")
		if m == "" || m == "skipped" || strings.Contains(m, ginkgoDefaultSkip) {
			continue
		}
		if _, ok := out[container(tc.Name)]; !ok {
			out[container(tc.Name)] = skip{m, tc.has(NotObservableEntry)}
		}
	}
	return out
}

// skipReason is why a skipped spec was skipped: its own message, or,
// where Ginkgo gave its default, its container's.
func skipReason(tc TestCase, reasons map[string]skip) skip {
	if tc.Skipped != nil {
		m := strings.TrimPrefix(firstLine(tc.Skipped.Message), "skipped - ")
		if m != "" && m != "skipped" && !strings.Contains(m, ginkgoDefaultSkip) {
			return skip{m, tc.has(NotObservableEntry)}
		}
	}
	if tc.Skipped != nil && strings.TrimSpace(tc.Skipped.Message) == "skipped" {
		// Ginkgo's bare skip: the spec was not run at all. Not its
		// container's reason: a focused run (certify's E2E_FOCUS) counted
		// every spec it left out of a container as not observable there.
		return skip{reason: "not run: left out by the label filter, or skipped by an interrupt or the suite's deadline (the suite's log says which)"}
	}
	if r, ok := reasons[container(tc.Name)]; ok {
		return r
	}
	return skip{reason: "skipped in its container's setup; the suite's log has the reason"}
}

// Environment describes where a run happened.
type Environment struct {
	Tier, Kernel, Plugins, Control, Where string
	// What was tested: the workload (KubeVirt VMs or pods), the stager
	// subject, the KubeVirt build, the guest, the gateway.
	Workload, StagerSubject, KubeVirt, Guest, Gateway string
	Pods                                              bool // the workload was pods: passed claims say so
	// AccessTrunk says why the trunk carried the VLAN untagged ("" when it
	// was tagged): br100 then enslaves the uplink itself, the wiring the
	// guide warns against, and the datapath verdicts say so.
	AccessTrunk string
	// BrokenParts says which parts of the run wrote no JUnit: their specs
	// have no verdict in this report, and the run failed.
	BrokenParts []string
	// Images is the Markdown of the images the release pins: for each,
	// what the run used in its place, or the pinned image itself.
	Images string
	// StagerImage says, where the stager specs ran another image than the
	// one the release pins, which ("" for the pinned one, or no release):
	// their passed verdicts hold for that image.
	StagerImage string
	// StagerDetails names what the STG specs judged, in full (Markdown
	// list lines: manifest and sha256, image reference, its /cni-plugins).
	StagerDetails string
	// Release is the Cozystack release under test ("Cozystack <commit>
	// ..."), "" when the suite's own reference subject ran. Changes is the
	// Markdown of every change the suite made to the release's output.
	// Guide names the guide the verdicts rest on (Guide.String); NoGuide
	// says why there is none, and the report then opens with it.
	Release, Guide, NoGuide, Changes string
}

// WriteConformance writes conformance.md from the verdicts, and the
// failures' messages after them.
func WriteConformance(path string, env Environment, vs []Verdict, fails []Failure) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Conformance report: KubeVirt VMs on an external VLAN\n\n")
	subject := "Cozystack " + env.Release
	if env.Release == "" {
		subject = NoRelease
		fmt.Fprintf(&b, "**%s.**\n\n", NoRelease)
	}
	if env.NoGuide != "" {
		var unjudged []string
		for _, v := range vs {
			if v.Verdict == NoGuide {
				unjudged = append(unjudged, v.Claim.ID)
			}
		}
		fmt.Fprintf(&b, "**No guide: %s. The claims that rest on the guide's words therefore have no verdict: %s.**\n\n", env.NoGuide, strings.Join(unjudged, ", "))
	}
	fmt.Fprintf(&b, "| | |\n|---|---|\n| date | %s |\n", time.Now().UTC().Format(time.RFC3339))
	for _, row := range [][2]string{
		{"subject", subject}, {"guide", env.Guide}, {"tier", env.Tier}, {"workload", env.Workload}, {"stager subject", env.StagerSubject},
		{"KubeVirt", env.KubeVirt}, {"guest", env.Guest}, {"CNI plugins", env.Plugins},
		{"gateway", env.Gateway}, {"kernel", env.Kernel}, {"ran", env.Where},
	} {
		if row[1] == "" {
			row[1] = "unknown"
		}
		fmt.Fprintf(&b, "| %s | %s |\n", row[0], strings.ReplaceAll(row[1], "|", "\\|"))
	}
	if env.AccessTrunk != "" {
		fmt.Fprintf(&b, "%s: %s |\n", AccessTrunkRow, env.AccessTrunk)
	}
	if env.Control != "" {
		fmt.Fprintf(&b, "| negative control | %s |\n", env.Control)
	}
	for _, p := range env.BrokenParts {
		fmt.Fprintf(&b, "| **failed part** | %s |\n", p)
	}
	fmt.Fprintf(&b, "\n| claim | guide | verdict | specs (pass/fail/skip) | evidence |\n|---|---|---|---|---|\n")
	for _, v := range vs {
		verdict := qualify(env, v)
		if v.Reason != "" {
			verdict += ": " + strings.ReplaceAll(v.Reason, "|", "\\|")
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d/%d/%d | %s |\n", v.Claim.ID, strings.ReplaceAll(v.Claim.Sentence, "|", "\\|"), verdict, v.Passed, v.Failed, v.Skipped, v.Evidence)
	}
	if line := NotObservableSummary(vs); line != "" {
		b.WriteString("\n" + line + "\n")
	}
	if env.Images != "" {
		b.WriteString("\n" + ImagesHeading + "\n\n" + env.Images)
	}
	if env.StagerDetails != "" {
		b.WriteString("\n## Stager subject (STG-)\n\n" + env.StagerDetails)
	}
	if env.Release != "" {
		b.WriteString("\n" + ChangesHeading + "\n\n" + env.Changes)
	}
	var exempt []string
	for _, v := range vs {
		if v.Claim.Exemption != "" {
			exempt = append(exempt, fmt.Sprintf("- %s: %s\n", v.Claim.ID, v.Claim.Exemption))
		}
	}
	if len(exempt) > 0 {
		b.WriteString("\nClaims without a negative control, and why:\n\n" + strings.Join(exempt, ""))
	}
	b.WriteString("\nEvidence paths are relative to this file. Failed specs also leave `failure-*/` dumps of every namespace (ip a/link/route/neigh, bridge fdb).\n")
	if len(fails) > 0 {
		b.WriteString("\n" + FailuresHeading + "\n")
		for _, f := range fails {
			fmt.Fprintf(&b, "\n### %s\n\n```\n%s\n```\n", f.Name, f.Message)
		}
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// NotObservableSummary says how many specs were skipped because the platform
// could not observe what they need, and of which claims ("": none): on a
// vendor's cluster, the figure a node agent has to bring down.
func NotObservableSummary(vs []Verdict) string {
	n, specs := 0, 0
	var ids []string
	for _, v := range vs {
		specs += v.Passed + v.Failed + v.Skipped
		if v.NotObservable > 0 {
			n += v.NotObservable
			ids = append(ids, fmt.Sprintf("%s (%d)", v.Claim.ID, v.NotObservable))
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%s %d of %d specs, skipped as %s: %s.", NotObservableLine, n, specs, evidence.ErrNotObservable, strings.Join(ids, ", "))
}

// NotObservableLine starts the report's count of the specs the platform
// could not observe.
const NotObservableLine = "**Not observable here:**"

// Claims whose verdict rests on the wiring of uplink.100 into br100: on an
// access-mode trunk (no 8021q) br100 enslaves the uplink itself.
var trunkClaims = []string{"VLAN-01", "VLAN-05", "VLAN-06", "VLAN-07", "VLAN-09", "VLAN-10", "VLAN-12", "VLAN-13", "ARP-01", "ARP-02", "ARP-03", "ARP-04", "ARP-05", "ARP-06", "ARP-07", "ARP-08"}

// Claims about KubeVirt's MAC allocation: the lab proves its replica of
// it (the suite's own allocator), the VM lane KubeVirt itself.
var replicaClaims = []string{"ARP-01", "ARP-05", "ARP-06"}

// Claims about the Multus DaemonSet's pod around the stager: the lab proves
// them on its replica (the init container's script run container-less,
// stageCniPlugins: false rendered by dropping it, Ready read from its
// exit), a cluster on Multus and the kubelet themselves.
var multusReplicaClaims = []string{"STG-09", "STG-11"}

// Claims the stager specs prove by running install-cni-plugins over the
// multus image's /cni-plugins.
var stagerClaims = []string{"STG-01", "STG-02", "STG-03", "STG-04", "STG-05", "STG-06", "STG-07", "STG-08"}

// qualify is a verdict with what it was proven on, where that is less
// than the guide's setup: pods rather than VMs, an access-mode trunk
// rather than a tagged one, the lab's replica rather than KubeVirt, an
// image other than the one the release pins.
func qualify(env Environment, v Verdict) string {
	verdict := v.Verdict
	rest, passed := strings.CutPrefix(verdict, "passed")
	if !passed {
		return verdict
	}
	var on []string
	if env.Pods {
		on = append(on, "pods, not VMs")
	} else if env.Tier == "cluster" && v.Claim.Pods {
		on = append(on, "pods, not VMs (its spec attaches pods on every cluster)")
	}
	if env.AccessTrunk != "" && slices.Contains(trunkClaims, v.Claim.ID) {
		on = append(on, "an access-mode trunk (uplink in br100; no uplink.100 on this kernel)")
	}
	if env.StagerImage != "" && slices.Contains(stagerClaims, v.Claim.ID) {
		on = append(on, env.StagerImage)
	}
	if env.Tier == "lab" && slices.Contains(replicaClaims, v.Claim.ID) {
		on = append(on, "the lab's replica of KubeVirt's MAC allocation, not KubeVirt (the VM lane's verdict speaks for KubeVirt)")
	}
	if env.Tier == "lab" && slices.Contains(multusReplicaClaims, v.Claim.ID) {
		on = append(on, "the lab's replica of the Multus DaemonSet, not Multus (the cluster's verdict speaks for its chart and the kubelet)")
	}
	if len(on) == 0 {
		return verdict
	}
	return "passed on " + strings.Join(on, ", on ") + rest
}

// NoRelease is the report's subject when no --cozystack was given.
const NoRelease = "No Cozystack release was tested: the subject is the suite's own reference (fixtures/), not a release's charts; pass --cozystack=DIR"

// ChangesHeading is the section listing every change the suite made to the
// release's output; nothing may differ without a row there.
const ChangesHeading = "## What the suite changed in Cozystack's output"

// ImagesHeading is the section on the images the release pins.
const ImagesHeading = "## The images the release pins"

// FailuresHeading starts conformance.md's last section, the failures'
// messages (`conformance summary` prints it at the end of a CI log).
const FailuresHeading = "## Failures"

// AccessTrunkRow starts the environment table's row written when the trunk
// carried the VLAN untagged; `conformance summary` finds the row by it.
const AccessTrunkRow = "| trunk | untagged"

// ControlOutcome is one negative control's record in selftest.json.
type ControlOutcome struct {
	Claim       string `json:"claim"`
	Control     string `json:"control"`
	Description string `json:"description"`
	// SpecFailed is true only when the control was caught by the rule (Judge).
	SpecFailed  bool     `json:"spec_failed"`
	Verdict     string   `json:"verdict"`  // Caught, BrokeSetup or NotCaught
	Expected    string   `json:"expected"` // the failure message the control declares
	Matched     string   `json:"matched,omitempty"`
	FailedSpecs []string `json:"failed_specs,omitempty"`
	ExitCode    int      `json:"exit_code"`
	Seconds     float64  `json:"seconds"`
	Note        string   `json:"note,omitempty"`
	// FirstAttempt is why the first attempt was not caught, when the
	// verdict is the second's ("" when one attempt decided).
	FirstAttempt string `json:"first_attempt,omitempty"`
	// Afterwards is what the claim's specs did in the run without a
	// control after every control had run on the same cluster (PassesAgain;
	// "" where controls leave nothing behind: the lab's, each in a lab of
	// its own). AfterwardsFailed: they did not pass.
	Afterwards       string `json:"afterwards,omitempty"`
	AfterwardsFailed bool   `json:"afterwards_failed,omitempty"`
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
	m.WriteString("# Negative controls\n\nEach control runs its claim's specs against a deliberately broken subject. It is caught only when the claim's own `It` fails, as an assertion, with the failure the control declares; a failure in setup or `BeforeAll`, a panic or a timeout is \"control broke the setup\", not caught. A control not caught is run once more; the row then says what its first attempt gave.\n\n")
	m.WriteString("| claim | control | broken subject | verdict | expected failure | matched failure message (or why not caught) |\n|---|---|---|---|---|---|\n")
	esc := func(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "|", "\\|"), "\n", " ") }
	for _, o := range outcomes {
		verdict := o.Verdict
		if !o.SpecFailed {
			verdict = "**" + verdict + "**"
		}
		got := o.Matched
		if got == "" {
			got = o.Note
		}
		if o.FirstAttempt != "" {
			got += " (second attempt; the first: " + o.FirstAttempt + ")"
		}
		if o.Afterwards != "" {
			got += "; after the controls, on the same cluster: " + o.Afterwards
		}
		fmt.Fprintf(&m, "| %s | %s | %s | %s | %s | %s |\n", o.Claim, o.Control, esc(o.Description), verdict, esc(o.Expected), esc(got))
	}
	return os.WriteFile(filepath.Join(dir, "selftest.md"), []byte(m.String()), 0o644)
}

// firstLine is what a report row shows of a message: its first line, or,
// for Gomega's `Unexpected error:` (the line alone, the error's type and
// its text on the lines below), the error's own text, so that a row says
// why ("Unexpected error: starting vm-a: ... denied the request: ...").
func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if m := unexpectedErrorRE.FindStringSubmatch(s); m != nil {
		// The spec's annotation names the step, the error's text its cause:
		// the row needs both ("starting the guests" alone hid KubeVirt's
		// admission webhook refusing the VM).
		step := "Unexpected error"
		if a := strings.TrimSpace(m[1]); a != "" {
			step = a
		}
		s = step + ": " + strings.TrimSpace(m[2])
		// A wrapped error's innermost cause is at its end: a long one
		// keeps its start (the step) and its end.
		const head, tail = 100, 200
		if len(s) > head+tail {
			s = s[:head] + " ... " + s[len(s)-tail:]
		}
		return s
	}
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	// Room for a pinned image reference (name:tag@sha256:<64 hex>) in a
	// failure's first line.
	if len(s) > 240 {
		s = s[:240] + "..."
	}
	return s
}

// unexpectedErrorRE is Gomega's HaveOccurred failure: the spec's
// annotation, when it gave one, on the first line, then `Unexpected
// error:`, the error's type on its own line (`<*fmt.wrapError |
// 0xc000123>: `) and its text on the next.
var unexpectedErrorRE = regexp.MustCompile(`^(?:([^\n]*)\n)?Unexpected error:\s*\n\s*<[^>\n]*>:[ \t]*\n([^\n]*\S[^\n]*)`)
