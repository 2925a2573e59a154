package datapath

import (
	"syscall"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/run"
	"github.com/cozystack/vlan-conformance/suites/framework"
	"github.com/cozystack/vlan-conformance/suites/labels"
	"github.com/cozystack/vlan-conformance/suites/skip"
)

// A macvlan node moved to the guide's bridge (the guide: "netplan apply
// cannot move an interface into a bridge while a consumer still holds it
// [...] Remove the consumer first"):
//
//	consumer running:  uplink.100 (node address) ── macvlan child ── pod
//	                   br100 ◀─╳─ enslave uplink.100: refused (EBUSY)
//	consumer gone:     uplink.100 ── br100 (node address) ── veth ── pod ── guest ──▶ gateway
//
// The consumer is a pod holding a macvlan attachment: the same kernel
// object (a macvlan child of uplink.100) a virt-launcher pod holds, without
// a guest boot the claim does not need.
func consumerSpecs(r *run.Run) {
	Describe("Moving a macvlan node to the guide's bridge", labels.Datapath, func() {
		f := framework.New(r, "consumer")

		It("[VLAN-13] is refused while a macvlan consumer holds uplink.100, and works once the consumer is gone", labels.Claim("VLAN-13"), func(ctx SpecContext) {
			p, err := f.Platform(ctx)
			Expect(err).NotTo(HaveOccurred(), "building the platform")
			node := p.MacvlanNode()
			if node == nil {
				Skip("no node provisioned for macvlan on this platform (vendor mode has one, per the guide)")
			}
			parent := node.ParentPoint().Iface
			Expect(f.ApplyNAD(ctx, "vlan100-macvlan", "vlan100-macvlan")).To(Succeed())
			Expect(f.ApplyNAD(ctx, "vlan100", config.GuideNADFixture)).To(Succeed())

			By("a pod holding a macvlan attachment on " + parent)
			consumer, err := f.StartVM(ctx, platform.VMSpec{Name: "pod-consumer", Node: node, Networks: []string{"vlan100-macvlan"}, Binding: platform.NoBinding})
			Expect(err).NotTo(HaveOccurred(), "starting pod-consumer with a macvlan attachment")

			By("step 1 while it runs: the kernel refuses to enslave " + parent)
			undo, err := node.BridgeParent(ctx)
			skip.IfNotObservable(err)
			if err == nil {
				// Put the node back before failing, for the specs after this one.
				Expect(undo()).To(Succeed(), "returning %s to its macvlan wiring", node.Name())
			}
			f.Note("enslaving %s to %s on %s with pod-consumer running: %v", parent, fabric.BridgeName, node.Name(), err)
			Expect(err).To(MatchError(syscall.EBUSY), "the kernel must refuse to enslave %s while the macvlan consumer holds it", parent)
			bridges, err := node.Bridges(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(bridges).NotTo(HaveKey(fabric.BridgeName), "a refused step 1 must leave no %s behind: %v", fabric.BridgeName, bridges)

			By("the consumer removed first, as the guide says")
			Expect(consumer.Delete(ctx)).To(Succeed(), "deleting pod-consumer")
			undo, err = node.BridgeParent(ctx)
			Expect(err).NotTo(HaveOccurred(), "with the consumer gone, %s must be enslaved to %s", parent, fabric.BridgeName)
			DeferCleanup(func() { Expect(undo()).To(Succeed(), "returning %s to its macvlan wiring", node.Name()) })
			bridges, err = node.Bridges(ctx)
			Expect(err).NotTo(HaveOccurred())
			f.Note("bridges on %s after step 1: %v", node.Name(), bridges)
			Expect(bridges[fabric.BridgeName]).To(ConsistOf(parent), "%s's one port must be %s", fabric.BridgeName, parent)

			By("and VLAN-01 holds on the result: a guest on the bridge NAD reaches the gateway")
			guest, err := f.StartVM(ctx, platform.VMSpec{Name: "vm-moved", Node: node, Networks: []string{"vlan100"}})
			Expect(err).NotTo(HaveOccurred(), "starting vm-moved on %s's new %s", node.Name(), fabric.BridgeName)
			gw := p.Gateway().Address()
			res, err := guest.Ping(ctx, gw)
			Expect(err).NotTo(HaveOccurred())
			f.Note("guest %s (%s) on %s -> gateway %s: %d/%d echo replies", guest.Name(), guest.MAC(), node.Name(), gw, res.Received, res.Sent)
			Expect(res.Received).To(BeNumerically(">", 0), "guest %s on the re-provisioned %s must reach the gateway %s", guest.Name(), node.Name(), gw)
		})
	})
}
