package stager

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cozystack/vlan-conformance/framework/failures"
	"github.com/cozystack/vlan-conformance/framework/run"
	"github.com/cozystack/vlan-conformance/framework/stager"
	"github.com/cozystack/vlan-conformance/suites/labels"
)

// The node's older bridge is executing a CNI DEL (started from
// /opt/cni/bin/bridge, waiting for its network configuration) while
// staging runs. Only a rename keeps it safe: writing into an executing
// file fails with "Text file busy", and rewriting it would change what the
// process runs.
func executingSpecs(r *run.Run) {
	Describe("Staging while the node's old bridge is executing", labels.Stager, Ordered, ContinueOnFailure, func() {
		var (
			harness      *stager.Harness
			res          stager.Result
			runningAfter bool
			exeHash      string
			exeHashErr   error
			exeLink      string
			delExit      int
			delOutput    string
			delErr       error
		)

		BeforeAll(func(ctx SpecContext) {
			var (
				node *stager.FakeNode
				err  error
			)
			harness, node, err = setUp(r, stager.Scenario{Name: "executing-bridge", Layout: stager.Layout{
				Name: "executing-bridge",
				Files: []stager.LayoutFile{
					{Name: "bridge", From: stager.FromOlder},
					{Name: "loopback", From: stager.FromOlder},
				},
			}})
			Expect(err).NotTo(HaveOccurred())

			bridge, err := stager.StartExecuting(node, "bridge")
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(bridge.Stop)
			Expect(bridge.Running()).To(BeTrue(), "the old bridge must be executing before staging starts")

			res, err = harness.Stage(ctx, node)
			Expect(err).NotTo(HaveOccurred(), "the run could not be made:\n%s", res.Log)
			Expect(writeArtifact(r, "STG-03", "executing-bridge", "Staging while the node's old bridge is executing", harness, res)).To(Succeed())

			runningAfter = bridge.Running()
			exeHash, exeHashErr = bridge.ExeHash()
			exeLink, _ = bridge.ExeLink()
			delExit, delOutput, delErr = bridge.Finish(10 * time.Second)
		})

		// "it tries to replace any file of the same name already in that directory"
		It("[STG-03] puts the image's bridge in place although the old one is executing, with no `Text file busy`", labels.Claim("STG-03"), func() {
			Expect(res.Log).NotTo(ContainSubstring("Text file busy"), "\n%s", describeRun(res))
			c := res.Change("bridge")
			Expect(c.Verdict).To(Equal(stager.Replaced), "\n%s", describeRun(res))
			Expect(c.After.Hash).To(Equal(harness.ImageHash("bridge")), "bridge afterwards: %s", c.After.Describe())
		})

		// "by rename: a plugin that is executing during staging keeps running" (CLAIMS.md)
		It("[STG-03] leaves the executing bridge undisturbed: it keeps running its old binary and completes its DEL", labels.Claim("STG-03"), func() {
			Expect(runningAfter).To(BeTrue(), "the old bridge stopped during staging")
			Expect(exeHashErr).NotTo(HaveOccurred())
			Expect(exeHash).To(Equal(harness.OlderHash("bridge")), "the process no longer runs the %s bridge it was started from (exe: %s)", harness.OlderVersion(), exeLink)
			Expect(exeLink).To(HaveSuffix("(deleted)"), "the process's binary should be "+failures.UnlinkedOldInode)
			Expect(delErr).NotTo(HaveOccurred())
			Expect(delExit).To(Equal(0), "the interrupted-looking DEL must still succeed; it printed: %s", delOutput)
		})
	})
}
