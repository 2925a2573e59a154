package datapath

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cozystack/vlan-conformance/fixtures"
	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/suites/labels"
	"github.com/cozystack/vlan-conformance/suites/skip"
)

var _ = Describe("A node without the bridge plugin", labels.Datapath, func() {
	// "...a missing binary makes the NAD fail with failed to find plugin "bridge" in path [/opt/cni/bin]."
	It("[VLAN-09] fails the attachment with the missing-plugin error", labels.Claim("VLAN-09"), func(ctx SpecContext) {
		p, err := platform.Ready(ctx)
		Expect(err).NotTo(HaveOccurred(), "building the platform")
		node := p.BridgeNodes()[len(p.BridgeNodes())-1]
		restore, err := node.WithoutPlugin(ctx, "bridge")
		skip.IfNotObservable(err)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(restore()).To(Succeed(), "putting bridge back on %s", node.Name()) })
		Expect(p.ApplyNAD(ctx, tenant, platform.NAD{Name: "vlan100", Config: fixtures.NAD("vlan100-bridge")})).To(Succeed())

		_, err = startVM(ctx, p, "vm-noplugin", node, "vlan100", nextAddr(p.Config().GuestAddr, 20))
		evidence.Note("VLAN-09", "node %s without bridge in %s; attachment error: %v", node.Name(), node.CNIBinDir(), err)
		want := fmt.Sprintf("failed to find plugin %q in path [%s]", "bridge", node.CNIBinDir())
		Expect(err).To(MatchError(ContainSubstring(want)), "the attachment on %s must fail naming the missing plugin", node.Name())
	})
})
