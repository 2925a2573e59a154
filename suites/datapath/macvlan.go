package datapath

import (
	"context"
	"errors"
	"net/netip"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/failures"
	"github.com/cozystack/vlan-conformance/framework/guestnet"
	"github.com/cozystack/vlan-conformance/framework/nodenet"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/probe"
	"github.com/cozystack/vlan-conformance/framework/run"
	"github.com/cozystack/vlan-conformance/suites/framework"
	"github.com/cozystack/vlan-conformance/suites/labels"
	"github.com/cozystack/vlan-conformance/suites/skip"
	"github.com/cozystack/vlan-conformance/suites/wire"
)

// neighFailedBound is how long an unanswered neighbour entry may take to
// turn FAILED under the kernel's defaults in the guest: INCOMPLETE,
// mcast_solicit 3 probes at retrans_time 1 s, 3 s; or, where the gateway's
// own request made the entry STALE first (it re-resolves an address a
// previous guest held, as after VLAN-03's control on the same cluster),
// DELAY's delay_first_probe_time 5 s and PROBE's 3 unicast probes, 8 s.
// 3 s more allow for TCG and the console.
const neighFailedBound = 11 * time.Second

// serviceTimeout bounds one TCP connection attempt to a node's service:
// past the guest's ARP resolution (3 s, as above) and the TCG console.
const serviceTimeout = 6 * time.Second

func macvlanSpecs(r *run.Run) {
	Describe("A node provisioned for macvlan", labels.Datapath, Ordered, ContinueOnFailure, func() {
		f := framework.New(r, "macvlan")
		// VLAN-03's guest boots ahead (framework.Prestart): it needs only its NAD.
		mvVM := f.Prestart("vm-mv", func(ctx context.Context, p platform.Platform) (platform.VMSpec, error) {
			node := p.MacvlanNode()
			if node == nil {
				return platform.VMSpec{}, errors.New("no node provisioned for macvlan on this platform")
			}
			err := f.ApplyNAD(ctx, "vlan100-macvlan", "vlan100-macvlan")
			return platform.VMSpec{Node: node, Networks: []string{"vlan100-macvlan"}}, err
		}, labels.Datapath, labels.Claim("VLAN-03"))
		var (
			p    platform.Platform
			node platform.Node
			gw   netip.Addr
		)

		BeforeAll(func(ctx SpecContext) {
			var err error
			p, err = f.Platform(ctx)
			Expect(err).NotTo(HaveOccurred(), "building the platform")
			node = p.MacvlanNode()
			if node == nil {
				Skip("no node provisioned for macvlan on this platform (vendor mode has one, per the guide)")
			}
			gw = p.Gateway().Address()
			Expect(f.ApplyNAD(ctx, "vlan100-macvlan", "vlan100-macvlan")).To(Succeed())
		})

		Context("with a VM on a macvlan attachment under bridge binding", func() {
			var guest *framework.VM
			BeforeAll(func(ctx SpecContext) {
				var err error
				guest, err = mvVM.Take(ctx)
				Expect(err).NotTo(HaveOccurred(), "starting vm-mv")
			})

			// "The symptom is a guest that can transmit (ARP requests and pings leave,
			// visible in tcpdump on the parent interface) but never receives a reply."
			It("[VLAN-03] lets the guest transmit but drops the replies to its MAC", labels.Claim("VLAN-03"), func(ctx SpecContext) {
				skip.IfPods(p, "VLAN-03 (replies dropped under bridge binding)")
				parent := wire.Start(node.ParentPoint(), f.Artifact("parent.pcap"))
				atGuest := wire.Start(guest.VLANPoint(), f.Artifact("guest.pcap"))
				start := time.Now()
				res, err := guestnet.Ping(ctx, guest, gw)
				Expect(err).NotTo(HaveOccurred())
				onParent, inGuest := wire.Stop(parent), wire.Stop(atGuest)
				f.Note("guest %s -> gateway %s: %d/%d replies, send error %v; at the guest: %d ARP requests leaving, %d replies arriving; on %s: %d ARP requests from the guest, %d replies to the guest MAC (guest.pcap, parent.pcap)",
					guest.MAC(), gw, res.Received, res.Sent, res.Err, len(inGuest.From(guest.MAC()).ARPRequestsFor(gw)), len(inGuest.To(guest.MAC()).Replies()),
					node.ParentPoint(), len(onParent.From(guest.MAC()).ARPRequestsFor(gw)), len(onParent.To(guest.MAC()).Replies()))

				By("the guest transmits: its requests leave it and cross the parent")
				Expect(res.Err).NotTo(HaveOccurred(), "every echo request must leave the guest")
				Expect(inGuest.From(guest.MAC()).ARPRequestsFor(gw)).NotTo(BeEmpty(),
					"the guest's ARP requests for %s must be seen leaving it:\n%s", gw, inGuest.Summary(20))
				Expect(onParent.From(guest.MAC()).ARPRequestsFor(gw)).NotTo(BeEmpty(),
					"the guest's ARP requests for %s must be seen on %s:\n%s", gw, node.ParentPoint(), onParent.Summary(20))
				By("the gateway's replies to the guest MAC arrive at the parent")
				Expect(onParent.To(guest.MAC()).Replies()).NotTo(BeEmpty(),
					"replies addressed to the guest MAC %s must reach the parent:\n%s", guest.MAC(), onParent.Summary(20))
				By("and none reaches the guest")
				Expect(inGuest.To(guest.MAC()).Replies()).To(BeEmpty(), failures.NoReplyReachesGuest+":\n%s", inGuest.Summary(20))
				Expect(res.Sent).To(BeNumerically(">", 0), "the guest's echo requests must have been sent")
				Expect(res.Received).To(BeZero(), "the guest must get no echo reply from %s", gw)

				// The guide says the entry "stays FAILED". INCOMPLETE is only the
				// kernel still asking: it turns FAILED once its probes go unanswered,
				// so wait for that, within the bound the guest's (default) timers set.
				By("the guest's neighbour entry for the gateway ends FAILED")
				var neigh evidence.Neighbor
				Eventually(func() (string, error) {
					var err error
					neigh, err = guestnet.Neighbor(ctx, guest, gw)
					return neigh.State, err
				}).WithContext(ctx).WithTimeout(time.Until(start.Add(neighFailedBound))).WithPolling(100*time.Millisecond).Should(Equal("FAILED"),
					"the guest's neighbour entry for %s must turn FAILED within %s of its first unanswered request", gw, neighFailedBound)
				f.Note("guest neighbour %s lladdr %s state %s, %s after the first request", gw, neigh.MAC, neigh.State, time.Since(start).Round(100*time.Millisecond))
			})
		})

		// Proven on a macvlan child that owns its address (a pod, no bridge
		// binding in between), so that VLAN-03's dropped replies cannot stand in
		// for the isolation; the child's own traffic to the gateway shows the
		// link is alive.
		Context("with a macvlan child that owns its address", func() {
			var child *framework.VM
			BeforeAll(func(ctx SpecContext) {
				var err error
				child, err = f.StartVM(ctx, platform.VMSpec{Name: "pod-mv", Node: node, Networks: []string{"vlan100-macvlan"}, Binding: platform.NoBinding})
				Expect(err).NotTo(HaveOccurred(), "starting pod-mv with the macvlan NIC as its own")
			})

			// "...the host cannot reach macvlan children through the parent interface either."
			It("[VLAN-04] keeps the parent's address and a macvlan child apart, while the child reaches the outside", labels.Claim("VLAN-04"), func(ctx SpecContext) {
				childAddr := child.Addr.Addr()
				hostAddr := node.Address().Addr()

				By("the child reaches the gateway: its link works")
				res, err := guestnet.Ping(ctx, child, gw)
				Expect(err).NotTo(HaveOccurred())
				f.Note("child %s (%s, MAC %s) -> gateway %s: %d/%d replies, send error %v", child.Name(), childAddr, child.MAC(), gw, res.Received, res.Sent, res.Err)
				Expect(res.Err).NotTo(HaveOccurred())
				Expect(res.Received).To(BeNumerically(">", 0), "the macvlan child must reach the gateway %s: else silence below proves a dead link, not isolation", gw)

				By("the parent's ARP requests for the child leave it and never reach the child")
				onParent := wire.Start(node.ParentPoint(), f.Artifact("parent.pcap"))
				atChild := wire.Start(child.VLANPoint(), f.Artifact("child.pcap"))
				res, err = nodenet.Ping(ctx, node, childAddr)
				Expect(err).NotTo(HaveOccurred())
				fromHost, atChildFrames := wire.Stop(onParent).ARPSentBy(hostAddr).ARPRequestsFor(childAddr), wire.Stop(atChild)
				reached := atChildFrames.ARPSentBy(hostAddr)
				f.Note("node %s (%s) -> child %s: %d/%d replies, send error %v; the host's ARP requests for the child on %s: %d; host ARP frames at the child: %d (parent.pcap, child.pcap)",
					node.Name(), node.Address(), childAddr, res.Received, res.Sent, res.Err, node.ParentPoint(), len(fromHost), len(reached))
				Expect(res.Err).NotTo(HaveOccurred(), "every echo request must leave the node")
				Expect(fromHost).NotTo(BeEmpty(), "the host's ARP requests for %s must be seen leaving %s", childAddr, node.ParentPoint())
				Expect(reached).To(BeEmpty(), failures.NoHostARPAtChild+" (%s) may reach the macvlan child:\n%s", hostAddr, reached.Summary(10))
				Expect(res.Sent).To(BeNumerically(">", 0), "the node's echo requests must have been sent")
				Expect(res.Received).To(BeZero(), "node %s (%s) must not reach the macvlan child %s", node.Name(), node.Address(), childAddr)

				By("and the child cannot reach a service on the host's address")
				res, err = guestnet.Ping(ctx, child, hostAddr)
				Expect(err).NotTo(HaveOccurred())
				f.Note("child -> node %s: %d/%d replies, send error %v", hostAddr, res.Received, res.Sent, res.Err)
				Expect(res.Err).NotTo(HaveOccurred(), "every echo request must leave the child")
				Expect(res.Sent).To(BeNumerically(">", 0), "the child's echo requests must have been sent")
				Expect(res.Received).To(BeZero(), "the macvlan child must not reach the node's address %s", hostAddr)
			})

			// "...so a host-side service on the parent IP is unreachable from the VMs."
			It("[VLAN-04] keeps a TCP service on the parent's address out of the child's reach", labels.Claim("VLAN-04"), func(ctx SpecContext) {
				svc, err := nodenet.Serve(ctx, node)
				skip.IfNotObservable(err)
				Expect(err).NotTo(HaveOccurred())
				DeferCleanup(svc.Close)
				hostAddr := node.Address().Addr()

				By("the child tries to connect: its attempt leaves it, and the service accepts nothing")
				var d probe.DialResult
				atChild := wire.While(ctx, child.VLANPoint(), f.Artifact("child.pcap"), func() {
					d, err = guestnet.Dial(ctx, child, svc.Addr(), serviceTimeout)
				})
				Expect(err).NotTo(HaveOccurred())
				// The attempt leaves as ARP requests for the host, or as a SYN
				// when the child already holds the host's MAC.
				fromChild := atChild.From(child.MAC())
				asked, syns := fromChild.ARPRequestsFor(hostAddr), fromChild.SYNsTo(svc.Addr())
				f.Note("child %s -> TCP service %s on %s: connected %v, error %v, after %s; the child's ARP requests for %s: %d; its SYNs: %d; accepted by the service: %v (child.pcap)",
					child.Addr.Addr(), svc.Addr(), node.Name(), d.Connected, d.Err, d.Took.Round(time.Millisecond), hostAddr, len(asked), len(syns), svc.Accepted())
				Expect(len(asked)+len(syns)).To(BeNumerically(">", 0), "the child's attempt must be seen leaving it (ARP requests for %s, or a SYN):\n%s", hostAddr, atChild.Summary(20))
				Expect(d.Connected).To(BeFalse(), "the macvlan child "+failures.NoConnectionToParent+" to the service on the parent's address %s", svc.Addr())
				Expect(svc.Accepted()).To(BeEmpty(), "the service on the parent's address must accept nothing from the child")
			})
		})

		consumerSpecs(f)
	})
}
