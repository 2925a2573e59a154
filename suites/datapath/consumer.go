package datapath

import (
	"slices"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/failures"
	"github.com/cozystack/vlan-conformance/framework/guestnet"
	"github.com/cozystack/vlan-conformance/framework/nodenet"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/subject"
	"github.com/cozystack/vlan-conformance/suites/framework"
	"github.com/cozystack/vlan-conformance/suites/labels"
	"github.com/cozystack/vlan-conformance/suites/skip"
)

// releaseBound is how long a deleted consumer may keep holding the
// sub-interface: a cluster's runtime runs CNI DEL after the pod object goes.
const releaseBound = 30 * time.Second

// A macvlan node moved to the guide's bridge (the guide: "netplan apply
// cannot move an interface into a bridge while a consumer still holds it
// [...] Remove the consumer first"):
//
//	consumer running:  uplink.100 (node address) ── macvlan child ── pod
//	                   br100 ◀─╳─ enslave uplink.100: refused (EBUSY)
//	consumer gone:     uplink.100 ── br100 (node address) ── veth ── pod ──▶ gateway
//
// The consumer is a pod holding a macvlan attachment: the same kernel
// object (a macvlan child of uplink.100) a virt-launcher pod holds. The
// workload on the result is a pod too: the claim is about the node's step
// 1, and VLAN-01 proves bridge binding on it; neither needs a guest boot.
//
// It is the macvlan container's last context (macvlanSpecs): by then
// VLAN-03's and VLAN-04's macvlan children are deleted, and vm-mv, booted
// ahead for VLAN-03, was used before this spec re-cabled its parent, not
// deleted unused and booted again.
func consumerSpecs(f *framework.Framework) {
	Context("moved to the guide's bridge", func() {
		It("[VLAN-13] is refused while a macvlan consumer holds uplink.100, and works once the consumer is gone", labels.Claim("VLAN-13"), func(ctx SpecContext) {
			p, err := f.Platform(ctx)
			Expect(err).NotTo(HaveOccurred(), "building the platform")
			node := p.MacvlanNode()       // the container's BeforeAll skipped a platform without one
			framework.DisruptsNodes(node) // it re-cables the macvlan node
			parent := node.ParentPoint().Iface
			// A VM booted ahead on a macvlan attachment (VLAN-03's) holds a
			// child of the parent too: only this spec's consumer may.
			Expect(framework.SetAside(ctx, func(s platform.VMSpec) bool {
				return s.Node == node && slices.Contains(s.Networks, "vlan100-macvlan")
			})).To(Succeed(), "deleting the VMs booted ahead on a macvlan attachment on %s", node.Name())
			Expect(f.ApplyNAD(ctx, "vlan100-macvlan", "vlan100-macvlan")).To(Succeed())
			Expect(f.ApplyNAD(ctx, "vlan100", subject.GuideNADFixture)).To(Succeed())

			By("a pod holding a macvlan attachment on " + parent)
			consumer, err := f.StartVM(ctx, platform.VMSpec{Name: "pod-consumer", Node: node, Networks: []string{"vlan100-macvlan"}, Binding: platform.NoBinding})
			Expect(err).NotTo(HaveOccurred(), "starting pod-consumer with a macvlan attachment")

			By("step 1 while it runs: the kernel refuses to enslave " + parent)
			undo, err := nodenet.BridgeParent(ctx, node)
			skip.IfNotObservable(err)
			if err == nil {
				// Put the node back before failing, for the specs after this one.
				Expect(undo()).To(Succeed(), "returning %s to its macvlan wiring", node.Name())
			}
			f.Note("enslaving %s to %s on %s with pod-consumer running: %v", parent, fabric.BridgeName, node.Name(), err)
			Expect(err).To(MatchError(syscall.EBUSY), "the kernel "+failures.RefusesToEnslave+" %s while the macvlan consumer holds it", parent)
			bridges, err := nodenet.Bridges(ctx, node)
			Expect(err).NotTo(HaveOccurred())
			Expect(bridges).NotTo(HaveKey(fabric.BridgeName), "a refused step 1 must leave no %s behind: %v", fabric.BridgeName, bridges)

			By("the consumer removed first, as the guide says")
			Expect(consumer.Delete(ctx)).To(Succeed(), "deleting pod-consumer")
			// A cluster tears the pod's attachment down after the API
			// object goes (the kubelet, then the runtime's CNI DEL): each
			// refused try leaves the node as it was.
			gone := time.Now()
			Eventually(func() error {
				undo, err = nodenet.BridgeParent(ctx, node)
				return err
			}).WithContext(ctx).WithTimeout(releaseBound).WithPolling(time.Second).Should(Succeed(),
				"with the consumer gone, %s must be enslaved to %s within %s", parent, fabric.BridgeName, releaseBound)
			f.Note("step 1 succeeded %s after pod-consumer was deleted", time.Since(gone).Round(100*time.Millisecond))
			DeferCleanup(func() { Expect(undo()).To(Succeed(), "returning %s to its macvlan wiring", node.Name()) })
			bridges, err = nodenet.Bridges(ctx, node)
			Expect(err).NotTo(HaveOccurred())
			f.Note("bridges on %s after step 1: %v", node.Name(), bridges)
			Expect(bridges[fabric.BridgeName]).To(ConsistOf(parent), "%s's one port must be %s", fabric.BridgeName, parent)

			By("and the result carries traffic: a pod on the bridge NAD reaches the gateway through the new " + fabric.BridgeName)
			guest, err := f.StartVM(ctx, platform.VMSpec{Name: "pod-moved", Node: node, Networks: []string{"vlan100"}, Binding: platform.NoBinding})
			Expect(err).NotTo(HaveOccurred(), "starting pod-moved on %s's new %s", node.Name(), fabric.BridgeName)
			gw := p.Gateway().Address()
			res, err := guestnet.Ping(ctx, guest, gw)
			Expect(err).NotTo(HaveOccurred())
			f.Note("%s (%s) on %s -> gateway %s: %d/%d echo replies", guest.Name(), guest.MAC(), node.Name(), gw, res.Received, res.Sent)
			Expect(res.Received).To(BeNumerically(">", 0), "guest %s on the re-provisioned %s must reach the gateway %s", guest.Name(), node.Name(), gw)
		})
	})
}
