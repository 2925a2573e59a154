package stager

import (
	"github.com/cozystack/vlan-conformance/framework/failures"
	"github.com/cozystack/vlan-conformance/framework/run"
	"github.com/cozystack/vlan-conformance/framework/stager"
	"github.com/cozystack/vlan-conformance/suites/labels"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// A multus image that predates staging: the manifest carries the init
// container, the image carries no /cni-plugins. The node is the generic one.
func noPluginsDirSpecs(r *run.Run) {
	Describe("Staging from an image without /cni-plugins", labels.Stager, Ordered, ContinueOnFailure, func() {
		s := stageInBeforeAll(r, "generic", stager.Scenario{Name: "no-cni-plugins", Image: stager.ImageWithoutPluginsDir}, "STG-07", "Staging from an image without /cni-plugins")

		// "The line no /cni-plugins in this image; skipping staging means the running multus image predates the plugin staging and installed nothing"
		It("[STG-07] logs `no /cni-plugins in this image; skipping staging`, changes nothing and exits 0", labels.Claim("STG-07"), func() {
			Expect(s.res.LogLines()).To(ContainElement(skipLine), failures.ExactSkipLine+"\n%s", s.res.Log)
			Expect(s.res.ExitCode).To(Equal(0))
			for _, c := range s.res.Changes {
				Expect(c.Verdict).To(Equal(stager.Untouched), "%s must not change\n%s", c.Name, describeRun(s.res))
			}
		})

		itLeavesNoTemporaryFile(s)
	})
}

// An image whose /cni-plugins is empty. The guide says nothing of this
// case, so only what holds for any image is asserted: Cozystack's own
// contract test expects it to install nothing and report no failure, and
// the guide neither asks for a failure report nor forbids one.
func emptyPluginsDirSpecs(r *run.Run) {
	Describe("Staging from an image whose /cni-plugins is empty", labels.Stager, Ordered, ContinueOnFailure, func() {
		s := stageInBeforeAll(r, "generic", stager.Scenario{Name: "empty-cni-plugins", Image: stager.ImageWithEmptyPluginsDir}, "STG-02", "Staging from an empty /cni-plugins")

		// CLAIMS.md STG-02: "It never writes [...] any file that is not an image plugin": with none offered, it writes nothing.
		It("[STG-02] writes nothing to the node when the image offers no plugin", labels.Claim("STG-02"), func() {
			for _, c := range s.res.Changes {
				Expect(c.Verdict).To(Or(Equal(stager.Untouched), Equal(stager.Absent)), "%s: the script wrote it, and the image offered nothing\n%s", c.Name, describeRun(s.res))
			}
		})

		itLeavesNoTemporaryFile(s)
	})
}
