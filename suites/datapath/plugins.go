package datapath

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cozystack/vlan-conformance/framework/failures"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/run"
	"github.com/cozystack/vlan-conformance/suites/framework"
	"github.com/cozystack/vlan-conformance/suites/labels"
	"github.com/cozystack/vlan-conformance/suites/skip"
)

func pluginSpecs(r *run.Run) {
	Describe("A node without the bridge plugin", labels.Datapath, framework.BootsNoGuest, func() {
		f := framework.New(r, "no-plugin")
		// "...a missing binary makes the NAD fail with failed to find plugin "bridge" in path [/opt/cni/bin]."
		It("[VLAN-09] fails the attachment with the missing-plugin error", labels.Claim("VLAN-09"), func(ctx SpecContext) {
			p, err := f.Platform(ctx)
			Expect(err).NotTo(HaveOccurred(), "building the platform")
			node := p.BridgeNodes()[len(p.BridgeNodes())-1]
			framework.DisruptsNodes(node) // a node without bridge
			restore, err := node.WithoutPlugin(ctx, "bridge")
			skip.IfNotObservable(err)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func() { Expect(restore()).To(Succeed(), "putting bridge back on %s", node.Name()) })
			Expect(f.ApplyNAD(ctx, "vlan100", "vlan100-bridge")).To(Succeed())

			_, err = f.StartVM(ctx, platform.VMSpec{Name: "vm-noplugin", Node: node, Networks: []string{"vlan100"}})
			f.Note("node %s without bridge in %s; attachment error: %v", node.Name(), node.CNIBinDir(), err)
			// The control's failure is the attachment succeeding; one that
			// fails for another reason (a boot that timed out) is not it.
			Expect(err).To(HaveOccurred(), "the attachment on %s "+failures.NamesMissingPlugin+": it succeeded", node.Name())
			want := fmt.Sprintf("failed to find plugin %q in path [%s]", "bridge", node.CNIBinDir())
			Expect(err).To(MatchError(ContainSubstring(want)), "the attachment on %s failed, but not with the missing-plugin error", node.Name())
		})
	})
}
