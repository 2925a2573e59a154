package datapath

import (
	"context"
	"net"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cozystack/vlan-conformance/framework/failures"
	"github.com/cozystack/vlan-conformance/framework/guestnet"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/probe"
	"github.com/cozystack/vlan-conformance/framework/run"
	"github.com/cozystack/vlan-conformance/framework/subject"
	"github.com/cozystack/vlan-conformance/suites/framework"
	"github.com/cozystack/vlan-conformance/suites/labels"
	"github.com/cozystack/vlan-conformance/suites/wire"
)

// spoofedMAC is a locally administered MAC no attachment of the run has.
var spoofedMAC = net.HardwareAddr{0x02, 0x00, 0x5e, 0x0c, 0x00, 0x12}

// The guide's NAD with seed 003's "macspoofchk": true. The bridge plugin
// then has the node drop, in an nftables bridge-family prerouting chain,
// every frame arriving from the pod's veth whose source MAC is not the
// one the pod's interface was made with; bridge binding hands that MAC to
// the guest.
//
//	gateway ──trunk── uplink ── uplink.100 ── br100 ── veth ══ pod ── guest
//	                                                    ║
//	                      nft: iifname veth, ether saddr != pod MAC → drop
func spoofCheckSpecs(r *run.Run) {
	Describe("A NAD with macspoofchk on", labels.Datapath, func() {
		f := framework.New(r, "spoofchk")
		// Its guest boots ahead (framework.Prestart): it needs only its NAD.
		spoofchkVM := f.Prestart("vm-spoofchk", func(ctx context.Context, p platform.Platform) (platform.VMSpec, error) {
			err := f.ApplyNADSetting(ctx, "vlan100-spoofchk", subject.GuideNADFixture, "macspoofchk", true)
			return platform.VMSpec{Node: p.BridgeNodes()[0], Networks: []string{"vlan100-spoofchk"}}, err
		}, labels.Datapath, labels.Claim("VLAN-12"))

		It("[VLAN-12] passes the guest's own frames and drops at the node a frame from another source MAC", labels.Claim("VLAN-12"), func(ctx SpecContext) {
			p, err := f.Platform(ctx)
			Expect(err).NotTo(HaveOccurred(), "building the platform")
			node := p.BridgeNodes()[0]
			gw := p.Gateway().Address()

			By("the guide's NAD with macspoofchk: true")
			guest, err := spoofchkVM.Take(ctx)
			Expect(err).NotTo(HaveOccurred(), "starting the VM on the NAD with macspoofchk")

			By("the guest's own traffic passes: it sends from the MAC its attachment was made with")
			var res probe.PingResult
			own := wire.While(ctx, p.Trunk(node), f.Artifact("trunk-own.pcap"), func() {
				res, err = guestnet.Ping(ctx, guest, gw, probe.WithCount(3), probe.WithInterval(200*time.Millisecond), probe.WithTimeout(time.Second))
			})
			Expect(err).NotTo(HaveOccurred())
			f.Note("guest %s (%s) -> gateway %s: %d/%d replies; frames from %s on the trunk: %d (trunk-own.pcap)", guest.Name(), guest.MAC(), gw, res.Received, res.Sent, guest.MAC(), len(own.From(guest.MAC())))
			Expect(res.Received).To(BeNumerically(">", 0), "with macspoofchk on, the guest must still reach the gateway %s", gw)
			Expect(own.From(guest.MAC())).NotTo(BeEmpty(), "the guest's own frames must cross the trunk:\n%s", own.Summary(20))

			By("a frame from " + spoofedMAC.String() + " leaves the guest and never reaches the trunk")
			// At the guest itself, not the trunk wire.Egress falls back to:
			// the trunk is where the frames must be missing.
			leaving := wire.Start(guest.VLANPoint(), f.Artifact("guest-spoofed.pcap"))
			trunk := wire.Start(p.Trunk(node), f.Artifact("trunk-spoofed.pcap"))
			const sends = 3
			for i := 0; i < sends && err == nil; i++ {
				err = guestnet.SpoofARP(ctx, guest, spoofedMAC, gw)
				time.Sleep(200 * time.Millisecond)
			}
			sent, crossed := wire.Stop(leaving), wire.Stop(trunk)
			Expect(err).NotTo(HaveOccurred(), "sending from %s in the guest", spoofedMAC)
			f.Note("ARP requests for %s from %s: %d seen leaving the guest (guest-spoofed.pcap), %d on the trunk (trunk-spoofed.pcap)", gw, spoofedMAC, len(sent.From(spoofedMAC)), len(crossed.From(spoofedMAC)))
			Expect(sent.From(spoofedMAC)).To(HaveLen(sends), "each frame from %s must be seen leaving the guest:\n%s", spoofedMAC, sent.Summary(20))
			Expect(crossed.From(spoofedMAC)).To(BeEmpty(), failures.SpoofchkDrops+" from %s at the node:\n%s", spoofedMAC, crossed.Summary(20))
		})
	})
}
