package stager

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cozystack/vlan-conformance/framework/failures"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/run"
	"github.com/cozystack/vlan-conformance/framework/stager"
	"github.com/cozystack/vlan-conformance/suites/cnibin"
	"github.com/cozystack/vlan-conformance/suites/framework"
	"github.com/cozystack/vlan-conformance/suites/labels"
	"github.com/cozystack/vlan-conformance/suites/skip"
)

// The names the stager must leave alone on a node (STG-02): the reference
// plugins it never writes, and a plugin of another package.
var leftAlone = append(slices.Clone(stager.LeftAlone), "vcf-foreign-plugin")

// payloadPlugins is the image's /cni-plugins, as the platform read it,
// as STG-01's matcher takes it.
func payloadPlugins(payload map[string]stager.File) cnibin.Image {
	out := cnibin.Image{}
	for n, f := range payload {
		if f.Kind == "file" {
			out[n] = f.Hash
		}
	}
	return out
}

// The stager as a platform runs it on its own nodes (platform.Stager: the
// Multus DaemonSet's init container on a cluster's nodes, its replica on
// the lab's): what it left in each node's /opt/cni/bin, and what it does
// when run again there. Not labelled stager: that label selects the specs
// needing no platform.
func nodeSpecs(r *run.Run) {
	Describe("The stager in the Multus DaemonSet, on the nodes", Ordered, ContinueOnFailure, func() {
		f := framework.New(r, "stager")
		BeforeAll(framework.Disrupts) // its specs restart Multus on the nodes
		var (
			p       platform.Platform
			s       platform.Stager
			node    platform.Node
			payload map[string]stager.File
		)

		BeforeAll(func(ctx SpecContext) {
			var err error
			p, err = f.Platform(ctx)
			Expect(err).NotTo(HaveOccurred(), "building the platform")
			var ok bool
			if s, ok = platform.As[platform.Stager](p); !ok {
				Skip(p.Name() + " renders no Multus DaemonSet: no stager runs on its nodes")
			}
			node = p.BridgeNodes()[0]
			payload, err = s.Payload(ctx, node)
			skip.IfNotObservable(err)
			Expect(err).NotTo(HaveOccurred(), "reading /cni-plugins in the Multus container on %s", node.Name())
		})

		// "...copies these 14 upstream reference plugins into /opt/cni/bin on every node."
		It("[STG-01] put the 14 plugins into every node's /opt/cni/bin, byte-identical to the image's copies", labels.Claim("STG-01"), func(ctx SpecContext) {
			nodes := p.BridgeNodes()
			if m := p.MacvlanNode(); m != nil {
				nodes = append(nodes, m)
			}
			for _, n := range nodes {
				bin, err := s.CNIBin(ctx, n)
				Expect(err).NotTo(HaveOccurred())
				for _, name := range stager.StagedPlugins {
					f.Note("%s:/opt/cni/bin/%s sha256 %.12s mode %o; image /cni-plugins/%s sha256 %.12s", n.Name(), name, bin[name].Hash, uint32(bin[name].Perm), name, payload[name].Hash)
				}
				Expect(bin).To(cnibin.HoldTheFourteen(payloadPlugins(payload)).In(n.Name() + ":/opt/cni/bin"))
			}
		})

		// "...replaces a same-name file every time it runs."
		It("[STG-03] replaces a hand-placed bridge on its next run, by rename", labels.Claim("STG-03"), func(ctx SpecContext) {
			before, after, restore, err := restageOverLocalFiles(ctx, s, node)
			if restore != nil {
				DeferCleanup(restore)
			}
			Expect(err).NotTo(HaveOccurred())
			f.Note("%s:/opt/cni/bin/bridge before: inode %d sha256 %.12s; after the re-run: inode %d sha256 %.12s; image copy %.12s",
				node.Name(), before["bridge"].Ino, before["bridge"].Hash, after["bridge"].Ino, after["bridge"].Hash, payload["bridge"].Hash)
			Expect(after["bridge"].Hash).To(Equal(payload["bridge"].Hash), "the hand-placed bridge must not survive the stager")
			Expect(after["bridge"].Ino).NotTo(Equal(before["bridge"].Ino), "the new bridge must come by rename (a new inode), not by writing into the old file")
		})

		// "The container reports these and exits successfully on purpose, so the
		// pod shows Ready and kubectl get will not point you here."
		It("[STG-11] leaves the Multus pod Ready when it cannot write a plugin on the node: exit 0, `failed to install:` naming it, its cause earlier in the log", labels.Claim("STG-11"), func(ctx SpecContext) {
			const plugin = "vlan"
			By("a directory at " + node.Name() + ":/opt/cni/bin/" + plugin + ", which no rename can replace")
			restore, err := s.PlaceCNIDir(ctx, node, plugin)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(restore)

			By("the stager runs again on that node: its Multus pod re-created")
			restaged := s.Restage(ctx, node)
			run, err := s.StagerRun(ctx, node)
			Expect(err).NotTo(HaveOccurred(), "reading the stager's run from the API")
			summary, at, found := stager.Summary(run.Log)
			cause := -1
			for i := 0; i < at; i++ {
				if stager.NamesPlugin(run.Log[i], plugin) {
					cause = i
					break
				}
			}
			f.Note("pod %s Ready %v; %s terminated %v, exit code %d, termination message %q; log:\n%s",
				run.Pod, run.Ready, stager.InitContainerName, run.Terminated, run.ExitCode, run.Message, strings.Join(run.Log, "\n"))
			Expect(restaged).NotTo(HaveOccurred(), failures.MultusPodReady)
			Expect(run.Ready).To(BeTrue(), "pod %s must show Ready", run.Pod)
			Expect(run.Terminated).To(BeTrue(), "%s must have run to its end", stager.InitContainerName)
			Expect(run.ExitCode).To(BeZero(), "%s exits 0 on purpose", stager.InitContainerName)
			Expect(run.Message).To(HavePrefix(stager.SummaryPrefix), "the termination message kubectl describe shows")
			Expect(stager.NamesPlugin(run.Message, plugin)).To(BeTrue(), "the termination message must name %s: %q", plugin, run.Message)
			Expect(found).To(BeTrue(), "the log must have a line beginning %q", stager.SummaryPrefix)
			Expect(stager.NamesPlugin(summary, plugin)).To(BeTrue(), "the log's summary must name %s: %q", plugin, summary)
			Expect(cause).To(BeNumerically(">=", 0), "a line naming %s, its cause, must come before the summary (line %d)", plugin, at+1)

			By("and every other plugin is installed")
			bin, err := s.CNIBin(ctx, node)
			Expect(err).NotTo(HaveOccurred())
			Expect(bin[plugin].Kind).To(Equal("dir"), "the directory at %s must be left as it is", plugin)
			for _, name := range stager.StagedPlugins {
				if name != plugin {
					Expect(bin[name].Hash).To(Equal(payload[name].Hash), "%s must still be installed on %s, the image's copy", name, node.Name())
				}
			}
		})

		// "loopback, dhcp, dummy and tap are left alone ... as is anything else in /opt/cni/bin."
		// Its own run of the stager: every spec passes alone and in any order.
		It("[STG-02] leaves loopback, dhcp, dummy, tap and a foreign plugin as they were across a run", labels.Claim("STG-02"), func(ctx SpecContext) {
			before, after, restore, err := restageOverLocalFiles(ctx, s, node)
			if restore != nil {
				DeferCleanup(restore)
			}
			Expect(err).NotTo(HaveOccurred())
			for _, name := range leftAlone {
				b, had := before[name]
				a, has := after[name]
				f.Note("%s:/opt/cni/bin/%s before: %v inode %d sha256 %.12s mtime %s; after: %v inode %d sha256 %.12s mtime %s",
					node.Name(), name, had, b.Ino, b.Hash, b.MTime.Format("15:04:05.000"), has, a.Ino, a.Hash, a.MTime.Format("15:04:05.000"))
				Expect(has).To(Equal(had), "%s must neither appear nor vanish", name)
				if had {
					Expect(a.Ino).To(Equal(b.Ino), "%s must keep its inode", name)
					Expect(a.Hash).To(Equal(b.Hash), "%s must keep its content", name)
					Expect(a.MTime).To(BeTemporally("==", b.MTime), "%s must keep its mtime", name)
				}
			}
		})
	})
}

// restageOverLocalFiles places an administrator's bridge and a foreign
// plugin on the node, then re-runs the stager there (its Multus pod
// re-created), and returns /opt/cni/bin before and after the run. restore
// puts back what the node held before the placements (the bridge where the
// stager did not replace it, and no foreign plugin); it is set once the
// first file is placed.
func restageOverLocalFiles(ctx context.Context, s platform.Stager, n platform.Node) (before, after map[string]stager.File, restore func() error, err error) {
	var restores []func() error
	restore = func() error {
		var errs []error
		for i := len(restores) - 1; i >= 0; i-- {
			errs = append(errs, restores[i]())
		}
		return errors.Join(errs...)
	}
	for _, f := range []struct{ name, content string }{
		{"bridge", "#!/bin/sh\necho hand-placed bridge\n"},
		{"vcf-foreign-plugin", "#!/bin/sh\necho another package's plugin\n"},
	} {
		r, err := s.PlaceCNIFile(ctx, n, f.name, []byte(f.content))
		if err != nil {
			if len(restores) == 0 {
				return nil, nil, nil, err
			}
			return nil, nil, restore, err
		}
		restores = append(restores, r)
	}
	if before, err = s.CNIBin(ctx, n); err != nil {
		return nil, nil, restore, err
	}
	if err = s.Restage(ctx, n); err != nil {
		return nil, nil, restore, fmt.Errorf("re-running the stager on %s: %w", n.Name(), err)
	}
	after, err = s.CNIBin(ctx, n)
	return before, after, restore, err
}
