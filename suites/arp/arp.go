// Package arp proves the guide's gotcha "MAC changes on VM re-creation" and
// seed 003's KubeMacPool claims (CLAIMS.md ARP-01..06) through the Guest
// and Gateway interfaces: a re-created guest is a real VM deleted and
// created again in a cluster, a launcher pod and guest namespace torn down
// and rebuilt (fresh CNI ADD) in the lab. ARP-07 asks the same of a VM
// restarted, its VirtualMachine kept (restart.go), and ARP-08 of a VM a
// node drain migrates live (drain.go): a cluster's only.
//
//	 vcf-gw: the upstream gateway               vcf-node-a (vcf-node-b the same)
//	+-------------------------------+  trunk  +-------------------------------------+
//	| trunk.100 203.0.113.1         |=========| uplink.100 -- br100 -- CNI veth --+  |
//	|  neighbour table: the fixture |  VLAN   |   vcf-pod-tenant-arp-vm-arpNN: ---+  |
//	|  (timers: --arp-profile)      |   100   |   vcf-vm-tenant-arp-vm-arpNN: enp2s0 |
//	+---------------|---------------+         +-------------------------------------+
//	 vcf-gw-standby: a second router on the switch, 203.0.113.9, the same
//	 timers, its own neighbour table (ARP-04)
//
// ARP-02 re-creates one guest (vm-arp), having the gateway and the standby
// router resolve it afresh first, so no spec leans on what another left in
// a router's entry; ARP-03 times the gateway's recovery from the outage
// ARP-02 just saw (the same event, another side), ARP-04 ends the same
// outage at the standby router, kept quiet all along, with the guest's
// gratuitous ARP (each re-creating the guest itself when run alone, ARP-04
// also where there is no standby router: a vendor's gateway), ARP-01
// observes the last re-creation from the sides the others do not, ARP-08
// drains its node and ARP-07 restarts it; ARP-05
// has a guest of its own, and ARP-06 pins ARP-05's MAC on a second guest
// (vm.go: guests). The gateway's neighbour timers are part of the fixture: the lab
// sets the declared profile, the specs read it back, report it and derive
// their bound from what is declared.
package arp

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/failures"
	"github.com/cozystack/vlan-conformance/framework/guestnet"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/probe"
	"github.com/cozystack/vlan-conformance/framework/run"
	"github.com/cozystack/vlan-conformance/suites/framework"
	"github.com/cozystack/vlan-conformance/suites/labels"
	"github.com/cozystack/vlan-conformance/suites/skip"
	"github.com/cozystack/vlan-conformance/suites/wire"
)

const (
	// How often the gateway pings the guest while an outage is measured:
	// the resolution of the timelines.
	streamEvery = 50 * time.Millisecond
	watchEvery  = 25 * time.Millisecond
	// What "at once" means for a gratuitous ARP (CLAIMS.md ARP-04).
	garpLimit = time.Second
	// How long ARP-04 waits for the entry to flip after asking the guest
	// to announce itself: room for a command under TCG; the verdict is
	// garpLimit from the frame.
	garpWait = 30 * time.Second
	// The MACs pinned here come from KubeMacPool's default pool (seed 003).
	pinnedMAC = "02:00:00:00:05:01"
)

// Specs registers the ARP specs with the run.
func Specs(r *run.Run) {
	// The container runs first of those that boot guests, whatever the
	// seed's order of the others (framework.LongestChain): its
	// re-creations come one after another, the lane's longest chain, and
	// the other containers' guests boot beside it (framework.Prestart)
	// instead of leaving a core idle through it at the end.
	f := framework.New(r, "arp")
	// How long a gateway without declared timers is given to recover
	// (--gateway-wait): ARP-03's and ARP-07's bound and their timeouts.
	wait := r.Config().GatewayWait
	// Every guest boots ahead from the cluster's set-up (vm.go).
	booted := prestartFleet(f)
	Describe("Re-creating a VM on VLAN 100", labels.ARP, Ordered, ContinueOnFailure, framework.LongestChain, func() {
		var (
			p  platform.Platform
			gw platform.Gateway
		)
		handOn := func(ctx SpecContext) { booted.handOnRestarts(ctx, p, gw, f.Subject().VLANNIC(), wait) }

		BeforeAll(func(ctx SpecContext) {
			var err error
			p, err = f.Platform(ctx)
			Expect(err).NotTo(HaveOccurred(), "building the platform")
			skip.IfPods(p, "ARP-01..07 (re-created and restarted VMs)")
			gw = p.Gateway()
			Expect(f.ApplyNAD(ctx, nad, "vlan100-bridge")).To(Succeed())
			booted.start(ctx, p)
			// Registered after the guests were taken, so it runs before
			// their deletion: the container's end hands vm-arp on to
			// ARP-07's restarts (restart.go) if no spec after vm-arp's
			// last did (BeforeEach below).
			DeferCleanup(handOn)
			if v05, ok := booted.vms["vm-arp05"]; ok && pinnedBeside() {
				var stop func()
				booted.pinned, stop = recreatePinnedBeside(ctx, gw, p, v05, booted.bootLate)
				DeferCleanup(stop)
			}
		})

		// The specs that take vm-arp come first; once they are done (ARP-08's
		// drain), the next spec hands it on to ARP-07's restarts as it
		// starts, not the container's end: ARP-05's and ARP-06's take other
		// guests, and ARP-06 waits for its second one's boot (measured:
		// 48-116 s with vm-arp idle and the restarts not begun).
		BeforeEach(func(ctx SpecContext) {
			if !takes("vm-arp", f.Claim()) {
				handOn(ctx)
			}
		})

		// "The upstream gateway then holds a stale ARP entry for the old MAC ... so "gateway unreachable"
		// immediately after re-creating a VM is expected ... rather than treating it as a fault."
		It("[ARP-02] leaves the gateway holding the old MAC right after re-creation, so gateway-to-guest fails as expected", labels.Claim("ARP-02"), func(ctx SpecContext) {
			v, err := booted.take(ctx, "vm-arp")
			Expect(err).NotTo(HaveOccurred())
			warmed, err := warmGateway(ctx, gw, v)
			skip.IfNotObservable(err)
			Expect(err).NotTo(HaveOccurred())
			// The standby router resolves the guest too, and stays quiet:
			// ARP-04 ends the outage this re-creation leaves in its entry.
			// Not ARP-02's claim: a standby that cannot resolve the guest
			// leaves ARP-04 to re-create the VM itself.
			standby := standbyFor(gw)
			if standby != nil {
				if _, err := warmGateway(ctx, standby, v); err != nil {
					f.Note("the standby router: %v; ARP-04 will re-create %s itself", err, v.Name())
					standby = nil
				}
			}

			rc, err := v.recreate(ctx, p, CurrentSpecReport().LeafNodeText)
			Expect(err).NotTo(HaveOccurred())
			if standby != nil {
				v.announce = rc
			}
			entry, err := gw.Neighbor(ctx, v.addr)
			readAt := time.Now()
			Expect(err).NotTo(HaveOccurred())
			var res probe.PingResult
			var firstSent time.Time
			// The gateway's requests are watched where they leave it (the trunk):
			// "no reply" proves the outage only if the requests went out.
			onTrunk := wire.While(ctx, p.Trunk(v.Node()), f.Artifact("trunk.pcap"), func() {
				firstSent = time.Now()
				res, err = gw.Ping(ctx, v.addr, probe.WithCount(3), probe.WithInterval(100*time.Millisecond), probe.WithTimeout(300*time.Millisecond))
			})
			Expect(err).NotTo(HaveOccurred())
			sent := onTrunk.EchoRequests(gw.Address(), v.addr)

			tl := newTimeline("ARP-02: right after re-creating " + v.Name())
			tl.origin = rc.ready
			tl.note("the guest says nothing after boot; t = 0 when the re-created VM is up; then the gateway's entry is read and it pings the guest 3 times, 100 ms apart, 300 ms timeout each")
			tl.note("an outage here is what the guide calls expected, not a fault")
			tl.add(rc.start, "re-creation starts: %s deleted (MAC %s)", v.Name(), rc.oldMAC)
			tl.add(rc.ready, "re-created %s is up (MAC %s)", v.Name(), rc.newMAC)
			tl.add(readAt, "gateway entry for %s: %s", v.addr, describeNeighbor(entry, rc.oldMAC, rc.newMAC))
			for i, r := range res.Replies {
				tl.add(r, "echo reply %d", i+1)
			}
			tl.add(time.Now(), "gateway → guest: %d of %d echo requests answered (send error: %v); on the trunk %d of them, %d addressed to the old MAC (trunk.pcap)", res.Received, res.Sent, res.Err, len(sent), len(sent.To(rc.oldMAC)))
			Expect(tl.write(f.Artifact("outage.md"))).To(Succeed())

			Expect(entry.MAC.String()).To(Equal(rc.oldMAC.String()),
				"right after re-creation the gateway "+failures.GatewayHoldsOldMAC+" %s for %s (the guest now has %s)", rc.oldMAC, v.addr, rc.newMAC)
			Expect(res.Err).NotTo(HaveOccurred(), "every echo request must leave the gateway")
			Expect(sent.To(rc.oldMAC)).NotTo(BeEmpty(), "the gateway's echo requests to %s must be seen on the trunk, addressed to the old MAC %s:\n%s", v.addr, rc.oldMAC, onTrunk.Summary(20))
			Expect(res.Sent).To(BeNumerically(">", 0), "the gateway's echo requests must have been sent")
			Expect(res.Received).To(BeZero(), "gateway-to-guest must fail while the gateway holds the old MAC")
			AddReportEntry("ARP-02 expected outage (not a fault)", fmt.Sprintf(
				"as the guide warns: %d ms after re-creation the gateway's entry for %s is %s while the guest has %s; gateway → guest %d/%d echo requests answered",
				readAt.Sub(rc.ready).Milliseconds(), v.addr, describeNeighbor(entry, rc.oldMAC, rc.newMAC), rc.newMAC, res.Received, res.Sent))
			// The outage seen, its recovery is ARP-03's to time, from
			// this re-creation: a TCG re-creation (two minutes) fewer.
			rc.warmed, rc.atReady, rc.firstSent = warmed, entry, firstSent
			v.outage = rc
		})

		// CLAIMS.md: "It recovers by itself once the gateway's entry ages out; the suite measures the time
		// and holds it against the bound that the gateway's neighbour timers imply."
		It("[ARP-03] recovers by itself within the bound the gateway's declared timers imply, ending with the new MAC", labels.Claim("ARP-03"), SpecTimeout(wait+2*time.Minute), func(ctx SpecContext) {
			v, err := booted.take(ctx, "vm-arp")
			Expect(err).NotTo(HaveOccurred())

			tl := newTimeline("ARP-03: recovery without help after re-creating " + v.Name())
			e, err := expectRecovery(ctx, gw, wait, tl)
			Expect(err).NotTo(HaveOccurred())

			// The gateway is kept quiet while the VM is re-created: a boot
			// takes minutes under TCG, and a gateway sending all along would
			// have probed, failed and resolved the new MAC by broadcast before
			// the guest is up, leaving nothing to time. Recovery is timed from
			// the gateway's echo requests to the re-created guest, its entry then
			// still holding the old MAC. The re-creation is ARP-02's when
			// that spec just saw its outage (its three echo requests are
			// the first the gateway sent): the bound holds from any instant
			// after the entry's last confirmation, so the stream's start
			// still counts.
			rc := v.takeOutage()
			var before, atReady evidence.Neighbor
			if rc != nil {
				before, atReady = rc.warmed, rc.atReady
				f.Note("timing the recovery from the outage %q saw: its re-creation of %s, the gateway's first echo request to it %d ms after it was up", rc.by, v.Name(), rc.firstSent.Sub(rc.ready).Milliseconds())
			} else {
				before, err = warmGateway(ctx, gw, v)
				skip.IfNotObservable(err)
				Expect(err).NotTo(HaveOccurred())
				rc, err = v.recreate(ctx, p, CurrentSpecReport().LeafNodeText)
				Expect(err).NotTo(HaveOccurred())
				atReady, err = gw.Neighbor(ctx, v.addr)
				Expect(err).NotTo(HaveOccurred())
			}
			rec, err := timeRecovery(ctx, gw, v.addr, e.limit)
			skip.IfNotObservable(err)
			Expect(err).NotTo(HaveOccurred())

			tl.origin = rec.streamed
			tl.note("the gateway sends nothing while the VM is re-created; t = 0 when it starts pinging the re-created guest, %s apart; its entry sampled every %s", streamEvery, watchEvery)
			if !before.Confirmed.IsZero() {
				tl.add(before.Confirmed, "gateway entry last confirmed (old MAC %s)", rc.oldMAC)
			}
			// The entry's delay starts with the first packet the gateway
			// sends to the re-created guest: ARP-02's, when it is that re-creation.
			sentFrom := rec.streamed
			if !rc.firstSent.IsZero() {
				sentFrom = rc.firstSent
			}
			if early, late, ok := expectedFailover(e.running, before.Confirmed, sentFrom); ok && e.runErr == nil {
				shift := rec.streamed.Sub(sentFrom)
				tl.note("expected from the gateway's own state (reachable_time drawn %d ms, entry confirmed at %+d ms): recovery between %d and %d ms (timer-wheel rounding), plus up to two probe intervals",
					e.running.ReachableTime.Milliseconds(), before.Confirmed.Sub(rec.streamed).Milliseconds(), (early - shift).Milliseconds(), (late - shift).Milliseconds())
			}
			tl.add(rc.start, "re-creation starts: %s deleted (MAC %s)", v.Name(), rc.oldMAC)
			tl.add(rc.ready, "re-created %s is up (MAC %s); the gateway's entry: %s", v.Name(), rc.newMAC, describeNeighbor(atReady, rc.oldMAC, rc.newMAC))
			if !rc.firstSent.IsZero() {
				tl.add(rc.firstSent, "%s: the gateway's three echo requests to the re-created guest, unanswered (its outage)", rc.by)
			}
			tl.addProbes(rec.probes, "gateway → guest")
			tl.addNeighbor(rec.changes, rc.oldMAC, rc.newMAC)
			if rec.recovered {
				tl.note("measured: first reply %d ms after the stream's first echo request (t = 0) (%d ms after the delete)", rec.first.Reply.Sub(rec.streamed).Milliseconds(), rec.first.Reply.Sub(rc.start).Milliseconds())
			} else {
				tl.note("measured: no reply within %s of the stream's first echo request (t = 0)", secs(e.limit))
			}
			tl.add(time.Now(), "gateway entry at the end: %s", describeNeighbor(rec.after, rc.oldMAC, rc.newMAC))
			Expect(tl.write(f.Artifact("timeline.md"))).To(Succeed())
			AddReportEntry("ARP-03 timeline", tl.Markdown())

			Expect(atReady.MAC.String()).To(Equal(rc.oldMAC.String()),
				"when the re-created VM is up the gateway must still hold the old MAC %s for %s, or "+failures.RecoveryMeasuresNothing+" (it holds %s)", rc.oldMAC, v.addr, atReady.MAC)
			Expect(rec.recovered).To(BeTrue(), "gateway-to-guest "+failures.RecoversWithin+" %s of re-creation%s",
				secs(e.limit), e.why())
			took := rec.first.Reply.Sub(rec.streamed)
			if e.bounded {
				Expect(took).To(BeNumerically("<=", e.bound.Total()), "recovery took %s, beyond the bound %s", took, e.bound.Formula())
			}
			Expect(rec.after.MAC.String()).To(Equal(rc.newMAC.String()), "after recovery the gateway's entry for %s must hold the new MAC", v.addr)
		})

		// Environment (measured): "0.3 s after a gratuitous ARP from the new guest (accepted even with arp_accept=0)."
		// The outage it ends is ARP-02's re-creation's, as the standby
		// router beside the gateway still sees it: the gateway itself
		// recovered in ARP-03. Without a standby (a vendor's gateway), or
		// once its entry no longer holds the old MAC, ARP-04 re-creates
		// the VM itself and watches the gateway.
		It("[ARP-04] ends the outage at once when the new guest sends a gratuitous ARP", labels.Claim("ARP-04"), func(ctx SpecContext) {
			v, err := booted.take(ctx, "vm-arp")
			Expect(err).NotTo(HaveOccurred())
			gw, who := gw, "gateway" // the router whose entry is watched
			standby := standbyFor(gw)
			rc, why := v.staleAtStandby(ctx, standby)
			if rc != nil {
				gw, who = standby, "standby router"
				f.Note("the standby router %s still holds %s for %s, the MAC before %q re-created %s: no re-creation of ARP-04's own", gw.Address(), rc.oldMAC, v.addr, rc.by, v.Name())
			} else {
				f.Note("%s: ARP-04 re-creates %s and watches the gateway", why, v.Name())
				_, err := warmGateway(ctx, gw, v)
				skip.IfNotObservable(err)
				Expect(err).NotTo(HaveOccurred())
				rc, err = v.recreate(ctx, p, CurrentSpecReport().LeafNodeText)
				Expect(err).NotTo(HaveOccurred())
			}

			stream, err := gw.StartPing(ctx, v.addr, 20*time.Millisecond)
			skip.IfNotObservable(err)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(stream.Stop)
			watch := watchNeighbor(gw, v.addr, 10*time.Millisecond)
			DeferCleanup(watch.Stop)
			// t = 0 is the gratuitous ARP on the wire at the router: in a
			// VM the announcing command itself takes most of a second to
			// start under TCG, which is the guest's time, not the router's.
			pcap := f.Artifact(strings.ReplaceAll(who, " ", "-") + ".pcap")
			wireCap, err := evidence.StartCapture(gw.VLANPoint(), pcap)
			skip.IfNotObservable(err)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(wireCap.Stop)
			stale, err := gw.Neighbor(ctx, v.addr)
			Expect(err).NotTo(HaveOccurred())
			Expect(stale.MAC.String()).To(Equal(rc.oldMAC.String()), "before the announcement the %s must still hold the old MAC, or the announcement proves nothing", who)
			time.Sleep(200 * time.Millisecond) // the outage, on the record

			asked := time.Now()
			Expect(guestnet.AnnounceGARP(ctx, v)).To(Succeed())
			// The wait is long, the verdict is not: the entry either flips
			// (by the announcement or by the gateway's own probing) or the
			// wait ends; both are then timed from the frame.
			_, last, _ := awaitEntry(ctx, gw, v.addr, rc.newMAC, garpWait)
			frames, err := wireCap.Stop()
			Expect(err).NotTo(HaveOccurred())
			announced, onWire := garpSeen(frames, v.addr, rc.newMAC, asked)
			if !onWire {
				announced = asked
			}
			first, recovered := awaitReply(ctx, stream, announced, garpLimit)
			probes, changes := stream.Stop(), watch.Stop()
			flipped, flippedOK := firstWith(changes, rc.newMAC, asked)

			tl := newTimeline("ARP-04: a gratuitous ARP from the re-created " + v.Name())
			tl.origin = announced
			tl.note("%s → %s every 20 ms; its entry sampled every 10 ms; t = 0 when the guest's gratuitous ARP reaches the %s (%s)", who, v.addr, gw.VLANPoint(), pcap)
			tl.add(rc.start, "re-creation starts: %s deleted (MAC %s)", v.Name(), rc.oldMAC)
			tl.add(rc.ready, "re-created %s is up (MAC %s)", v.Name(), rc.newMAC)
			tl.add(asked, "the guest is asked to send a gratuitous ARP: %s is-at %s", v.addr, rc.newMAC)
			if onWire {
				tl.add(announced, "its gratuitous ARP reaches the %s", who)
			} else {
				tl.note("no gratuitous ARP from %s (%s) reached the %s; t = 0 is when the guest was asked", v.addr, rc.newMAC, who)
			}
			tl.addProbes(probes, who+" → guest")
			tl.addEntry(who, changes, rc.oldMAC, rc.newMAC)
			if flippedOK {
				tl.note("measured: the %s's entry held the new MAC %d ms after the announcement", who, flipped.Sub(announced).Milliseconds())
			}
			if recovered {
				tl.note("measured: first echo reply %d ms after the announcement", first.Reply.Sub(announced).Milliseconds())
			}
			Expect(tl.write(f.Artifact("timeline.md"))).To(Succeed())
			AddReportEntry("ARP-04 timeline", tl.Markdown())

			Expect(onWire).To(BeTrue(), "within %s of the gratuitous ARP the %s's entry "+failures.EntryFlipsToNewMAC+" %s, but no gratuitous ARP from %s reached its %s; it holds %s",
				garpLimit, who, rc.newMAC, v.addr, gw.VLANPoint(), describeNeighbor(last, rc.oldMAC, rc.newMAC))
			Expect(flippedOK && flipped.Sub(announced) <= garpLimit).To(BeTrue(), "within %s of the gratuitous ARP the %s's entry "+failures.EntryFlipsToNewMAC+" %s; it holds %s",
				garpLimit, who, rc.newMAC, describeNeighbor(last, rc.oldMAC, rc.newMAC))
			Expect(recovered && first.Reply.Sub(announced) <= garpLimit).To(BeTrue(), "%s-to-guest must work again within %s of the gratuitous ARP", who, garpLimit)
		})

		// "KubeVirt generates a fresh guest MAC each time the VM object is re-created ... so re-creating a VM changes its MAC."
		// It runs after ARP-02..04 and observes the last of their re-creations
		// (ARP-02's, where ARP-04 ended its outage at the standby router)
		// from the sides they do not: one boot fewer (a TCG re-creation is
		// about 110 s). Observations that do not derive from one another: what the platform
		// reports (a cluster: the VMI status), the guest's own `ip link`, and
		// the gateway's neighbour entry once the guest has spoken.
		It("[ARP-01] gives the re-created VM's VLAN NIC a fresh MAC: platform, guest and gateway agree", labels.Claim("ARP-01"), func(ctx SpecContext) {
			v, err := booted.take(ctx, "vm-arp")
			Expect(err).NotTo(HaveOccurred())
			rc := v.last
			if rc == nil {
				// No earlier spec re-created vm-arp (the run selects ARP-01
				// without ARP-02..04): this one does.
				rc, err = v.recreate(ctx, p, CurrentSpecReport().LeafNodeText)
				Expect(err).NotTo(HaveOccurred())
			} else {
				f.Note("observing the re-creation of %s that %q made (the other sides of the same event)", v.Name(), rc.by)
			}
			k, kube := platform.As[platform.KubeVMs](p)

			report := fmt.Sprintf("%s (no MAC pinned): before re-creation %s, after %s (re-creation took %d ms)",
				v.Name(), rc.oldMAC, rc.newMAC, rc.took().Milliseconds())
			Expect(writeArtifact(f.Artifact("macs.md"), "# ARP-01: MAC before and after re-creation\n\n"+report+"\n")).To(Succeed())
			AddReportEntry("ARP-01 MACs", report)

			Expect(rc.newMAC.String()).NotTo(Equal(rc.oldMAC.String()), "re-creating %s "+failures.FreshMAC, v.Name())
			Expect(isLocalUnicast(rc.newMAC)).To(BeTrue(), "the fresh MAC %s must be a locally administered unicast address, as generated ones are", rc.newMAC)

			if kube {
				after, err := k.VMStatus(ctx, v)
				Expect(err).NotTo(HaveOccurred())
				f.Note("VM UID %s -> %s; VMI status MAC of %s %s -> %s", rc.before.VMUID, after.VMUID, nad, rc.before.VLANMAC, after.VLANMAC)
				Expect(after.VMUID).NotTo(Equal(rc.before.VMUID), "the VirtualMachine object must really be re-created")
				Expect(after.VLANMAC.String()).To(Equal(rc.newMAC.String()), "the VMI status must report the fresh MAC")
			}
			nic := f.Subject().VLANNIC()
			inGuest, err := guestnet.LinkMAC(ctx, v, nic)
			Expect(err).NotTo(HaveOccurred(), "reading %s's MAC inside the guest", nic)
			f.Note("inside the guest %s has %s", nic, inGuest)
			Expect(inGuest.String()).To(Equal(rc.newMAC.String()), "the guest's own %s must carry the fresh MAC", nic)
			// The gateway learns the MAC from the wire once the guest speaks.
			res, err := guestnet.Ping(ctx, v, gw.Address())
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Received).To(BeNumerically(">", 0), "the re-created guest must reach the gateway %s", gw.Address())
			neigh, err := gw.Neighbor(ctx, v.addr)
			if errors.Is(err, evidence.ErrNotObservable) {
				f.Note("the gateway's entry: %v", err)
				return // a user's gateway: two observations are all there is
			}
			Expect(err).NotTo(HaveOccurred())
			f.Note("the gateway's entry for %s: %s %s", v.addr, neigh.MAC, neigh.State)
			Expect(neigh.MAC.String()).To(Equal(rc.newMAC.String()), "the gateway must have learnt the fresh MAC from the wire")
		})

		// After ARP-01, the last spec to observe vm-arp's re-creations: it
		// drains that guest's node (drain.go).
		drainSpec(f, booted, &p, &gw)

		// Seed 003: KubeMacPool "injects a guaranteed-unique static MAC address into the manifest";
		// "If a VM loses its MAC address after a live migration or restart, external DHCP reservations and ARP tables break."
		It("[ARP-05] keeps a pinned MAC across re-creation, with no outage beyond the re-creation itself", labels.Claim("ARP-05"), func(ctx SpecContext) {
			var run pinnedRun
			v, err := booted.take(ctx, "vm-arp05")
			Expect(err).NotTo(HaveOccurred())
			if booted.pinned != nil {
				run, err = booted.pinned.wait(ctx)
				f.Note("%s was re-created in the background, beside vm-arp's first re-creation: the gateway pinged it all along", v.Name())
			} else {
				run, err = recreatePinned(ctx, gw, p, v, CurrentSpecReport().LeafNodeText)
			}
			skip.IfNotObservable(err)
			Expect(err).NotTo(HaveOccurred())
			rc, atReady, grace, probes, changes := run.rc, run.atReady, run.grace, run.probes, run.changes
			lost := lostSentAfter(probes, rc.ready.Add(grace))

			tl := newTimeline("ARP-05: re-creating " + v.Name() + " with its MAC pinned to " + pinnedMAC)
			tl.origin = rc.ready
			tl.note("gateway → %s every %s; gateway entry sampled every %s; t = 0 when the re-created VM is up", v.addr, streamEvery, watchEvery)
			tl.note("the re-creation itself (delete to up) took %d ms; gateway entry when the VM was up: %s (grace %s); echo requests sent after that left unanswered: %d",
				rc.took().Milliseconds(), describeNeighbor(atReady, rc.oldMAC, rc.newMAC), grace, len(lost))
			tl.add(rc.start, "re-creation starts: %s deleted (MAC %s)", v.Name(), rc.oldMAC)
			tl.add(rc.ready, "re-created %s is up (MAC %s)", v.Name(), rc.newMAC)
			tl.addProbes(probes, "gateway → guest")
			tl.addNeighbor(changes, rc.oldMAC, rc.newMAC)
			Expect(tl.write(f.Artifact("timeline.md"))).To(Succeed())
			AddReportEntry("ARP-05 timeline", tl.Markdown())

			// The cause first: a lost MAC explains the outage that follows it.
			Expect(rc.newMAC.String()).To(Equal(rc.oldMAC.String()), failures.PinnedMACSurvives)
			Expect(rc.newMAC.String()).To(Equal(pinnedMAC), "the guest must carry the MAC pinned on its interface")
			Expect(len(lost)).To(BeZero(), "no echo request sent after the re-created VM was up (+%s) may go unanswered: %d were, the first %s after it was up",
				grace, len(lost), firstOffset(lost, rc.ready))
		})

		// Seed 003: "If two VMs accidentally receive the same MAC address, an enterprise network
		// collision occurs, dropping packets across the physical switch."
		It("[ARP-06] reports two guests with one MAC on VLAN 100 as a collision: the MAC flaps between bridge ports", labels.Claim("ARP-06"), func(ctx SpecContext) {
			// vm-arp06 takes the MAC vm-arp05 holds, on a second node when
			// there is one (guests): the collision then spans the trunk, as
			// in seed 003.
			pair, err := booted.takeAll(ctx, "vm-arp06", "vm-arp05")
			Expect(err).NotTo(HaveOccurred())
			a, b := pair[0], pair[1]
			watched := a.Node()
			mac := a.MAC()

			origin := time.Now()
			var samples []fdbSample
			var answers []string
			for round := 0; round < 3; round++ {
				for _, g := range []*vm{a, b} {
					// Each guest asks for the gateway: a broadcast with the MAC as
					// source, which every bridge on the VLAN learns from. Whether
					// the answer reaches this guest or the other is part of the
					// symptom, not a failure of the probe.
					got, perr := guestnet.ARPProbe(ctx, g, gw.Address(), 300*time.Millisecond)
					answers = append(answers, fmt.Sprintf("%s (%s, MAC %s) who-has %s: %s", g.Name(), g.addr, g.MAC(), gw.Address(), answerText(got, perr)))
					port, err := portOf(ctx, watched, mac)
					Expect(err).NotTo(HaveOccurred(), "reading the FDB of br100 on %s", watched.Name())
					samples = append(samples, fdbSample{at: time.Now(), speaker: g.Name(), port: port})
				}
			}
			moves, ports := flaps(samples)

			var md strings.Builder
			fmt.Fprintf(&md, "# ARP-06: %s (MAC %s, on %s) and %s (MAC %s, on %s)\n\n", a.Name(), a.MAC(), a.Node().Name(), b.Name(), b.MAC(), b.Node().Name())
			fmt.Fprintf(&md, "Where br100 on %s puts %s after each guest speaks: %d moves between %d ports (%s).\n\n", watched.Name(), mac, moves, len(ports), strings.Join(ports, ", "))
			md.WriteString(describeSamples(samples, origin))
			md.WriteString("\nThe guests' own ARP probes for the gateway:\n\n- " + strings.Join(answers, "\n- ") + "\n")
			Expect(writeArtifact(f.Artifact("fdb.md"), md.String())).To(Succeed())

			Expect(moves).To(BeNumerically(">=", 2), failures.CollisionFlaps+" %s flapping between ports of br100 on %s:\n%s", mac, watched.Name(), describeSamples(samples, origin))
			Expect(ports).To(HaveLen(2), "the MAC must flap between exactly the two guests' ports")
			AddReportEntry("ARP-06 collision", fmt.Sprintf("MAC collision on VLAN %d: %s moved %d times between %s on br100 of %s as %s and %s spoke",
				p.Config().VLAN, mac, moves, strings.Join(ports, " and "), watched.Name(), a.Name(), b.Name()))
		})

	})
	restartSpecs(f, booted, wait)
}

func boundNote(bounded bool, declared evidence.NeighProfile) string {
	if !bounded {
		return " (no declared timers: not bounded; a gateway that keeps its entries longer needs a longer --gateway-wait, and the guest's gratuitous ARP ends the outage at once where the gateway honours it, ARP-04)"
	}
	return fmt.Sprintf(", the bound the declared %q timers imply (%s)", declared.Name, describeTimers(declared.Timers))
}

func runningNote(t evidence.NeighTimers, err error) string {
	if err != nil {
		return "; the gateway's running timers are unknown: " + err.Error()
	}
	return "; the gateway reports running " + describeTimers(t)
}

func firstOffset(ps []probe.Probe, t time.Time) string {
	if len(ps) == 0 {
		return "-"
	}
	return fmt.Sprintf("%d ms", ps[0].Sent.Sub(t).Milliseconds())
}

func answerText(gwMAC net.HardwareAddr, err error) string {
	if err != nil {
		return "no answer reached it"
	}
	return "answered (is-at " + gwMAC.String() + ")"
}

func writeArtifact(path, text string) error {
	return os.WriteFile(path, []byte(text), 0o644)
}
