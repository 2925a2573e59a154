package stager

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cozystack/vlan-conformance/framework/failures"
	"github.com/cozystack/vlan-conformance/framework/run"
	"github.com/cozystack/vlan-conformance/framework/stager"
	"github.com/cozystack/vlan-conformance/suites/cnibin"
	"github.com/cozystack/vlan-conformance/suites/labels"
)

// A generic Linux node provisioned by hand (fixtures/stager/layouts/generic.yaml):
// older copies of five staged plugins, a locally patched bridge, loopback,
// dhcp, dummy and tap, and whereabouts. Staging runs twice, as it does when
// the Multus pod is recreated.
func installSpecs(r *run.Run) {
	Describe("Staging onto a generic Linux node that already carries plugins", labels.Stager, Ordered, ContinueOnFailure, func() {
		var (
			harness       *stager.Harness
			first, second stager.Result
		)

		BeforeAll(func(ctx SpecContext) {
			generic, err := layout("generic")
			Expect(err).NotTo(HaveOccurred())
			var node *stager.FakeNode
			harness, node, err = setUp(r, stager.Scenario{Name: "generic", Layout: generic})
			Expect(err).NotTo(HaveOccurred())

			first, err = harness.Stage(ctx, node)
			Expect(err).NotTo(HaveOccurred(), "the first run could not be made:\n%s", first.Log)
			Expect(writeArtifact(r, "STG-04", "generic", "Generic Linux layout: before/after staging", harness, first)).To(Succeed())

			second, err = harness.Stage(ctx, node)
			Expect(err).NotTo(HaveOccurred(), "the second run could not be made:\n%s", second.Log)
			Expect(writeArtifact(r, "STG-03", "generic-second-run", "Generic Linux layout: staging again, as when the Multus pod is recreated", harness, second)).To(Succeed())
		})

		// "It installs 14 of the upstream reference plugins"
		It("[STG-01] installs exactly the 14 reference plugins, byte-identical to the image's copies, mode 0755", labels.Claim("STG-01"), func() {
			Expect(first.LogLines()).NotTo(ContainElement(skipLine), skippedStaging(harness))
			Expect(first.After.Files).To(cnibin.HoldTheFourteen(imagePlugins(harness)).AndNothingElseWritten(written(first)).Showing(describeRun(first)))
		})

		// "[It] leaves loopback, dhcp, dummy and tap alone." and CLAIMS.md STG-02: "nor any file that is not an image plugin (flannel, cilium-cni, ...)"
		It("[STG-02] leaves loopback, dhcp, dummy, tap and a foreign plugin exactly as they were", labels.Claim("STG-02"), func() {
			for _, res := range []stager.Result{first, second} {
				for _, p := range append(append([]string{}, stager.LeftAlone...), "whereabouts") {
					c := res.Change(p)
					Expect(c.Verdict).To(Equal(stager.Untouched),
						"%s must keep its inode, bytes, mode and mtime (held inode still at the name: %v, still reads its bytes: %v): %s\n%s",
						p, c.Held.AtName, c.Held.ContentKept, atFault(harness, p), describeRun(res))
				}
			}
		})

		// "a hand-placed or locally patched bridge will normally not survive"
		It("[STG-03] replaces the locally patched bridge with the image's copy", labels.Claim("STG-03"), func() {
			c := first.Change("bridge")
			Expect(c.Before).NotTo(BeNil())
			Expect(c.Before.Pristine).To(BeFalse(), "the layout's bridge must be a patched copy")
			Expect(c.Verdict).To(Equal(stager.Replaced), "\n%s", describeRun(first))
			Expect(c.After.Hash).To(Equal(harness.ImageHash("bridge")))
		})

		// "it tries to replace any file of the same name already in that directory"
		It("[STG-03] replaces by rename: every old inode leaves the directory unchanged, still reading its old bytes", labels.Claim("STG-03"), func() {
			for _, c := range first.Changes {
				if !stager.IsStaged(c.Name) || c.Before == nil {
					continue
				}
				Expect(c.Held.AtName).To(BeFalse(), "%s: the name still points at the old inode (written in place?)\n%s", c.Name, describeRun(first))
				Expect(c.Held.Linked).To(BeFalse(), "%s: the old inode is still linked somewhere", c.Name)
				Expect(c.Held.ContentKept).To(BeTrue(), "%s: the old inode's bytes were overwritten before it was replaced", c.Name)
			}
		})

		// "every time the Multus pod is recreated"
		It("[STG-03] replaces every staged plugin again on the next run, although the bytes are the same", labels.Claim("STG-03"), func() {
			for _, p := range stager.StagedPlugins {
				c := second.Change(p)
				Expect(c.Verdict).To(Equal(stager.Replaced), "%s "+failures.OnTheSecondRun+"\n%s", p, describeRun(second))
				Expect(c.After.Hash).To(Equal(harness.ImageHash(p)))
			}
		})

		// "Older versions on the node are replaced by the image's version, never the reverse" (CLAIMS.md)
		It("[STG-04] replaces the node's older copies by the image's version, never the reverse", labels.Claim("STG-04"), func() {
			older := 0
			for _, p := range stager.StagedPlugins {
				c := first.Change(p)
				if c.Before != nil && c.Before.Version == harness.OlderVersion() {
					older++
				}
				Expect(c.After).NotTo(BeNil(), "%s missing afterwards", p)
				Expect(c.After.Version).To(Equal(harness.ImageVersion()), "%s: %s before, %s after\n%s", p, describeFile(c.Before), c.After.Describe(), describeRun(first))
				Expect(c.After.Pristine).To(BeTrue(), "%s is not the image's copy", p)
			}
			Expect(older).To(BeNumerically(">", 0), "the generic layout must carry staged plugins from %s for this to prove anything", harness.OlderVersion())
		})

		// "No temporary file is left in /opt/cni/bin after a run" (CLAIMS.md)
		It("[STG-08] leaves no temporary file behind", labels.Claim("STG-08"), func() {
			Expect(leftovers(harness, first)).To(BeEmpty(), failures.NoTemporaryFile+" after the first run")
			Expect(leftovers(harness, second)).To(BeEmpty(), failures.NoTemporaryFile+" after the second run")
		})
	})
}

func describeFile(f *stager.File) string {
	if f == nil {
		return "absent"
	}
	return f.Describe()
}
