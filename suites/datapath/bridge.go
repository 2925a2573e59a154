// Package datapath proves the guide's datapath claims (CLAIMS.md VLAN-01..10)
// on whatever platform the run has: the lab's netns topology (see
// framework/fabric for its diagram) or a cluster.
package datapath

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/failures"
	"github.com/cozystack/vlan-conformance/framework/guestnet"
	"github.com/cozystack/vlan-conformance/framework/hops"
	"github.com/cozystack/vlan-conformance/framework/nodenet"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/probe"
	"github.com/cozystack/vlan-conformance/framework/run"
	"github.com/cozystack/vlan-conformance/suites/framework"
	"github.com/cozystack/vlan-conformance/suites/labels"
	"github.com/cozystack/vlan-conformance/suites/skip"
	"github.com/cozystack/vlan-conformance/suites/wire"
)

// Specs registers the datapath specs with the run.
func Specs(r *run.Run) {
	bridgeSpecs(r)
	macvlanSpecs(r)
	pluginSpecs(r)
	bridgeNameSpecs(r)
	spoofCheckSpecs(r)
	nadNamespaceSpecs(r)
	step1Specs(r) // last: the tenants before it keep their address blocks
}

// bridgeClaims are the claims of the bridge container's specs: each runs
// on vm-a.
var bridgeClaims = []string{"VLAN-01", "VLAN-02", "VLAN-05", "VLAN-06", "VLAN-07", "VLAN-08", "VLAN-10"}

func bridgeSpecs(r *run.Run) {
	Describe("A VM bridged onto VLAN 100 through br100", labels.Datapath, Ordered, ContinueOnFailure, func() {
		f := framework.New(r, "datapath")
		// VLAN-10's jumbo guest boots ahead (framework.Prestart): it needs
		// only its NAD, on vm-a's node.
		jumboVM := f.Prestart("vm-jumbo", func(ctx context.Context, p platform.Platform) (platform.VMSpec, error) {
			err := f.ApplyNAD(ctx, "vlan100-jumbo", "vlan100-bridge-jumbo")
			return platform.VMSpec{Node: p.BridgeNodes()[0], Networks: []string{"vlan100-jumbo"}}, err
		}, labels.Datapath, labels.Claim("VLAN-10"))
		// Step 3 of the guide: the VM, its static address from cloud-init
		// userData; a second one on the other node. Both boot ahead too,
		// whatever the container's place in the run's order.
		ahead := func() bool { return labels.SelectsAny(labels.Datapath, bridgeClaims...) }
		vmOn := func(node int) func(ctx context.Context, p platform.Platform) (platform.VMSpec, error) {
			return func(ctx context.Context, p platform.Platform) (platform.VMSpec, error) {
				nodes := p.BridgeNodes()
				if node >= len(nodes) {
					return platform.VMSpec{}, fmt.Errorf("no bridge node %d on this platform (%d)", node+1, len(nodes))
				}
				// Step 2 of the guide: the bridge-type NAD in the tenant namespace.
				err := f.ApplyNAD(ctx, "vlan100", "vlan100-bridge")
				return platform.VMSpec{Node: nodes[node], Networks: []string{"vlan100"}}, err
			}
		}
		vmA, vmB := f.PrestartWhen("vm-a", vmOn(0), ahead), f.PrestartWhen("vm-b", vmOn(1), ahead)
		var (
			p              platform.Platform
			guestA, guestB *framework.VM
			gw             netip.Addr
		)

		BeforeAll(func(ctx SpecContext) {
			var err error
			p, err = f.Platform(ctx)
			Expect(err).NotTo(HaveOccurred(), "building the platform")
			gw = p.Gateway().Address()

			// vm-b only where there is a second node (vendor mode may have one).
			guests := []*framework.Prestarted{vmA}
			if len(p.BridgeNodes()) > 1 {
				guests = append(guests, vmB)
			}
			vms, err := framework.TakeAll(ctx, guests...)
			Expect(err).NotTo(HaveOccurred(), "starting the guests")
			guestA = vms[0]
			if len(vms) > 1 {
				guestB = vms[1]
			}
		})

		// "Attach the VLAN sub-interface to a bridge and point a bridge-type NAD at it."
		It("[VLAN-01] lets the guest reach the gateway", labels.Claim("VLAN-01"), func(ctx SpecContext) {
			res, err := guestnet.Ping(ctx, guestA, gw)
			Expect(err).NotTo(HaveOccurred())
			f.Note("guest %s (%s) -> gateway %s: %d/%d echo replies", guestA.Name(), guestA.MAC(), gw, res.Received, res.Sent)
			where := whereItStopped(f, p, res, func() []hops.Hop { return hops.Path(ctx, p, guestA, hops.FromGuest) }, guestA.Addr.Addr(), gw, "the gateway", func() {
				guestnet.Ping(ctx, guestA, gw, probe.WithCount(2))
			})
			Expect(res.Received).To(BeNumerically(">", 0), "guest %s "+failures.ReachesGateway+" %s over VLAN 100%s", guestA.Name(), gw, where)
		})

		It("[VLAN-01] lets the gateway reach the guest, at the guest's MAC", labels.Claim("VLAN-01"), func(ctx SpecContext) {
			addr := guestA.Addr.Addr()
			res, err := p.Gateway().Ping(ctx, addr)
			skip.IfNotObservable(err)
			Expect(err).NotTo(HaveOccurred())
			where := whereItStopped(f, p, res, func() []hops.Hop { return hops.Path(ctx, p, guestA, hops.ToGuest) }, gw, addr, "the guest", func() {
				p.Gateway().Ping(ctx, addr, probe.WithCount(2))
			})
			Expect(res.Received).To(BeNumerically(">", 0), "the gateway must reach guest %s at %s%s", guestA.Name(), addr, where)

			neigh, err := p.Gateway().Neighbor(ctx, addr)
			Expect(err).NotTo(HaveOccurred())
			f.Note("gateway -> guest %s: %d/%d echo replies; gateway neighbour %s lladdr %s %s", addr, res.Received, res.Sent, addr, neigh.MAC, neigh.State)
			Expect(neigh.MAC.String()).To(Equal(guestA.MAC().String()), "the gateway's neighbour entry for %s must hold the guest's MAC", addr)
		})

		It("[VLAN-01] lets guests on two nodes reach each other across the trunk", labels.Claim("VLAN-01"), func(ctx SpecContext) {
			if guestB == nil {
				Skip("one node only (vendor mode): no second node to cross the trunk to")
			}
			res, err := guestnet.Ping(ctx, guestA, guestB.Addr.Addr())
			Expect(err).NotTo(HaveOccurred())
			f.Note("vm-a on %s -> vm-b on %s: %d/%d echo replies", guestA.Node().Name(), guestB.Node().Name(), res.Received, res.Sent)
			Expect(res.Received).To(BeNumerically(">", 0), "vm-a on %s must reach vm-b on %s", guestA.Node().Name(), guestB.Node().Name())
		})

		// "...bridge the VLAN sub-interface uplink.100": the guest's frames leave the node tagged.
		It("[VLAN-02] sends the guest's frames across the trunk tagged with the VLAN id", labels.Claim("VLAN-02"), func(ctx SpecContext) {
			skip.IfUntagged(p, "VLAN-02")
			vlan := p.Config().VLAN
			frames := wire.While(ctx, p.Trunk(guestA.Node()), f.Artifact("trunk.pcap"), func() {
				guestnet.Ping(ctx, guestA, gw, probe.WithCount(2))
			})
			fromGuest := frames.From(guestA.MAC())
			f.Note("trunk %s: %d frames from the guest MAC %s, %d tagged VLAN %d, %d untagged (trunk.pcap)", p.Trunk(guestA.Node()), len(fromGuest), guestA.MAC(), len(fromGuest.WithVLAN(vlan)), vlan, len(fromGuest.Untagged()))
			Expect(fromGuest).NotTo(BeEmpty(), "the guest's frames must cross the trunk; saw:\n%s", frames.Summary(20))
			Expect(fromGuest.Untagged()).To(BeEmpty(), "no frame of the guest "+failures.CrossesUntagged+":\n%s", fromGuest.Untagged().Summary(10))
			Expect(fromGuest.WithVLAN(vlan)).To(HaveLen(len(fromGuest)), "every frame of the guest must carry VLAN %d:\n%s", vlan, fromGuest.Summary(10))
		})

		// "...the host can carry an address on the bridge itself to talk to the VMs."
		It("[VLAN-05] lets the node's bridge address and the guest reach each other", labels.Claim("VLAN-05"), func(ctx SpecContext) {
			node := guestA.Node()
			nodeAddr, guestAddr := node.Address().Addr(), guestA.Addr.Addr()
			res, err := nodenet.Ping(ctx, node, guestAddr)
			skip.IfNotObservable(err)
			Expect(err).NotTo(HaveOccurred())
			f.Note("node %s (%s) -> guest: %d/%d echo replies", node.Name(), node.Address(), res.Received, res.Sent)
			where := whereItStopped(f, p, res, func() []hops.Hop { return hops.NodePath(ctx, guestA, hops.ToGuest) }, nodeAddr, guestAddr, "the guest", func() {
				nodenet.Ping(ctx, node, guestAddr, probe.WithCount(2))
			})
			Expect(res.Received).To(BeNumerically(">", 0), "node %s (%s) must reach the guest%s", node.Name(), node.Address(), where)
			res, err = guestnet.Ping(ctx, guestA, nodeAddr)
			Expect(err).NotTo(HaveOccurred())
			f.Note("guest -> node %s: %d/%d echo replies", nodeAddr, res.Received, res.Sent)
			where = whereItStopped(f, p, res, func() []hops.Hop { return hops.NodePath(ctx, guestA, hops.FromGuest) }, guestAddr, nodeAddr, "the node", func() {
				guestnet.Ping(ctx, guestA, nodeAddr, probe.WithCount(2))
			})
			Expect(res.Received).To(BeNumerically(">", 0), "the guest must reach node %s at %s%s", node.Name(), node.Address(), where)
		})

		// The bridge "carries the host's presence on that VLAN (optional, but
		// useful [...] for any host-side service the VMs must reach)".
		It("[VLAN-05] lets the guest connect to a TCP service on the node's bridge address", labels.Claim("VLAN-05"), func(ctx SpecContext) {
			node := guestA.Node()
			svc, err := nodenet.Serve(ctx, node)
			skip.IfNotObservable(err)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(svc.Close)
			d, err := guestnet.Dial(ctx, guestA, svc.Addr(), serviceTimeout)
			Expect(err).NotTo(HaveOccurred())
			f.Note("guest %s -> TCP service %s on %s: connected %v, error %v, after %s; accepted by the service: %v",
				guestA.Addr.Addr(), svc.Addr(), node.Name(), d.Connected, d.Err, d.Took.Round(time.Millisecond), svc.Accepted())
			Expect(d.Connected).To(BeTrue(), "the guest "+failures.ConnectsToService+" on %s's bridge address %s: %v", node.Name(), svc.Addr(), d.Err)
			// The kernel completes the handshake before the service's accept
			// returns: the connection is recorded a moment after the dial.
			Eventually(svc.Accepted).WithTimeout(2*time.Second).WithPolling(50*time.Millisecond).Should(ContainElement(HaveField("Addr()", guestA.Addr.Addr())), "the service must have accepted the guest's own address %s", guestA.Addr.Addr())
		})

		// "ipam: {} — no cluster-side address assignment; the guest configures its address itself."
		It("[VLAN-06] assigns no address to the pod interface; the guest has exactly its cloud-init address", labels.Claim("VLAN-06"), func(ctx SpecContext) {
			att := guestA.Attachment()
			f.Note("NAD %s: CNI result IPs %v; pod interface %s IPv4 after ADD %v (%v)", att.NAD, att.CNIResultIPs, att.PodInterface, att.PodIPv4, att.Err)
			skip.IfNotObservable(att.Err)
			Expect(att.Err).NotTo(HaveOccurred(), "the CNI result and the pod interface must both be read for their emptiness to mean anything")
			Expect(att.CNIResultIPs).To(BeEmpty(), "the CNI result of NAD %s "+failures.CarriesNoIP, att.NAD)
			Expect(att.PodIPv4).To(BeEmpty(), "pod interface %s must have no IPv4 address after CNI ADD", att.PodInterface)
			addrs, err := guestnet.Addresses(ctx, guestA, guestA.VLANInterface())
			Expect(err).NotTo(HaveOccurred())
			f.Note("guest %s addresses %v", guestA.VLANInterface(), addrs)
			Expect(addrs).To(ConsistOf(guestA.Addr), "the guest's VLAN NIC must carry exactly the cloud-init address")
		})

		// "The /24 address above brings up only the connected route ... it adds no default route."
		It("[VLAN-07] keeps only the connected route on the VLAN NIC and the default route on the pod NIC", labels.Claim("VLAN-07"), func(ctx SpecContext) {
			routes, err := guestnet.Routes(ctx, guestA)
			Expect(err).NotTo(HaveOccurred())
			for _, r := range routes {
				f.Note("guest route %s via %s dev %s scope %s", r.Dst, r.Gw, r.Iface, r.Scope)
			}
			var onVLAN, defaults []platform.Route
			for _, r := range routes {
				if r.Iface == guestA.VLANInterface() {
					onVLAN = append(onVLAN, r)
				}
				if r.Dst.Bits() == 0 {
					defaults = append(defaults, r)
				}
			}
			subnet := netip.MustParsePrefix(p.Config().Subnet)
			Expect(defaults).NotTo(BeEmpty(), "the guest must keep a default route")
			for _, d := range defaults {
				Expect(d.Iface).NotTo(Equal(guestA.VLANInterface()), failures.DefaultRouteOnPodNIC+": %+v", d)
			}
			Expect(onVLAN).To(HaveLen(1), "the VLAN NIC must have one route: %+v", onVLAN)
			Expect(onVLAN[0].Dst).To(Equal(subnet))
			Expect(onVLAN[0].Scope).To(Equal("link"), "the VLAN route must be the connected one")
		})

		// VLANs of one trunk are separate broadcast domains.
		It("[VLAN-08] keeps the guest off another VLAN of the same trunk", labels.Claim("VLAN-08"), func(ctx SpecContext) {
			skip.IfUntagged(p, "VLAN-08")
			other := p.Gateway().OtherVLANAddress()
			if !other.IsValid() {
				Skip("no host on a second VLAN is known (vendor mode)")
			}
			var answer error
			var leaving evidence.Frames
			frames := wire.While(ctx, p.Gateway().OtherVLANPoint(), f.Artifact("other-vlan.pcap"), func() {
				leaving = wire.While(ctx, wire.Egress(p, guestA), f.Artifact("guest-egress.pcap"), func() {
					_, answer = guestnet.ARPProbe(ctx, guestA, other, 2*time.Second)
				})
			})
			asked := leaving.From(guestA.MAC()).ARPRequestsFor(other)
			f.Note("guest ARP who-has %s on %s: %v; seen leaving at %s: %d requests (guest-egress.pcap); frames from the guest on VLAN %d: %d (other-vlan.pcap)",
				other, guestA.VLANInterface(), answer, wire.Egress(p, guestA), len(asked), p.Config().OtherVLAN, len(frames.From(guestA.MAC())))
			// An unanswered probe proves isolation only if it went out.
			Expect(asked).NotTo(BeEmpty(), "the guest's ARP request for %s "+failures.SeenLeaving+" at %s:\n%s", other, wire.Egress(p, guestA), leaving.Summary(20))
			// A probe that failed for another reason says nothing either way:
			// it fails here, not as an answered probe would.
			if answer != nil {
				Expect(answer).To(MatchError(probe.ErrNoReply), "the guest's ARP probe for %s failed, but not for want of a reply", other)
			}
			Expect(answer).To(HaveOccurred(), "the guest's ARP for %s "+failures.GoesUnanswered+": it was answered", other)
			Expect(frames.From(guestA.MAC())).To(BeEmpty(), "no frame of the guest may appear on VLAN %d:\n%s", p.Config().OtherVLAN, frames.Summary(20))
		})

		// Seed 003: "Ensure your NetworkAttachmentDefinition specifies the correct MTU matching the physical switch port."
		It("[VLAN-10] passes full-size DF frames when the MTUs match and drops them when the path is smaller", labels.Claim("VLAN-10"), func(ctx SpecContext) {
			By("the VLAN's MTU, read off the path: the node's uplink.100 and its trunk")
			vlanMTU := 0
			for _, at := range []evidence.Point{guestA.Node().ParentPoint(), p.Trunk(guestA.Node())} {
				m, err := at.MTU()
				if errors.Is(err, evidence.ErrNotObservable) {
					f.Note("MTU of %s: not observable here (%v)", at, err)
					continue
				}
				Expect(err).NotTo(HaveOccurred())
				f.Note("MTU of %s: %d", at, m)
				if vlanMTU == 0 || m < vlanMTU {
					vlanMTU = m
				}
			}
			if vlanMTU == 0 {
				skip.NotObservable("no link of the VLAN's path is observable here: its MTU cannot be read (" + evidence.ErrNotObservable.Error() + ")")
			}

			By("a guest whose attachment MTU matches the VLAN's")
			mtu, err := guestnet.MTU(ctx, guestA, guestA.VLANInterface())
			Expect(err).NotTo(HaveOccurred())
			res, err := guestnet.Ping(ctx, guestA, gw, probe.WithDontFragment(), probe.WithPayload(mtu-28))
			Expect(err).NotTo(HaveOccurred())
			f.Note("guest MTU %d, DF payload %d -> gateway: %d/%d replies", mtu, mtu-28, res.Received, res.Sent)
			Expect(res.Received).To(BeNumerically(">", 0), "a %d-byte DF packet must pass when the attachment MTU (%d) matches the VLAN", mtu, mtu)

			By(fmt.Sprintf("a guest whose attachment claims 9000 bytes on a %d-byte VLAN", vlanMTU))
			jumbo, err := jumboVM.Take(ctx)
			Expect(err).NotTo(HaveOccurred())
			jmtu, err := guestnet.MTU(ctx, jumbo, jumbo.VLANInterface())
			Expect(err).NotTo(HaveOccurred())
			Expect(jmtu).To(Equal(9000), "the guest NIC takes the attachment's MTU")
			res, err = guestnet.Ping(ctx, jumbo, gw, probe.WithDontFragment(), probe.WithPayload(jmtu-28))
			Expect(err).NotTo(HaveOccurred())
			f.Note("jumbo guest MTU %d on a %d-byte VLAN, DF payload %d -> gateway: %d/%d replies, send error %v", jmtu, mtu, jmtu-28, res.Received, res.Sent, res.Err)
			// The drop must happen on the path, not in the guest's own stack.
			Expect(res.Err).NotTo(HaveOccurred(), "the %d-byte DF packet must leave the guest", jmtu)
			Expect(res.Sent).To(BeNumerically(">", 0), "the %d-byte DF echo requests must have been sent for their loss to mean anything", jmtu)
			Expect(res.Received).To(BeZero(), "a %d-byte DF packet "+failures.DroppedOnSmallerPath+" than the attachment's MTU", jmtu)
			res, err = guestnet.Ping(ctx, jumbo, gw, probe.WithDontFragment(), probe.WithPayload(vlanMTU-28))
			Expect(err).NotTo(HaveOccurred())
			f.Note("jumbo guest, DF payload %d -> gateway: %d/%d replies", vlanMTU-28, res.Received, res.Sent)
			Expect(res.Received).To(BeNumerically(">", 0), "the same guest still passes %d-byte frames: the drop is the size", vlanMTU)

			By("and the guide's attachment MTU is the path's")
			Expect(mtu).To(Equal(vlanMTU), "the attachment's MTU must be the VLAN path's (the smallest MTU from uplink.100 to the trunk)")
		})
	})
}

// whereItStopped is what a failed ping's assertion adds: where its frames
// stopped, the first question on a vendor's setup, found by sending again
// (again) while following the frames from src to dst along path
// (wire.WhereItStopped; target names dst in the line). Nothing when res
// succeeded: path reads the node only then.
func whereItStopped(f *framework.Framework, p platform.Platform, res probe.PingResult, path func() []hops.Hop, src, dst netip.Addr, target string, again func()) string {
	if res.Succeeded() {
		return ""
	}
	stopped := wire.WhereItStopped(p, path(), src, dst, target, f.Artifact, again)
	f.Note("where it stopped: %s (hop-N.pcap)", stopped)
	return "; where it stopped: " + stopped
}
