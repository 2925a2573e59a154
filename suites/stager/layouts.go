package stager

import (
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cozystack/vlan-conformance/framework/failures"
	"github.com/cozystack/vlan-conformance/framework/run"
	"github.com/cozystack/vlan-conformance/framework/stager"
	"github.com/cozystack/vlan-conformance/suites/cnibin"
	"github.com/cozystack/vlan-conformance/suites/labels"
)

// What the guide says staging does on each platform's /opt/cni/bin. The
// node layouts are fixtures (fixtures/stager/layouts); the numbers are the
// guide's.
var platformLayouts = []struct {
	layout    string
	guide     string // the sentence the table proves
	added     int
	rewritten int
	untouched []string // present before, never written
	absent    []string // absent before, still absent after
}{
	{
		layout:    "talos",
		guide:     "staging adds the ten it does not carry and rewrites the four that overlap with the same upstream version (v1.9.1 on both sides)",
		added:     10,
		rewritten: 4,
		untouched: []string{"loopback", "flannel"},
		absent:    []string{"dhcp", "dummy", "tap"},
	},
	{
		layout: "k3s",
		guide:  "k3s keeps its own copies under /var/lib/rancher/k3s/data/cni [...] so /opt/cni/bin there can lack even bridge",
		added:  14,
		absent: []string{"loopback", "dhcp", "dummy", "tap"},
	},
	{
		layout:    "cilium",
		guide:     "Cilium installs only cilium-cni and loopback",
		added:     14,
		untouched: []string{"cilium-cni", "loopback"},
		absent:    []string{"dhcp", "dummy", "tap"},
	},
}

func layoutSpecs(r *run.Run) {
	Describe("Staging onto each platform's /opt/cni/bin", labels.Stager, func() {
		for _, want := range platformLayouts {
			Context("on a "+want.layout+" node", Ordered, ContinueOnFailure, func() {
				var (
					harness *stager.Harness
					res     stager.Result
				)

				BeforeAll(func(ctx SpecContext) {
					l, err := layout(want.layout)
					Expect(err).NotTo(HaveOccurred())
					harness, res, err = stageOnce(ctx, r, stager.Scenario{Name: want.layout, Layout: l}, "STG-04", l.Title+" layout: before/after staging")
					Expect(err).NotTo(HaveOccurred())
				})

				// "staging adds the ten it does not carry and rewrites the four [...]" — each layout's sentence is its guide field.
				It(fmt.Sprintf("[STG-04] matches the guide's table: %d added, %d rewritten, untouched: %s", want.added, want.rewritten, orNone(want.untouched)), labels.Claim("STG-04"), func() {
					By("the guide: " + want.guide)
					var added, rewritten []string
					for _, c := range res.Changes {
						switch c.Verdict {
						case stager.Added:
							added = append(added, c.Name)
						case stager.Replaced, stager.RewrittenInPlace:
							rewritten = append(rewritten, c.Name)
							Expect(c.Before.Version).To(Equal(harness.ImageVersion()), "%s: the guide's rewritten files carry the image's version on both sides", c.Name)
						}
					}
					Expect(added).To(HaveLen(want.added), "the layout's missing plugins must be added; added: %v\n%s", added, describeRun(res))
					Expect(rewritten).To(HaveLen(want.rewritten), "the layout's "+failures.SameNameRewritten+", whatever their version; rewritten: %v\n%s", rewritten, describeRun(res))
					for _, n := range want.untouched {
						Expect(res.Change(n).Verdict).To(Equal(stager.Untouched), "%s\n%s", n, describeRun(res))
					}
					for _, p := range stager.StagedPlugins {
						f, ok := res.After.Get(p)
						Expect(ok).To(BeTrue(), "%s missing afterwards", p)
						Expect(f.Version).To(Equal(harness.ImageVersion()), "%s afterwards: %s", p, f.Describe())
					}
				})

				// "It installs 14 of the upstream reference plugins"
				It("[STG-01] leaves the 14 reference plugins, byte-identical to the image's, mode 0755, and nothing else new", labels.Claim("STG-01"), func() {
					Expect(res.LogLines()).NotTo(ContainElement(skipLine), skippedStaging(harness))
					Expect(res.After.Files).To(cnibin.HoldTheFourteen(imagePlugins(harness)).AndNothingElseWritten(written(res)).Showing(describeRun(res)))
				})

				// "[It] leaves loopback, dhcp, dummy and tap alone" — and CLAIMS.md STG-02: "nor any file that is not an image plugin".
				It("[STG-02] leaves loopback, dhcp, dummy, tap and foreign plugins alone: present ones untouched, absent ones absent", labels.Claim("STG-02"), func() {
					for _, n := range want.untouched {
						Expect(res.Change(n).Verdict).To(Equal(stager.Untouched), "%s: %s\n%s", n, atFault(harness, n), describeRun(res))
					}
					for _, n := range want.absent {
						Expect(res.Change(n).Verdict).To(Equal(stager.Absent), "%s appeared: %s\n%s", n, atFault(harness, n), describeRun(res))
					}
				})

				// "No temporary file is left in /opt/cni/bin after a run" (CLAIMS.md)
				It("[STG-08] leaves no temporary file behind", labels.Claim("STG-08"), func() {
					Expect(leftovers(harness, res)).To(BeEmpty(), failures.NoTemporaryFile)
				})
			})
		}
	})
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
