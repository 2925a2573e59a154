// Package stager holds the specs for the guide's section "Staging the
// reference CNI plugins" (CLAIMS.md, STG-01..09, STG-11): the multus
// DaemonSet's init container install-cni-plugins.
//
// Most take it from --stager-manifest and run it container-less with
// framework/stager against node layouts (fixtures/stager/layouts) and
// injected faults (label stager: no platform). Each of their Ordered
// containers stages once (or twice) in BeforeAll and its specs read the
// result. Evidence lands in <report-dir>/artifacts/<claim>/<scenario>.md:
// the per-file before/after table, the log and the termination message.
//
// nodes.go and staging_off.go observe it as a platform runs it on its own
// nodes (platform.Stager: the Multus DaemonSet on a cluster's kind
// workers, each with the guide's br100 over uplink.100; in the lab, its
// replica: the same container-less run on each lab node's /opt/cni/bin),
// and skip with the reason on a platform without it; none knows the
// tier's name.
//
// Every spec names its claim in brackets and as a label.
package stager

import (
	"context"
	"fmt"
	"os"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	stagerfixtures "github.com/cozystack/vlan-conformance/fixtures/stager"
	"github.com/cozystack/vlan-conformance/framework/failures"
	"github.com/cozystack/vlan-conformance/framework/run"
	"github.com/cozystack/vlan-conformance/framework/stager"
	"github.com/cozystack/vlan-conformance/suites/cnibin"
	"github.com/cozystack/vlan-conformance/suites/labels"
)

// The guide's log lines.
const (
	skipLine      = "no /cni-plugins in this image; skipping staging"
	summaryPrefix = stager.SummaryPrefix
)

// Specs registers the stager specs with the run. Those on a platform's
// nodes come first: they have tenants, whose addresses follow from their
// place in the spec tree (suites/suite_test.go). The others need only the
// run's configuration and its evidence tree, no platform: no fabric is
// built for them, and none has a tenant.
func Specs(r *run.Run) {
	stagingOffSpecs(r)
	nodeSpecs(r)
	rollSpecs(r)
	executingSpecs(r)
	failureSpecs(r)
	imageSpecs(r)
	installSpecs(r)
	killedSpecs(r)
	unclearableSpecs(r)
	layoutSpecs(r)
	noPluginsDirSpecs(r)
	emptyPluginsDirSpecs(r)
	cniPathSpecs(r)
}

// newHarness builds a harness from the run's flags; it is removed when the
// container is done.
func newHarness(r *run.Run) (*stager.Harness, error) {
	harness, err := stager.NewHarness(r.Subject().StagerOptions(r.Config()))
	if err != nil {
		return nil, err
	}
	DeferCleanup(harness.Close)
	return harness, nil
}

// setUp builds a harness and prepares the scenario's fake node; both are removed
// when the container is done.
func setUp(r *run.Run, sc stager.Scenario) (*stager.Harness, *stager.FakeNode, error) {
	harness, err := newHarness(r)
	if err != nil {
		return nil, nil, err
	}
	node, err := harness.Prepare(sc)
	if err != nil {
		return nil, nil, err
	}
	DeferCleanup(node.Close)
	return harness, node, nil
}

// stageOnce prepares the scenario, stages once and records the evidence
// under claim.
func stageOnce(ctx context.Context, r *run.Run, sc stager.Scenario, claim, title string) (*stager.Harness, stager.Result, error) {
	harness, node, err := setUp(r, sc)
	if err != nil {
		return nil, stager.Result{}, err
	}
	res, err := harness.Stage(ctx, node)
	if err != nil {
		return harness, res, fmt.Errorf("the run could not be made: %w\n%s", err, res.Log)
	}
	return harness, res, writeArtifact(r, claim, sc.Name, title, harness, res)
}

// stagedRun is the one staging run an Ordered container's specs share:
// made by its BeforeAll (stageInBeforeAll), read by the specs after it.
type stagedRun struct {
	harness *stager.Harness
	res     stager.Result
}

// stageInBeforeAll registers the container's BeforeAll: sc staged once onto
// the node layout named node, its artifact filed under claim and title.
func stageInBeforeAll(r *run.Run, node string, sc stager.Scenario, claim, title string) *stagedRun {
	s := &stagedRun{}
	BeforeAll(func(ctx SpecContext) {
		l, err := layout(node)
		Expect(err).NotTo(HaveOccurred())
		sc.Layout = l
		s.harness, s.res, err = stageOnce(ctx, r, sc, claim, title)
		Expect(err).NotTo(HaveOccurred())
	})
	return s
}

// itLeavesNoTemporaryFile registers STG-08 for the container's run.
func itLeavesNoTemporaryFile(s *stagedRun) {
	// "No temporary file is left in /opt/cni/bin after a run, failed or not" (CLAIMS.md)
	It("[STG-08] leaves no temporary file behind", labels.Claim("STG-08"), func() {
		Expect(leftovers(s.harness, s.res)).To(BeEmpty(), failures.NoTemporaryFile+"\n%s", describeRun(s.res))
	})
}

// layout returns a node layout from fixtures/stager/layouts.
func layout(name string) (stager.Layout, error) {
	all, err := stager.LoadLayouts(stagerfixtures.Layouts())
	if err != nil {
		return stager.Layout{}, err
	}
	l, ok := all[name]
	if !ok {
		return stager.Layout{}, fmt.Errorf("no node layout %q in fixtures/stager/layouts", name)
	}
	return l, nil
}

// writeArtifact records a run for the report:
// <report-dir>/artifacts/<claim>/<scenario>.md.
func writeArtifact(r *run.Run, claim, scenario, title string, harness *stager.Harness, res stager.Result) error {
	p := r.Artifacts().Path(claim, scenario+".md")
	if err := os.WriteFile(p, []byte(res.Report(title, harness.InitContainer)), 0o644); err != nil {
		return err
	}
	GinkgoWriter.Printf("stager evidence: %s\n", p)
	return nil
}

// written lists the names a run added or rewrote, sorted.
func written(res stager.Result) []string {
	var out []string
	for _, c := range res.Changes {
		switch c.Verdict {
		case stager.Added, stager.Replaced, stager.RewrittenInPlace:
			out = append(out, c.Name)
		}
	}
	return out
}

// leftovers lists names present after the run that were not there before
// and are neither staged plugins nor plugins the image offers (those are
// STG-01/02's to judge): temporary files, in practice.
func leftovers(harness *stager.Harness, res stager.Result) []string {
	var out []string
	for _, n := range res.After.Names() {
		if _, before := res.Before.Get(n); !before && !stager.IsStaged(n) && !harness.Image.Offers(n) {
			out = append(out, n)
		}
	}
	return out
}

// summary finds the first log line beginning `failed to install:`.
func summary(res stager.Result) (line string, index int, ok bool) {
	return stager.Summary(res.LogLines())
}

// names returns the staged plugins a line names as words.
func names(line string) []string {
	var out []string
	for _, p := range stager.StagedPlugins {
		if stager.NamesPlugin(line, p) {
			out = append(out, p)
		}
	}
	return out
}

// notInstalled lists the staged plugins that are not the image's copy
// afterwards, in the order staging attempts them.
func notInstalled(harness *stager.Harness, res stager.Result) []string {
	var out []string
	for _, p := range stager.StagedPlugins {
		f, ok := res.After.Get(p)
		if !ok || f.Kind != "file" || f.Hash != harness.ImageHash(p) {
			out = append(out, p)
		}
	}
	return out
}

// atFault names the half of the package that put name on the node
// (CLAIMS.md STG-02: "A failure names the half at fault").
func atFault(harness *stager.Harness, name string) string {
	if harness.Image.Offers(name) {
		return fmt.Sprintf(failures.ImageCarried+" %s at /cni-plugins/%s (%s) and the script installed it", name, name, harness.Image)
	}
	return fmt.Sprintf("the script wrote %s, which the image did not offer (its /cni-plugins: %s)", name, harness.Image.Listing())
}

// imagePlugins is the image's /cni-plugins as STG-01's matcher takes it.
func imagePlugins(harness *stager.Harness) cnibin.Image {
	out := cnibin.Image{}
	for _, e := range harness.Image.Entries {
		if e.Kind == "file" {
			out[e.Name] = e.Hash
		}
	}
	return out
}

// skippedStaging is STG-01's failure when the image has no /cni-plugins:
// the guide's own line, as the script logged it, then the image by its
// reference (the release's pinned one, with --image-archive).
func skippedStaging(harness *stager.Harness) string {
	return fmt.Sprintf("install-cni-plugins logged `%s` and installed none of the 14 from %s", skipLine, harness.Image)
}

// describeRun is the context a failed assertion prints.
func describeRun(res stager.Result) string {
	return fmt.Sprintf("exit code %d\n%s\nlog:\n%s", res.ExitCode, res.Table(), res.Log)
}
