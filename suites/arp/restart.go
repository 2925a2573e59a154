package arp

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cozystack/vlan-conformance/framework/failures"
	"github.com/cozystack/vlan-conformance/framework/guestnet"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/suites/framework"
	"github.com/cozystack/vlan-conformance/suites/labels"
	"github.com/cozystack/vlan-conformance/suites/skip"
)

// restartsTimeout bounds ARP-07: per restart, a boot under TCG (two
// minutes) with the guest's shutdown, and the longest recovery it times.
var restartsTimeout = time.Duration(len(platform.Restarts)) * (vendorLimit + 4*time.Minute)

// restartSpec is ARP-07. The guide names re-creation as what changes the
// MAC; a restart keeps the VirtualMachine object, but KubeVirt's bridge
// binding takes an unpinned MAC from the launcher pod's interface, and
// every restart makes a new launcher pod. So the question is what its
// users hit: a MAC that changes with no re-creation, and the gateway's
// stale entry after it.
//
//	VirtualMachine vm-arp07 (kept)
//	  VMI 1 ──stop, start──▶ VMI 2 ──restart subresource──▶ VMI 3 ──VMI deleted──▶ VMI 4
//
// Each restart's outage is timed as ARP-03 times a re-creation's
// (timeRecovery): the gateway resolves the guest first, sends nothing
// while the VM boots, then pings it until it answers.
func restartSpec(f *framework.Framework, booted *fleet, p *platform.Platform, gw *platform.Gateway) {
	// "KubeVirt generates a fresh guest MAC each time the VM object is re-created": and when it is only restarted?
	It("[ARP-07] gives the VLAN NIC a fresh MAC on every restart of the same VirtualMachine, and the gateway holds the old one until its entry ages out", labels.Claim("ARP-07"), SpecTimeout(restartsTimeout), func(ctx SpecContext) {
		k, ok := platform.As[platform.KubeVMs](*p)
		if !ok {
			Skip((*p).Name() + " has no VirtualMachine objects to restart: ARP-07 is about KubeVirt's restarts, which keep the object")
		}
		v, err := booted.take(ctx, "vm-arp07")
		Expect(err).NotTo(HaveOccurred())
		nic := f.Config().Subject().VLANNIC()

		tl := newTimeline("ARP-07: restarts of " + v.Name() + ", its VirtualMachine kept")
		tl.note("t = 0 when the first restart is asked for; before each restart the gateway resolves the guest; it sends nothing while the VM boots; once the restarted guest is up it pings it every %s until a reply, its entry sampled every %s", streamEvery, watchEvery)
		e, err := expectRecovery(ctx, *gw, tl)
		Expect(err).NotTo(HaveOccurred())
		for i, how := range platform.Restarts {
			By("restarting " + v.Name() + " by " + string(how))
			_, err := warmGateway(ctx, *gw, v)
			skip.IfNotObservable(err)
			Expect(err).NotTo(HaveOccurred())
			rc, err := v.restart(ctx, *p, how)
			Expect(err).NotTo(HaveOccurred())
			// Three observations that do not derive from one another, as
			// ARP-01's: the VMI status, the guest's own link, the gateway.
			after, err := k.VMStatus(ctx, v)
			Expect(err).NotTo(HaveOccurred())
			inGuest, err := guestnet.LinkMAC(ctx, v, nic)
			Expect(err).NotTo(HaveOccurred(), "reading %s's MAC inside the guest", nic)
			atReady, err := (*gw).Neighbor(ctx, v.addr)
			Expect(err).NotTo(HaveOccurred())
			rec, err := timeRecovery(ctx, *gw, v.addr, e.limit)
			skip.IfNotObservable(err)
			Expect(err).NotTo(HaveOccurred())

			if i == 0 {
				tl.origin = rc.start
			}
			tl.add(rc.start, "%s asked for: VM UID %s, VMI UID %s, VLAN MAC %s", how, rc.before.VMUID, rc.before.VMIUID, rc.oldMAC)
			tl.add(rc.ready, "restarted guest up, %d ms after the request: VM UID %s, VMI UID %s, VMI status MAC %s, inside the guest %s has %s; the gateway's entry: %s",
				rc.took().Milliseconds(), after.VMUID, after.VMIUID, after.VLANMAC, nic, inGuest, describeNeighbor(atReady, rc.oldMAC, rc.newMAC))
			tl.add(rec.streamed, "after %s: the gateway starts pinging the restarted guest", how)
			tl.addProbes(rec.probes, "gateway → guest after "+string(how))
			tl.addNeighbor(rec.changes, rc.oldMAC, rc.newMAC)
			if rec.recovered {
				tl.add(rec.first.Reply, "after %s: first reply, %d ms after the gateway's first echo request; its entry at the end: %s",
					how, rec.first.Reply.Sub(rec.streamed).Milliseconds(), describeNeighbor(rec.after, rc.oldMAC, rc.newMAC))
			} else {
				tl.add(time.Now(), "after %s: no reply within %s of the gateway's first echo request; its entry: %s", how, secs(e.limit), describeNeighbor(rec.after, rc.oldMAC, rc.newMAC))
			}
			Expect(tl.write(f.Artifact("restarts.md"))).To(Succeed())
			f.Note("%s: VM UID %s -> %s, VMI UID %s -> %s; VLAN MAC %s -> %s (VMI status %s, guest's %s %s); gateway's entry when up: %s",
				how, rc.before.VMUID, after.VMUID, rc.before.VMIUID, after.VMIUID, rc.oldMAC, rc.newMAC, after.VLANMAC, nic, inGuest, describeNeighbor(atReady, rc.oldMAC, rc.newMAC))

			Expect(after.VMUID).To(Equal(rc.before.VMUID), "%s must keep the VirtualMachine object, or it is a re-creation", how)
			Expect(after.VMIUID).NotTo(Equal(rc.before.VMIUID), "%s must make a new VMI", how)
			// The cause first: a kept MAC explains the missing outage.
			Expect(rc.newMAC.String()).NotTo(Equal(rc.oldMAC.String()), "%s of %s: "+failures.RestartFreshMAC+" (KubeVirt takes it from the new launcher pod's interface); it kept %s", how, v.Name(), rc.oldMAC)
			Expect(inGuest.String()).To(Equal(after.VLANMAC.String()), "the guest's own %s must carry the MAC the VMI status reports", nic)
			Expect(atReady.MAC.String()).To(Equal(rc.oldMAC.String()),
				"when the restarted guest is up the gateway must still hold the old MAC %s for %s, as after a re-creation (it holds %s)", rc.oldMAC, v.addr, atReady.MAC)
			Expect(rec.recovered).To(BeTrue(), "gateway-to-guest must recover by itself within %s after %s%s", secs(e.limit), how, e.why())
			took := rec.first.Reply.Sub(rec.streamed)
			if e.bounded {
				Expect(took).To(BeNumerically("<=", e.bound.Total()), "recovery after %s took %s, beyond the bound %s", how, took, e.bound.Formula())
			}
			Expect(rec.after.MAC.String()).To(Equal(rc.newMAC.String()), "after recovery the gateway's entry for %s must hold the new MAC", v.addr)
		}
		AddReportEntry("ARP-07 restarts", tl.Markdown())
	})
}
