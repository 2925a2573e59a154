package arp

import (
	"context"
	"fmt"
	"net"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/failures"
	"github.com/cozystack/vlan-conformance/framework/guestnet"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/suites/framework"
	"github.com/cozystack/vlan-conformance/suites/labels"
	"github.com/cozystack/vlan-conformance/suites/skip"
)

// restartsTimeout bounds ARP-07: per restart, a boot under TCG (two
// minutes) with the guest's shutdown, and the longest recovery it times.
// GatewayWaits is how many waits of up to --gateway-wait the run selects:
// ARP-03's one and one per restart of ARP-07's. The suite's deadline grows
// by that many times the wait beyond its default (suites/suite_test.go).
func GatewayWaits() int {
	n := 0
	if labels.SelectsAny(labels.ARP, "ARP-03") {
		n++
	}
	if labels.SelectsAny(labels.ARP, "ARP-07") {
		n += len(platform.Restarts)
	}
	return n
}

func restartsTimeout(wait time.Duration) time.Duration {
	return time.Duration(len(platform.Restarts)) * (wait + 4*time.Minute)
}

// restartSpecs is ARP-07. The guide names re-creation as what changes the
// MAC; a restart keeps the VirtualMachine object, but KubeVirt's bridge
// binding takes an unpinned MAC from the launcher pod's interface, and
// every restart makes a new launcher pod. So the question is what its
// users hit: a MAC that changes with no re-creation, and the gateway's
// stale entry after it.
//
//	VirtualMachine vm-arp (kept; re-created by ARP-02, migrated by ARP-08)
//	  VMI n ──stop, start──▶ VMI n+1 ──restart subresource──▶ VMI n+2 ──VMI deleted──▶ VMI n+3
//
// Each restart's outage is timed as ARP-03 times a re-creation's
// (timeRecovery): the gateway resolves the guest first, sends nothing
// while the VM boots, then pings it until it answers. It restarts the ARP
// container's shared guest, not a guest of its own (a first boot fewer),
// and in the background from that container's last spec of it on
// (fleet.handOnRestarts), beside its last specs and the containers after
// it, which take guests booted ahead and boot none: its three boots were
// the last of the container's chain, and those containers' minutes came
// after them (issue 34). Its spec runs last (framework.Last) and waits for them. Run without
// the ARP container's specs (a control's label filter), it takes vm-arp and
// restarts it itself.
func restartSpecs(f *framework.Framework, booted *fleet, wait time.Duration) {
	Describe("Restarting a VM on VLAN 100", labels.ARP, framework.Last, func() {
		// "KubeVirt generates a fresh guest MAC each time the VM object is re-created": and when it is only restarted?
		It("[ARP-07] gives the VLAN NIC a fresh MAC on every restart of the same VirtualMachine, and the gateway holds the old one until its entry ages out", labels.Claim("ARP-07"), SpecTimeout(restartsTimeout(wait)), func(ctx SpecContext) {
			p, err := f.Platform(ctx)
			Expect(err).NotTo(HaveOccurred(), "building the platform")
			skip.IfPods(p, "ARP-07 (restarted VMs)")
			k, ok := platform.As[platform.KubeVMs](p)
			if !ok {
				Skip(p.Name() + " has no VirtualMachine objects to restart: ARP-07 is about KubeVirt's restarts, which keep the object")
			}
			gw := p.Gateway()
			nic := f.Subject().VLANNIC()
			var (
				v *vm
				r restarts
			)
			if h := booted.restarts; h != nil {
				DeferCleanup(func() { Expect(h.Stop()).To(Succeed()) })
				v = booted.vms["vm-arp"]
				f.Note("%s was restarted in the background from the end of the ARP container on, beside the containers after it", v.Name())
				r, err = h.Wait(ctx)
				Expect(err).NotTo(HaveOccurred())
			} else {
				v, err = booted.take(ctx, "vm-arp")
				Expect(err).NotTo(HaveOccurred())
				r = restartAll(ctx, k, gw, p, v, nic, wait)
			}

			for i, run := range r.runs {
				rc, how := run.rc, run.how
				if i == 0 {
					r.tl.origin = rc.start
				}
				r.tl.add(rc.start, "%s asked for: VM UID %s, VMI UID %s, VLAN MAC %s", how, rc.before.VMUID, rc.before.VMIUID, rc.oldMAC)
				r.tl.add(rc.ready, "restarted guest up, %d ms after the request: VM UID %s, VMI UID %s, VMI status MAC %s, inside the guest %s has %s; the gateway's entry: %s",
					rc.took().Milliseconds(), run.after.VMUID, run.after.VMIUID, run.after.VLANMAC, nic, run.inGuest, describeNeighbor(run.atReady, rc.oldMAC, rc.newMAC))
				r.tl.add(run.rec.streamed, "after %s: the gateway starts pinging the restarted guest", how)
				r.tl.addProbes(run.rec.probes, "gateway → guest after "+string(how))
				r.tl.addNeighbor(run.rec.changes, rc.oldMAC, rc.newMAC)
				if run.rec.recovered {
					r.tl.add(run.rec.first.Reply, "after %s: first reply, %d ms after the gateway's first echo request; its entry at the end: %s",
						how, run.rec.first.Reply.Sub(run.rec.streamed).Milliseconds(), describeNeighbor(run.rec.after, rc.oldMAC, rc.newMAC))
				} else {
					r.tl.add(run.rec.streamed.Add(r.e.limit), "after %s: no reply within %s of the gateway's first echo request; its entry: %s", how, secs(r.e.limit), describeNeighbor(run.rec.after, rc.oldMAC, rc.newMAC))
				}
				f.Note("%s: VM UID %s -> %s, VMI UID %s -> %s; VLAN MAC %s -> %s (VMI status %s, guest's %s %s); gateway's entry when up: %s",
					how, rc.before.VMUID, run.after.VMUID, rc.before.VMIUID, run.after.VMIUID, rc.oldMAC, rc.newMAC, run.after.VLANMAC, nic, run.inGuest, describeNeighbor(run.atReady, rc.oldMAC, rc.newMAC))
			}
			if r.err != nil {
				r.tl.note("stopped: %v", r.err)
			}
			Expect(r.tl.write(f.Artifact("restarts.md"))).To(Succeed())
			AddReportEntry("ARP-07 restarts", r.tl.Markdown())

			for _, run := range r.runs {
				rc, how := run.rc, run.how
				Expect(run.after.VMUID).To(Equal(rc.before.VMUID), "%s must keep the VirtualMachine object, or it is a re-creation", how)
				Expect(run.after.VMIUID).NotTo(Equal(rc.before.VMIUID), "%s must make a new VMI", how)
				// The cause first: a kept MAC explains the missing outage.
				Expect(rc.newMAC.String()).NotTo(Equal(rc.oldMAC.String()), "%s of %s: "+failures.RestartFreshMAC+" (KubeVirt takes it from the new launcher pod's interface); it kept %s", how, v.Name(), rc.oldMAC)
				Expect(run.inGuest.String()).To(Equal(run.after.VLANMAC.String()), "the guest's own %s must carry the MAC the VMI status reports", nic)
				Expect(run.atReady.MAC.String()).To(Equal(rc.oldMAC.String()),
					"when the restarted guest is up the gateway must still hold the old MAC %s for %s, as after a re-creation (it holds %s)", rc.oldMAC, v.addr, run.atReady.MAC)
				Expect(run.rec.recovered).To(BeTrue(), "gateway-to-guest must recover by itself within %s after %s%s", secs(r.e.limit), how, r.e.why())
				took := run.rec.first.Reply.Sub(run.rec.streamed)
				if r.e.bounded {
					Expect(took).To(BeNumerically("<=", r.e.bound.Total()), "recovery after %s took %s, beyond the bound %s", how, took, r.e.bound.Formula())
				}
				Expect(run.rec.after.MAC.String()).To(Equal(rc.newMAC.String()), "after recovery the gateway's entry for %s must hold the new MAC", v.addr)
			}
			skip.IfNotObservable(r.err)
			Expect(r.err).NotTo(HaveOccurred())
		})
	})
}

// restarts is ARP-07's evidence: its VM restarted every way
// platform.Restarts names, each outage timed, and the step that did not
// complete when one did not.
type restarts struct {
	tl   *timeline
	e    expected
	runs []restartRun
	err  error
}

// restartRun is one restart as the suite saw it, from three sides that do
// not derive from one another (as ARP-01's): the VMI status, the guest's
// own link and the gateway.
type restartRun struct {
	how     platform.Restart
	rc      *recreation
	after   platform.VMStatus
	inGuest net.HardwareAddr
	atReady evidence.Neighbor
	rec     recovery
}

// restartAll restarts v every way, one after another, each after the
// gateway resolved the guest, and times each outage. It stops at the first
// step that fails, keeping the restarts done.
func restartAll(ctx context.Context, k platform.KubeVMs, gw platform.Gateway, p platform.Platform, v *vm, nic string, wait time.Duration) restarts {
	r := restarts{tl: newTimeline("ARP-07: restarts of " + v.Name() + ", its VirtualMachine kept")}
	r.tl.note("t = 0 when the first restart is asked for; before each restart the gateway resolves the guest; it sends nothing while the VM boots; once the restarted guest is up it pings it every %s until a reply, its entry sampled every %s", streamEvery, watchEvery)
	if r.e, r.err = expectRecovery(ctx, gw, wait, r.tl); r.err != nil {
		return r
	}
	for _, how := range platform.Restarts {
		run, err := restartOnce(ctx, k, gw, p, v, nic, how, r.e.limit)
		if err != nil {
			r.err = fmt.Errorf("%s: %w", how, err)
			return r
		}
		r.runs = append(r.runs, run)
	}
	return r
}

// restartOnce is one restart of v, the way how names, and its outage.
func restartOnce(ctx context.Context, k platform.KubeVMs, gw platform.Gateway, p platform.Platform, v *vm, nic string, how platform.Restart, limit time.Duration) (restartRun, error) {
	run := restartRun{how: how}
	if _, err := warmGateway(ctx, gw, v); err != nil {
		return run, err
	}
	var err error
	if run.rc, err = v.restart(ctx, p, how, "ARP-07's restarts of "+v.Name()); err != nil {
		return run, err
	}
	if run.after, err = k.VMStatus(ctx, v); err != nil {
		return run, err
	}
	if run.inGuest, err = guestnet.LinkMAC(ctx, v, nic); err != nil {
		return run, fmt.Errorf("reading %s's MAC inside the guest: %w", nic, err)
	}
	if run.atReady, err = gw.Neighbor(ctx, v.addr); err != nil {
		return run, err
	}
	run.rec, err = timeRecovery(ctx, gw, v.addr, limit)
	return run, err
}
