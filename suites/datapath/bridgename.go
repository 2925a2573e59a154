package datapath

import (
	"context"
	"fmt"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/failures"
	"github.com/cozystack/vlan-conformance/framework/guestnet"
	"github.com/cozystack/vlan-conformance/framework/nodenet"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/probe"
	"github.com/cozystack/vlan-conformance/framework/run"
	"github.com/cozystack/vlan-conformance/framework/subject"
	"github.com/cozystack/vlan-conformance/suites/framework"
	"github.com/cozystack/vlan-conformance/suites/labels"
	"github.com/cozystack/vlan-conformance/suites/skip"
	"github.com/cozystack/vlan-conformance/suites/wire"
)

// wrongBridge is a bridge step 1 never made: a NAD's typo, or a bridge
// renamed on the nodes but not in the NAD.
const wrongBridge = "br101"

// A NAD naming another bridge (the guide: "bridge must match the bridge
// name from step 1"):
//
//	gateway ──trunk── uplink ── uplink.100 ── br100          (step 1)
//	                                          br101 ── veth ── pod ── guest
//	                                          (made by the bridge plugin, one port)
func bridgeNameSpecs(r *run.Run) {
	Describe("A NAD whose bridge is not step 1's", labels.Datapath, func() {
		f := framework.New(r, "brname")
		// Its guest boots ahead (framework.Prestart): the node's bridges
		// are read right before its VM is made, which is what "before"
		// means here, whenever that is. The preparation may run in the
		// background while the spec's clean-up reads node: mu orders them.
		var (
			mu     sync.Mutex
			node   platform.Node
			before map[string][]string
		)
		elsewhereVM := f.Prestart("vm-elsewhere", func(ctx context.Context, p platform.Platform) (platform.VMSpec, error) {
			n := p.BridgeNodes()[0]
			mu.Lock()
			node = n
			mu.Unlock()
			bridges, err := nodenet.Bridges(ctx, n)
			if err != nil {
				return platform.VMSpec{}, err
			}
			// A run stopped after this VM was made, before its spec ran,
			// leaves the bridge behind with no port: gone before "before".
			if ports, ok := bridges[wrongBridge]; ok && len(ports) == 0 {
				if err := nodenet.DeleteBridge(ctx, n, wrongBridge); err != nil {
					return platform.VMSpec{}, fmt.Errorf("an earlier run's %s on %s, with no port: %w", wrongBridge, n.Name(), err)
				}
				if bridges, err = nodenet.Bridges(ctx, n); err != nil {
					return platform.VMSpec{}, err
				}
			}
			if _, ok := bridges[wrongBridge]; ok {
				return platform.VMSpec{}, fmt.Errorf("%s must not be on %s before its NAD's VM is made: %v", wrongBridge, n.Name(), bridges)
			}
			mu.Lock()
			before = bridges
			mu.Unlock()
			err = f.ApplyNADSetting(ctx, "vlan100-elsewhere", subject.GuideNADFixture, "bridge", wrongBridge)
			return platform.VMSpec{Node: n, Networks: []string{"vlan100-elsewhere"}}, err
		}, labels.Datapath, labels.Claim("VLAN-14"))
		prepared := func() (platform.Node, map[string][]string) {
			mu.Lock()
			defer mu.Unlock()
			return node, before
		}

		It("[VLAN-14] gets a new bridge of its own: the attachment succeeds, nothing reports an error, and the guest reaches nothing", labels.Claim("VLAN-14"), func(ctx SpecContext) {
			p, err := f.Platform(ctx)
			Expect(err).NotTo(HaveOccurred(), "building the platform")
			// The bridge plugin makes the bridge a NAD names and never
			// removes it: the spec does, once its VM is gone (node is
			// set once the VM was prepared).
			DeferCleanup(func(ctx SpecContext) {
				node, _ := prepared()
				if node == nil {
					return
				}
				if now, err := nodenet.Bridges(ctx, node); err == nil {
					if _, ok := now[wrongBridge]; ok {
						Expect(nodenet.DeleteBridge(ctx, node, wrongBridge)).To(Succeed())
					}
				}
			})

			By("a NAD like the guide's, naming " + wrongBridge)
			guest, err := elsewhereVM.Take(ctx)
			skip.IfNotObservable(err)
			Expect(err).NotTo(HaveOccurred(), "the attachment succeeds: nothing reports the bridge name")
			node, before := prepared()

			By("the bridge plugin made " + wrongBridge + ", the pod's interface its only port, none of br100's")
			after, err := nodenet.Bridges(ctx, node)
			Expect(err).NotTo(HaveOccurred())
			f.Note("bridges on %s before the VM: %v; after: %v", node.Name(), before, after)
			Expect(after).To(HaveKey(wrongBridge), failures.NewBridgeMade+" %s on %s for the NAD: %v", wrongBridge, node.Name(), after)
			Expect(after[wrongBridge]).To(HaveLen(1), "%s's only port must be the pod's interface: %v", wrongBridge, after[wrongBridge])
			Expect(after[fabric.BridgeName]).NotTo(ContainElement(after[wrongBridge][0]), "the pod's interface must not be a port of br100 too")

			By("and the guest reaches nothing: its requests never reach the trunk")
			gw := p.Gateway().Address()
			var res probe.PingResult
			onTrunk := wire.While(ctx, p.Trunk(node), f.Artifact("trunk.pcap"), func() {
				res, err = guestnet.Ping(ctx, guest, gw, probe.WithCount(3), probe.WithInterval(200*time.Millisecond), probe.WithTimeout(time.Second))
			})
			Expect(err).NotTo(HaveOccurred())
			f.Note("guest %s -> gateway %s: %d/%d replies, send error %v; frames from the guest on the trunk: %d (trunk.pcap)", guest.Name(), gw, res.Received, res.Sent, res.Err, len(onTrunk.From(guest.MAC())))
			Expect(res.Sent).To(BeNumerically(">", 0), "the guest's echo requests must have been sent")
			Expect(onTrunk.From(guest.MAC())).To(BeEmpty(), "no frame of the guest may reach the trunk through %s:\n%s", wrongBridge, onTrunk.Summary(20))
			Expect(res.Received).To(BeZero(), "the guest must reach nothing on VLAN 100 through %s", wrongBridge)
		})
	})
}
