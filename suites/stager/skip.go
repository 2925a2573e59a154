package stager

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cozystack/vlan-conformance/framework/stager"
	"github.com/cozystack/vlan-conformance/suites/labels"
)

// A multus image that predates staging: the manifest carries the init
// container, the image carries no /cni-plugins. The node is the generic one.
var _ = Describe("Staging from an image without /cni-plugins", labels.Stager, Ordered, ContinueOnFailure, func() {
	var res stager.Result

	BeforeAll(func(ctx SpecContext) {
		generic, err := layout("generic")
		Expect(err).NotTo(HaveOccurred())
		lab, node, err := setUp(stager.Scenario{Name: "no-cni-plugins", Layout: generic, Image: stager.ImageWithoutPluginsDir})
		Expect(err).NotTo(HaveOccurred())
		res, err = lab.Stage(ctx, node)
		Expect(err).NotTo(HaveOccurred(), "the run could not be made:\n%s", res.Log)
		Expect(writeArtifact("STG-07", "no-cni-plugins", "Staging from an image without /cni-plugins", lab, res)).To(Succeed())
	})

	// "The line no /cni-plugins in this image; skipping staging means the running multus image predates the plugin staging and installed nothing"
	It("[STG-07] logs `no /cni-plugins in this image; skipping staging`, changes nothing and exits 0", labels.Claim("STG-07"), func() {
		Expect(res.LogLines()).To(ContainElement(skipLine), "the exact skip line\n%s", res.Log)
		Expect(res.ExitCode).To(Equal(0))
		for _, c := range res.Changes {
			Expect(c.Verdict).To(Equal(stager.Untouched), "%s must not change\n%s", c.Name, describeRun(res))
		}
	})

	// "No temporary file is left in /opt/cni/bin after a run, failed or not" (CLAIMS.md)
	It("[STG-08] leaves no temporary file behind", labels.Claim("STG-08"), func() {
		Expect(leftovers(res)).To(BeEmpty())
	})
})
