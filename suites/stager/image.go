package stager

import (
	"fmt"
	"os"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cozystack/vlan-conformance/framework/run"
	"github.com/cozystack/vlan-conformance/framework/stager"
	"github.com/cozystack/vlan-conformance/suites/labels"
)

// The image half of the package alone: what the multus image carries at
// /cni-plugins (the release's pinned image with --image-archive,
// --stager-image, or the suite's reference build), before any script runs.
// An image with no /cni-plugins at all (a pinned one that predates
// staging) is staged once, so that the cause STG-01 reports is the one the
// guide names, as the script logs it.
func imageSpecs(r *run.Run) {
	Describe("The multus image's /cni-plugins", labels.Stager, Ordered, ContinueOnFailure, func() {
		var (
			harness *stager.Harness
			skipped stager.Result // the staging run from an image without /cni-plugins
		)

		BeforeAll(func(ctx SpecContext) {
			var err error
			harness, err = newHarness(r)
			Expect(err).NotTo(HaveOccurred())
			Expect(writeImageArtifact(r, harness)).To(Succeed())
			if harness.Image.NoPluginsDir {
				generic, err := layout("generic")
				Expect(err).NotTo(HaveOccurred())
				_, skipped, err = stageOnce(ctx, r, stager.Scenario{Name: "image-without-cni-plugins", Layout: generic}, "STG-01", "Staging from the image, which has no /cni-plugins")
				Expect(err).NotTo(HaveOccurred())
			}
		})

		// "It installs 14 of the upstream reference plugins" and "rewrites the four that
		// overlap with the same upstream version (v1.9.1 on both sides)"; CLAIMS.md STG-01:
		// "the multus image's /cni-plugins plus the init container's script; either half
		// may do the filtering". So the image must offer each of the 14 as the reference
		// build of the release; what it carries beyond them is STG-02's to judge on the node.
		It("[STG-01] carries each of the 14 at /cni-plugins, the upstream reference build of the expected release", labels.Claim("STG-01"), func() {
			By("the image: " + harness.Image.String())
			Expect(skipped.LogLines()).NotTo(ContainElement(skipLine), skippedStaging(harness))
			Expect(harness.Image.NoPluginsDir).To(BeFalse(), "the image has no /cni-plugins: %s", harness.Image)
			for _, p := range stager.StagedPlugins {
				e, ok := harness.Image.Entry(p)
				Expect(ok).To(BeTrue(), "/cni-plugins/%s is missing from the image (%s)", p, harness.Image)
				Expect(e.Kind).To(Equal("file"), "/cni-plugins/%s is a %s", p, e.Kind)
				Expect(e.Reference()).To(BeTrue(), "/cni-plugins/%s is not the upstream reference plugin: %s", p, e.Describe())
				Expect(e.Version).To(Equal(harness.ImageVersion()), "/cni-plugins/%s: %s, the release at --plugin-dir is %s", p, e.Describe(), harness.ImageVersion())
			}
		})
	})
}

// writeImageArtifact records the image: <report-dir>/artifacts/STG-01/image.md.
func writeImageArtifact(r *run.Run, harness *stager.Harness) error {
	// A figure, not a claim: the guide says the plugins "cost roughly 67 MiB
	// uncompressed per architecture in the multus image".
	size := fmt.Sprintf("%.1f MiB uncompressed in %d files (the guide: \"roughly 67 MiB uncompressed per architecture\")", float64(harness.Image.Size())/(1<<20), len(harness.Image.Entries))
	if harness.Image.NoPluginsDir {
		size = "none: the image has no /cni-plugins"
	}
	AddReportEntry("STG-01 payload size", size)
	b := fmt.Sprintf("# The multus image's /cni-plugins\n\n- image: %s\n- manifest: %s\n- size: %s\n\n| entry | kind | version | built from | bytes | sha256 |\n|---|---|---|---|---|---|\n", harness.Image, harness.InitContainer.Source, size)
	for _, e := range harness.Image.Entries {
		b += fmt.Sprintf("| %s | %s | %s | %s | %d | %s |\n", e.Name, e.Kind, e.Version, e.Package, e.Size, e.Hash)
	}
	return os.WriteFile(r.Artifacts().Path("STG-01", "image.md"), []byte(b), 0o644)
}
