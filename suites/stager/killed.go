package stager

import (
	"errors"
	"io/fs"
	"regexp"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cozystack/vlan-conformance/framework/failures"
	"github.com/cozystack/vlan-conformance/framework/run"
	"github.com/cozystack/vlan-conformance/framework/stager"
	"github.com/cozystack/vlan-conformance/suites/labels"
)

// What an earlier run that was killed leaves behind, and what the next run
// does with it: the cases Cozystack's own contract test of its script
// covers (hack/multus-install-cni-plugins.bats), kept to those the guide
// and CLAIMS.md back. The killed run is the script under test's own: the
// harness stalls its copy of a plugin mid-file and kills it (SIGKILL, as at a
// node's shutdown), and observes what it left; no temporary name is
// assumed. Every run is under the manifest's securityContext.

// stalled is the plugin a killed run is copying when it dies: one every
// layout has (Talos) or lacks (the others), and that the image offers.
const stalled = "bridge"

func killedSpecs(r *run.Run) {
	Describe("Staging after an earlier run was killed mid-copy", labels.Stager, func() {
		cases := []struct {
			layout string
			// dropped: the next run's image no longer carries the plugin the
			// killed run was copying (an upgrade that dropped it), so only a
			// cleanup can clear what was left for it.
			dropped bool
		}{
			{layout: "talos"}, {layout: "k3s"}, {layout: "cilium"}, {layout: "generic"},
			{layout: "generic", dropped: true},
		}
		for _, want := range cases {
			name, title := "killed-"+want.layout, "on a "+want.layout+" node"
			if want.dropped {
				name, title = name+"-dropped", title+", the next image no longer carrying "+stalled
			}
			Context(title, Ordered, ContinueOnFailure, func() {
				var (
					harness  *stager.Harness
					killed   stager.Result
					res      stager.Result
					stranded []string
				)

				BeforeAll(func(ctx SpecContext) {
					l, err := layout(want.layout)
					Expect(err).NotTo(HaveOccurred())
					var node *stager.FakeNode
					harness, node, err = setUp(r, stager.Scenario{Name: name, Layout: l})
					Expect(err).NotTo(HaveOccurred())

					killed, err = harness.StageKilled(ctx, node, stalled)
					if errors.Is(err, stager.ErrNotInterrupted) {
						Skip("no killed run can be made of this script: " + err.Error() + "\n" + killed.Log)
					}
					Expect(err).NotTo(HaveOccurred(), "the killed run could not be made:\n%s", killed.Log)
					Expect(writeArtifact(r, "STG-08", name+"-killed-run", "A run killed while copying "+stalled, harness, killed)).To(Succeed())
					stranded = harness.Stranded(killed)

					if want.dropped {
						Expect(node.DropFromImage(stalled)).To(Succeed())
					}
					res, err = harness.Stage(ctx, node)
					Expect(err).NotTo(HaveOccurred(), "the run could not be made:\n%s", res.Log)
					Expect(writeArtifact(r, "STG-08", name, "Staging after a run killed while copying "+stalled, harness, res)).To(Succeed())
				})

				// CLAIMS.md STG-08: "No temporary file is left in /opt/cni/bin after a run, failed or not."
				It("[STG-08] clears what the killed run left in /opt/cni/bin: no temporary file is left after the next run", labels.Claim("STG-08"), func() {
					if len(stranded) == 0 {
						Skip("the killed run left nothing in /opt/cni/bin (the script writes its copy elsewhere), so there is nothing to clear\n" + describeRun(killed))
					}
					By("the killed run left: " + orNone(stranded))
					for _, n := range stranded {
						_, still := res.After.Get(n)
						Expect(still).To(BeFalse(), "%s, "+failures.KilledRunLeftover+" after the next run\nkilled run:\n%s\nnext run:\n%s", n, describeRun(killed), describeRun(res))
					}
					Expect(leftovers(harness, res)).To(BeEmpty(), failures.NoTemporaryFile+"\n%s", describeRun(res))
				})
			})
		}
	})
}

// A temporary path an earlier run left that no rm can clear (a directory
// holding an immutable file), at the name the script under test was seen
// to use (Harness.TempPaths). Copying into it and renaming it publishes a
// directory as the plugin.
func unclearableSpecs(r *run.Run) {
	Describe("Staging when a temporary path from an earlier run will not clear", labels.Stager, func() {
		cases := []struct {
			layout, plugin string
		}{
			{layout: "generic", plugin: "ptp"},  // the node has none: nothing may appear
			{layout: "talos", plugin: "bridge"}, // the node has one: it must stay
		}
		// What a script says when it cannot clear the path or write through it.
		cause := regexp.MustCompile(`Operation not permitted|(?i:directory)|Permission denied`)
		for _, want := range cases {
			name := "unclearable-temp-" + want.layout + "-" + want.plugin
			Context("for "+want.plugin+" on a "+want.layout+" node", Ordered, ContinueOnFailure, func() {
				var (
					harness *stager.Harness
					res     stager.Result
					fault   stager.Fault
				)

				BeforeAll(func(ctx SpecContext) {
					l, err := layout(want.layout)
					Expect(err).NotTo(HaveOccurred())
					harness, err = newHarness(r)
					Expect(err).NotTo(HaveOccurred())
					paths, probe, err := harness.TempPaths(ctx, l, want.plugin)
					if errors.Is(err, stager.ErrNotInterrupted) {
						Skip("no killed run can be made of this script, so its temporary path is unknown: " + err.Error() + "\n" + probe.Log)
					}
					Expect(err).NotTo(HaveOccurred(), "the probe run could not be made:\n%s", probe.Log)
					if len(paths) == 0 {
						Skip("a run killed mid-copy left nothing in /opt/cni/bin: the script writes its copy elsewhere, so no temporary path of its can be in the way\n" + describeRun(probe))
					}
					fault = stager.UnclearableAt(want.plugin, paths)
					node, err := harness.Prepare(stager.Scenario{Name: name, Layout: l, Faults: []stager.Fault{fault}})
					Expect(err).NotTo(HaveOccurred())
					DeferCleanup(node.Close)
					res, err = harness.Stage(ctx, node)
					Expect(err).NotTo(HaveOccurred(), "the run could not be made:\n%s", res.Log)
					Expect(writeArtifact(r, "STG-05", name, "Staging with "+fault.String(), harness, res)).To(Succeed())
				})

				// "A plugin it fails to write is reported and skipped rather than removed, so whatever
				// was there stays — an older copy where the node had one, and nothing at all where it did not."
				It("[STG-05] does not publish the temporary path as the plugin: the node's copy stays, nothing appears where there was none, the rest is installed", labels.Claim("STG-05"), func() {
					c := res.Change(want.plugin)
					installed := wrote(res, want.plugin) && c.After.Kind == "file" && c.After.Hash == harness.ImageHash(want.plugin) && c.After.Perm == fs.FileMode(0o755)
					if !installed {
						if c.Before == nil {
							Expect(c.Verdict).To(Equal(stager.Absent), "%s: "+failures.NothingAppears+", yet it is now a %s (%s)\n%s", want.plugin, describeFile(c.After), fault, describeRun(res))
						} else {
							Expect(c.Verdict).To(Equal(stager.Untouched), "%s: the node's %s "+failures.NodeCopyStays+"; now: %s\n%s", want.plugin, c.Before.Describe(), describeFile(c.After), describeRun(res))
						}
					}
					var others []string
					for _, p := range notInstalled(harness, res) {
						if p != want.plugin {
							others = append(others, p)
						}
					}
					Expect(others).To(BeEmpty(), "one path in the way must not stop the other plugins\n%s", describeRun(res))
					for _, p := range fault.Paths {
						_, there := res.After.Get(p)
						Expect(there || installed).To(BeTrue(), "the unclearable %s is gone from /opt/cni/bin, but %s was not installed from the image\n%s", p, want.plugin, describeRun(res))
					}
				})

				// "The reason for each is earlier in the same log, printed as that plugin was attempted [...]
				// The container reports these and exits successfully on purpose"
				It("[STG-06] reports the plugin it refused: its cause, then `failed to install:` naming it; exits 0", labels.Claim("STG-06"), func() {
					Expect(res.ExitCode).To(Equal(0), failures.PodShowsReady+"\n%s", describeRun(res))
					if wrote(res, want.plugin) {
						Skip(want.plugin + " was written through another path: no failure to report")
					}
					var failed []string // the staged plugins this run did not write
					for _, p := range stager.StagedPlugins {
						if !wrote(res, p) {
							failed = append(failed, p)
						}
					}
					line, at, ok := summary(res)
					Expect(ok).To(BeTrue(), failures.NoLineBegins+" %q\n%s", summaryPrefix, describeRun(res))
					Expect(names(line)).To(ConsistOf(failed), "the summary must name every failed plugin and only those: %q", line)
					Expect(causeLine(res.LogLines()[:at], 0, want.plugin, cause)).To(BeNumerically(">=", 0),
						"no line before the summary names %s with its cause (%s)\n%s", want.plugin, cause, res.Log)
				})
			})
		}
	})
}

// wrote: the run put a new file at name (added or replaced it).
func wrote(res stager.Result, name string) bool {
	c := res.Change(name)
	return c.After != nil && (c.Verdict == stager.Added || c.Verdict == stager.Replaced)
}
