package stager

import (
	"errors"
	"fmt"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/failures"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/run"
	"github.com/cozystack/vlan-conformance/framework/stager"
	"github.com/cozystack/vlan-conformance/suites/framework"
	"github.com/cozystack/vlan-conformance/suites/labels"
	"github.com/cozystack/vlan-conformance/suites/skip"
)

// Multus rendered with networking.stageCniPlugins: false, on a platform
// whose Multus the suite installs (platform.Stager: a cluster's, or the
// lab's replica): the stager's init container is gone from the DaemonSet,
// and what it staged stays on the node. Not labelled stager: that label
// selects the specs that need no platform, and this one needs one.
func stagingOffSpecs(r *run.Run) {
	Describe("Multus with stageCniPlugins: false", Ordered, func() {
		f := framework.New(r, "staging-off")
		BeforeAll(framework.Disrupts) // it rolls Multus out twice
		// "If the init container is absent from the Multus pod altogether, staging
		// is off ... nothing in this package removes or restores a plugin."
		It("[STG-09] renders no install-cni-plugins init container and leaves the node's /opt/cni/bin as it was", labels.Claim("STG-09"), func(ctx SpecContext) {
			p, err := f.Platform(ctx)
			Expect(err).NotTo(HaveOccurred(), "building the platform")
			s, ok := platform.As[platform.Stager](p)
			if !ok {
				Skip(p.Name() + " renders no Multus DaemonSet: STG-09 needs a platform whose Multus the suite renders")
			}
			node := p.BridgeNodes()[0]
			before, err := s.CNIBin(ctx, node)
			if err != nil {
				skip.IfNotObservable(err)
			}
			Expect(err).NotTo(HaveOccurred())
			inits, err := s.SetStaging(ctx, false)
			skip.IfNotObservable(err)
			Expect(err).NotTo(HaveOccurred())
			// The run's other specs expect the stager as the run configured it.
			DeferCleanup(func(ctx SpecContext) {
				_, err := s.SetStaging(ctx, true)
				if !errors.Is(err, evidence.ErrNotObservable) {
					Expect(err).NotTo(HaveOccurred(), "turning staging back on")
				}
			})
			after, err := s.CNIBin(ctx, node)
			Expect(err).NotTo(HaveOccurred())
			f.Note("Multus pod template init containers with staging off: %v", inits)
			// Multus's own install-multus-binary rewrites multus-shim and
			// passthru on every start: not the staging this claim is about.
			changed := diffFiles(only(before, referencePlugins()), only(after, referencePlugins()))
			f.Note("%s:/opt/cni/bin across the roll-out: %d files before, %d after; reference plugins changed: %v; all changes: %v", node.Name(), len(before), len(after), changed, diffFiles(before, after))
			Expect(slices.Contains(inits, "install-cni-plugins")).To(BeFalse(), "with staging off the pod template "+failures.NoStagerInitContainer+": %v", inits)
			Expect(changed).To(BeEmpty(), "nothing already staged may be removed, restored or rewritten")
		})
	})
}

// referencePlugins are the 18 names of an upstream release: the 14 staged
// and the 4 left alone.
func referencePlugins() []string {
	return append(slices.Clone(stager.StagedPlugins), "loopback", "dhcp", "dummy", "tap")
}

// only keeps the files named.
func only(files map[string]stager.File, names []string) map[string]stager.File {
	out := map[string]stager.File{}
	for n, st := range files {
		if slices.Contains(names, n) {
			out[n] = st
		}
	}
	return out
}

func diffFiles(before, after map[string]stager.File) []string {
	var out []string
	for n, b := range before {
		a, ok := after[n]
		switch {
		case !ok:
			out = append(out, "removed "+n)
		case a.Hash != b.Hash || a.Kind != b.Kind || a.Perm != b.Perm || !a.MTime.Equal(b.MTime) || a.Ino != b.Ino:
			out = append(out, fmt.Sprintf("changed %s", n))
		}
	}
	for n := range after {
		if _, ok := before[n]; !ok {
			out = append(out, "added "+n)
		}
	}
	slices.Sort(out)
	return out
}
