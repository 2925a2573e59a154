// Package release holds the specs about the release under test's own
// charts (--cozystack): what its platform and multus charts render for the
// values a user writes, with Helm's engine and no cluster (CLAIMS.md,
// STG-10).
//
//	networking.stageCniPlugins ──▶ packages/core/platform ──▶ Package cozystack.multus
//	  (platform values)             cozystack.platform.       spec.components.multus.values
//	                                stageCniPlugins helper         │
//	                                                               ▼
//	                                 packages/system/multus ──▶ DaemonSet ± install-cni-plugins
package release

import (
	"fmt"
	"os"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cozystack/vlan-conformance/framework/cozystack"
	"github.com/cozystack/vlan-conformance/framework/failures"
	"github.com/cozystack/vlan-conformance/framework/run"
	"github.com/cozystack/vlan-conformance/framework/stager"
	"github.com/cozystack/vlan-conformance/framework/subject"
	"github.com/cozystack/vlan-conformance/suites/labels"
)

// The spellings the guide and the multus chart document: "true/yes/on/1
// and false/no/off/0, in any case" (values.yaml), each as a user writes
// it, quoted or bare.
var (
	onSpellings  = []any{true, "true", "True", "TRUE", "yes", "Yes", "on", "ON", "1", 1}
	offSpellings = []any{false, "false", "False", "no", "NO", "off", "Off", "0", 0}
	typos        = []string{"maybe", "ture", "enabled"}
	// The bundles that deploy multus; the guide: "the platform turns it on
	// for every bundle".
	variants = []string{"isp-full", "isp-full-generic"}
)

// Specs registers the release's chart specs. They need --cozystack; they
// run with the stager's (native: no network, no kernel option).
func Specs(r *run.Run) {
	Describe("The release's networking.stageCniPlugins, rendered", labels.Release, Ordered, ContinueOnFailure, func() {
		var rel *cozystack.Release

		BeforeAll(func() {
			var err error
			rel, err = underTest(r)
			Expect(err).NotTo(HaveOccurred(), "preparing the release under test")
		})

		note := func(claim, format string, a ...any) { r.Artifacts().Note(claim, format, a...) }

		// "Accepted spellings are true/yes/on/1 and false/no/off/0, in any case"
		It("[STG-10] resolves every documented spelling: the true forms stage the plugins, the false forms do not", labels.Claim("STG-10"), func() {
			for _, want := range []struct {
				on        bool
				spellings []any
			}{{true, onSpellings}, {false, offSpellings}} {
				for _, sp := range want.spellings {
					s := cozystack.StagingValue(sp)
					p, m, err := rel.StagingOn(subject.DefaultVariant, s, nil)
					Expect(err).NotTo(HaveOccurred(), "networking.stageCniPlugins: %s must render", s)
					note("STG-10", "stageCniPlugins %s (%T): Package %s values %v; DaemonSet init containers %v", s, sp, cozystack.MultusPackage, p.MultusValues, m.InitContainers())
					Expect(p.MultusValues).To(HaveKeyWithValue("stageCniPlugins", want.on), "networking.stageCniPlugins: %s must resolve to %v", s, want.on)
					if want.on {
						Expect(m.InitContainers()).To(ContainElement(stager.InitContainerName), "networking.stageCniPlugins: %s must give the DaemonSet %s", s, stager.InitContainerName)
					} else {
						Expect(m.InitContainers()).NotTo(ContainElement(stager.InitContainerName), "networking.stageCniPlugins: %s must leave %s out", s, stager.InitContainerName)
					}
				}
			}
		})

		// "the platform turns it on for every bundle"
		It("[STG-10] follows the bundle when unset: every bundle with multus stages the plugins", labels.Claim("STG-10"), func() {
			for _, v := range variants {
				p, m, err := rel.StagingOn(v, cozystack.Unset, nil)
				Expect(err).NotTo(HaveOccurred(), "variant %s with networking.stageCniPlugins unset must render", v)
				note("STG-10", "variant %s, stageCniPlugins unset: Package values %v; init containers %v", v, p.MultusValues, m.InitContainers())
				Expect(p.MultusValues).To(HaveKeyWithValue("stageCniPlugins", true), "variant %s: unset must follow the bundle's default, on", v)
				Expect(m.InitContainers()).To(ContainElement(stager.InitContainerName))
			}
		})

		// "An unreadable value there — a spelling that is neither a true nor
		// a false form — stops the whole platform render rather than
		// resolving to off"
		It("[STG-10] stops the platform render and the multus render on a typo, with the chart's own message, and produces no DaemonSet", labels.Claim("STG-10"), func() {
			for _, typo := range typos {
				s := cozystack.StagingValue(typo)
				p, err := rel.RenderPlatform(subject.DefaultVariant, s, nil)
				note("STG-10", "platform with stageCniPlugins %s: error %v", s, err)
				Expect(err).To(HaveOccurred(), failures.RenderStops+" stageCniPlugins %s, not resolve it (it gave %v)", s, multusValues(p))
				Expect(stoppedByTemplate(err, typo)).To(BeTrue(), "the platform render must stop with the chart's own message naming %q, got: %v", typo, err)
				Expect(p.Render.Objects).To(BeEmpty(), "a stopped platform render produces nothing")

				m, err := rel.RenderMultus(map[string]any{"stageCniPlugins": typo})
				note("STG-10", "multus with stageCniPlugins %s: error %v", s, err)
				Expect(err).To(HaveOccurred(), "the multus render must stop on stageCniPlugins %s", s)
				Expect(stoppedByTemplate(err, typo)).To(BeTrue(), "the multus render must stop with the chart's own message naming %q, got: %v", typo, err)
				Expect(m.DaemonSet).To(BeNil(), "no DaemonSet may come of a stopped render")
			}
		})
	})
}

// stoppedByTemplate: the render failed in a template's own `fail` (Helm
// wraps it as "execution error at (<template>:<line>:<col>): <message>"),
// and the message names the value.
func stoppedByTemplate(err error, value string) bool {
	return err != nil && strings.Contains(err.Error(), "execution error at (") && strings.Contains(cozystack.ChartError(err), fmt.Sprintf("%q", value))
}

func multusValues(p *cozystack.Platform) any {
	if p == nil {
		return nil
	}
	return p.MultusValues
}

// underTest is the release under test, or, under a control that breaks it
// (Control.BreakRelease, STG-10's: the platform's helper), a copy so
// broken; the copy is removed after the container.
func underTest(r *run.Run) (*cozystack.Release, error) {
	cfg, s := r.Config(), r.Subject()
	if s == nil {
		Skip("no Cozystack release under test: pass --cozystack=DIR (the suite's reference subject has no charts)")
	}
	brk := cfg.SelectedControl().BreakRelease
	if brk == nil {
		return s.Release, nil
	}
	dir, err := os.MkdirTemp(cfg.WorkDir, "vcf-release-")
	if err != nil {
		return nil, err
	}
	DeferCleanup(os.RemoveAll, dir)
	c, err := s.Release.CopyTo(dir)
	if err != nil {
		return nil, err
	}
	return c, brk(c)
}
