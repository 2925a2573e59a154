package stager

import (
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cozystack/vlan-conformance/framework/failures"
	"github.com/cozystack/vlan-conformance/framework/run"
	"github.com/cozystack/vlan-conformance/framework/stager"
	"github.com/cozystack/vlan-conformance/suites/labels"
)

// The causes CLAIMS.md STG-05 names, each injected into the generic node
// (fixtures/stager/layouts/generic.yaml: a patched bridge, older host-local,
// macvlan, portmap, tuning and vlan, no ipvlan or ptp).
var faultCases = []struct {
	name   string
	faults []stager.Fault
	// failing are the plugins the faults must stop, in the order staging
	// attempts them; nil when the fault decides (a file system filling up).
	failing []string
	cause   *regexp.Regexp // what the line reporting each failure says
}{
	{
		name:    "directory-at-destination",
		faults:  []stager.Fault{stager.DirectoryAt("ipvlan")},
		failing: []string{"ipvlan"},
		cause:   regexp.MustCompile(`(?i)directory`),
	},
	{
		name:    "unreadable-source",
		faults:  []stager.Fault{stager.Unreadable("bridge"), stager.Unreadable("ptp")},
		failing: []string{"bridge", "ptp"}, // one the node has, one it lacks
		cause:   regexp.MustCompile(`Permission denied`),
	},
	{
		name:    "immutable-destination",
		faults:  []stager.Fault{stager.Immutable("vlan")},
		failing: []string{"vlan"},
		cause:   regexp.MustCompile(`Operation not permitted`),
	},
	{
		name:   "full-file-system",
		faults: []stager.Fault{stager.FullFS(10 << 20)},
		cause:  regexp.MustCompile(`No space left on device`),
	},
	{
		// More than one failure: the causes are spread above the summary.
		name:    "several-faults",
		faults:  []stager.Fault{stager.Unreadable("bridge"), stager.DirectoryAt("ipvlan"), stager.Immutable("vlan")},
		failing: []string{"bridge", "ipvlan", "vlan"},
		cause:   regexp.MustCompile(`Permission denied|(?i:directory)|Operation not permitted`),
	},
}

func failureSpecs(r *run.Run) {
	Describe("Staging when plugins cannot be written", labels.Stager, func() {
		for _, want := range faultCases {
			title := describeFaults(want.faults)
			Context("with "+title, Ordered, ContinueOnFailure, func() {
				s := stageInBeforeAll(r, "generic", stager.Scenario{Name: want.name, Faults: want.faults}, "STG-05", "Staging with "+title)

				// "A plugin it fails to write is reported and skipped rather than removed, so whatever was there stays"
				It("[STG-05] skips what it cannot write: an older copy stays, nothing appears where there was none, the rest is installed", labels.Claim("STG-05"), func() {
					harness, res := s.harness, s.res
					failed := notInstalled(harness, res)
					if want.failing != nil {
						Expect(failed).To(Equal(want.failing), "the plugins not installed must be exactly those the fault hits\n%s", describeRun(res))
					} else {
						Expect(failed).NotTo(BeEmpty(), "the fault took no plugin\n%s", describeRun(res))
						Expect(len(failed)).To(BeNumerically("<", len(stager.StagedPlugins)), "the fault took every plugin\n%s", describeRun(res))
					}
					for _, p := range failed {
						c := res.Change(p)
						if c.Before == nil {
							Expect(c.Verdict).To(Equal(stager.Absent), "%s: "+failures.NothingAppears+"\n%s", p, describeRun(res))
						} else {
							// A directory at the destination stays as it was: it gains no entries (the
							// plugin moved into it is not "left as it was", and is no plugin either).
							Expect(c.Verdict).To(Equal(stager.Untouched), "%s: the node's %s "+failures.NodeCopyStays+"%s\n%s", p, c.Before.Describe(), gained(c), describeRun(res))
						}
					}
				})

				// "The reason for each is earlier in the same log, printed as that plugin was attempted [...] The container reports these and exits successfully on purpose"
				It("[STG-06] logs each cause as it is attempted, then a summary `failed to install:` naming every failed plugin, and exits 0", labels.Claim("STG-06"), func() {
					harness, res := s.harness, s.res
					failed := notInstalled(harness, res)
					Expect(res.ExitCode).To(Equal(0), failures.PodShowsReady+"\n%s", describeRun(res))
					line, at, ok := summary(res)
					Expect(ok).To(BeTrue(), failures.NoLineBegins+" %q\n%s", summaryPrefix, describeRun(res))
					Expect(names(line)).To(ConsistOf(failed), "the summary must name every failed plugin and only those: %q", line)

					lines := res.LogLines()[:at]
					from, firstCause := 0, -1
					for _, p := range failed {
						i := causeLine(lines, from, p, want.cause)
						Expect(i).To(BeNumerically(">=", 0),
							"no line before the summary, after the previous failure's, names %s with its cause (%s)\n%s", p, want.cause, res.Log)
						if firstCause < 0 {
							firstCause = i
						}
						from = i + 1
					}

					// "printed as that plugin was attempted rather than next to the summary":
					// the first cause reached the log before plugins attempted after it were written.
					if later := installedAfter(harness, res, failed[0]); len(later) >= 3 {
						last := later[len(later)-1]
						f, _ := res.After.Get(last)
						Expect(res.LogTimes[firstCause]).To(BeTemporally("<", f.CTime),
							"the cause for %s was logged after %s, attempted later, was written: gathered at the end "+failures.CausesGathered+"\n%s", failed[0], last, res.Log)
					}
				})

				// CLAIMS.md STG-06, evidence: "stderr lines, exit code, termination message"
				It("[STG-06] leaves the summary as the container's termination message", labels.Claim("STG-06"), func() {
					harness, res := s.harness, s.res
					failed := notInstalled(harness, res)
					Expect(res.TerminationMessage).To(ContainSubstring(summaryPrefix), "the termination message the kubelet reports (terminationMessagePath %s)", harness.InitContainer.TerminationMessagePath())
					Expect(names(res.TerminationMessage)).To(ConsistOf(failed), "termination message: %q", res.TerminationMessage)
				})

				itLeavesNoTemporaryFile(s)
			})
		}
	})
}

// gained says which entries a directory at the destination gained.
func gained(c stager.FileChange) string {
	if c.Before == nil || c.After == nil || c.Before.Kind != "dir" || c.After.Kind != "dir" {
		return ""
	}
	had := map[string]bool{}
	for _, e := range c.Before.Entries {
		had[e] = true
	}
	var out []string
	for _, e := range c.After.Entries {
		if !had[e] {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		return ""
	}
	return "; " + failures.DirectoryGained + " " + strings.Join(out, ", ")
}

// installedAfter lists the plugins staging attempts after plugin that
// ended up installed, in that order.
func installedAfter(harness *stager.Harness, res stager.Result, plugin string) []string {
	var out []string
	seen := false
	for _, p := range stager.StagedPlugins {
		if p == plugin {
			seen = true
			continue
		}
		if f, ok := res.After.Get(p); seen && ok && f.Hash == harness.ImageHash(p) {
			out = append(out, p)
		}
	}
	return out
}

// causeLine is the index of the first line from `from` on that names
// plugin and gives a cause matching re, or -1.
func causeLine(lines []string, from int, plugin string, re *regexp.Regexp) int {
	for i := from; i < len(lines); i++ {
		if stager.NamesPlugin(lines[i], plugin) && re.MatchString(lines[i]) {
			return i
		}
	}
	return -1
}

func describeFaults(faults []stager.Fault) string {
	s := ""
	for i, f := range faults {
		if i > 0 {
			s += ", "
		}
		s += f.String()
	}
	return s
}
