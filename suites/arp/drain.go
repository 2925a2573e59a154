package arp

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/failures"
	"github.com/cozystack/vlan-conformance/framework/guestnet"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/probe"
	"github.com/cozystack/vlan-conformance/suites/framework"
	"github.com/cozystack/vlan-conformance/suites/labels"
	"github.com/cozystack/vlan-conformance/suites/skip"
)

const (
	// drainTimeout bounds ARP-08: the migration's target pod starting
	// under TCG, the migration, and the waits below.
	drainTimeout = 10 * time.Minute
	// resumeWithin is how long after KubeVirt reports the migration done
	// the gateway must reach the guest again: the guest never left the
	// VLAN's address plan, only its port moved.
	resumeWithin = 10 * time.Second
	// portGoneWithin is how long the source node's br100 may keep the
	// guest's old port: until the source launcher pod's sandbox is torn
	// down (CNI DEL removes the veth, and its FDB entries with it).
	portGoneWithin = time.Minute
	// portLearnedWithin: the target learns the MAC from the guest's first
	// frame, which its announcement after the migration sends at once.
	portLearnedWithin = 10 * time.Second
)

// drainSpec is ARP-08. Cozystack's KubeVirt CR sets evictionStrategy:
// LiveMigrate, so draining a node moves a VM rather than stopping it.
// Moved live, the guest keeps its memory, and with it its MAC and address:
// unlike a restart (ARP-07), the gateway's entry stays right. What the
// VLAN sees is the guest's port leaving one node's br100 for the other's.
// The VM is vm-arp as ARP-02..04 left it re-created and ARP-01 observed
// it: a drain needs a running guest, not a boot of its own.
//
//	vcf-gw ══ trunk ══ node A: br100 ── veth (launcher pod 1) ── vm-arp     before the drain
//	             ╚════ node B: br100 ── veth (launcher pod 2) ── vm-arp     after: same MAC, same address
//
// The gateway pings the guest every streamEvery from before the eviction
// to the first reply after the migration: the outage is the run of
// unanswered echoes in between.
func drainSpec(f *framework.Framework, booted *fleet, p *platform.Platform, gw *platform.Gateway) {
	// "evictionStrategy: LiveMigrate" (Cozystack's KubeVirt CR): a drain moves the VM, and the VLAN follows it.
	It("[ARP-08] keeps the guest's MAC and address when a drain live-migrates its VM; the gateway reaches it again, and the target node's br100 learns the MAC", labels.Claim("ARP-08"), SpecTimeout(drainTimeout), func(ctx SpecContext) {
		k, ok := platform.As[platform.KubeVMs](*p)
		if !ok {
			Skip((*p).Name() + " has no VirtualMachine objects to drain: ARP-08 is about KubeVirt's live migration")
		}
		if len((*p).BridgeNodes()) < 2 {
			Skip("one bridge node only: no node to migrate the VM to")
		}
		v, err := booted.take(ctx, "vm-arp")
		Expect(err).NotTo(HaveOccurred())
		nic := f.Subject().VLANNIC()
		before, err := k.VMStatus(ctx, v)
		Expect(err).NotTo(HaveOccurred())
		source := v.Node()
		addrsBefore, err := guestnet.Addresses(ctx, v, v.VLANInterface())
		Expect(err).NotTo(HaveOccurred())
		_, err = warmGateway(ctx, *gw, v)
		skip.IfNotObservable(err)
		Expect(err).NotTo(HaveOccurred())

		stream, err := (*gw).StartPing(ctx, v.addr, streamEvery)
		Expect(err).NotTo(HaveOccurred())
		asked := time.Now()
		d, err := v.Drain(ctx)
		if err != nil {
			stream.Stop()
		}
		Expect(err).NotTo(HaveOccurred())
		f.Note("drain of %s: launcher pod %s; the eviction: %s; migration %s %s, %s -> %s, %s to %s (KubeVirt's clock)",
			v.Name(), d.Pod, answer(d), d.Migration, d.Phase, d.SourceNode, d.TargetNode, d.Start.Format(time.TimeOnly), d.End.Format(time.TimeOnly))
		if d.Evicted {
			stream.Stop()
		}
		Expect(d.Evicted).To(BeFalse(), "evicting launcher pod %s: "+failures.DrainMigrates+" (Cozystack's evictionStrategy: LiveMigrate), but KubeVirt let the eviction through and the VM stopped with its pod", d.Pod)

		first, resumed := awaitReply(ctx, stream, d.Done, resumeWithin)
		probes := stream.Stop()
		after, err := k.VMStatus(ctx, v)
		Expect(err).NotTo(HaveOccurred())
		inGuest, err := guestnet.LinkMAC(ctx, v, nic)
		Expect(err).NotTo(HaveOccurred(), "reading %s's MAC inside the migrated guest", nic)
		addrsAfter, err := guestnet.Addresses(ctx, v, v.VLANInterface())
		Expect(err).NotTo(HaveOccurred())
		entry, err := (*gw).Neighbor(ctx, v.addr)
		Expect(err).NotTo(HaveOccurred())
		target := v.Node()
		learned, targetPort, err := awaitPort(ctx, target, before.VLANMAC, true, portLearnedWithin)
		Expect(err).NotTo(HaveOccurred())
		gone, sourcePort, err := awaitPort(ctx, source, before.VLANMAC, false, portGoneWithin)
		Expect(err).NotTo(HaveOccurred())

		tl := newTimeline("ARP-08: a drain of " + v.Name() + "'s node, KubeVirt migrating it live")
		tl.origin = asked
		tl.note("t = 0 when the launcher pod's eviction is asked for; the gateway, having resolved the guest, pings it every %s from just before", streamEvery)
		tl.add(asked, "eviction of %s asked for: VM %s on %s, VLAN MAC %s, addresses %v", d.Pod, before.VMIUID, before.Node, before.VLANMAC, addrsBefore)
		if !d.Start.IsZero() {
			tl.note("KubeVirt's migrationState (second resolution): started %s, ended %s", d.Start.Format(time.RFC3339), d.End.Format(time.RFC3339))
		}
		tl.add(d.Done, "migration %s seen Succeeded: VMI %s on %s, VMI status MAC %s, inside the guest %s has %s, addresses %v", d.Migration, after.VMIUID, after.Node, after.VLANMAC, nic, inGuest, addrsAfter)
		o := tl.addProbes(probes, "gateway → guest")
		if resumed {
			tl.add(first.Reply, "first reply after the migration, %d ms after KubeVirt reported it done", first.Reply.Sub(d.Done).Milliseconds())
		}
		tl.add(learned, "%s's br100: the MAC behind %s", target.Name(), orNone(targetPort))
		tl.add(gone, "%s's br100: the MAC behind %s", source.Name(), orNone(sourcePort))
		Expect(tl.write(f.Artifact("drain.md"))).To(Succeed())
		f.Note("%s migrated %s -> %s; MAC %s -> %s (guest's %s %s); %d of %d echoes unanswered (%s); gateway entry %s %s; br100 on %s: %s, on %s: %s",
			v.Name(), before.Node, after.Node, before.VLANMAC, after.VLANMAC, nic, inGuest, o.Lost, o.Sent, describeOutage(o, probes), entry.MAC, entry.State, target.Name(), orNone(targetPort), source.Name(), orNone(sourcePort))

		Expect(after.VMIUID).To(Equal(before.VMIUID), "a live migration keeps the VMI; a new one means the VM was restarted")
		Expect(after.Node).NotTo(Equal(before.Node), "the drain must move the VM off %s", before.Node)
		Expect(after.VLANMAC.String()).To(Equal(before.VLANMAC.String()), "the migrated VMI must keep its VLAN MAC")
		Expect(inGuest.String()).To(Equal(before.VLANMAC.String()), "the guest's own %s must keep its MAC", nic)
		Expect(addrsAfter).To(ConsistOf(addrsBefore), "the guest's %s must keep its addresses", v.VLANInterface())
		Expect(resumed).To(BeTrue(), "gateway-to-guest must work again within %s of the migration's end", resumeWithin)
		Expect(entry.MAC.String()).To(Equal(before.VLANMAC.String()), "the gateway's entry for %s must still hold the guest's MAC", v.addr)
		Expect(isGuestPort(targetPort)).To(BeTrue(), "%s's br100 must learn the guest's MAC %s behind the new launcher's port (it has it behind %s)", target.Name(), before.VLANMAC, orNone(targetPort))
		Expect(isGuestPort(sourcePort)).To(BeFalse(), "%s's br100 must drop the old launcher's port for %s within %s (it has it behind %s)", source.Name(), before.VLANMAC, portGoneWithin, sourcePort)
	})
}

// awaitPort polls the node's br100 until the MAC sits behind a guest's
// port (want) or behind none (!want), at most within; it returns when it
// saw that, and the port it last read.
func awaitPort(ctx context.Context, n platform.Node, mac net.HardwareAddr, want bool, within time.Duration) (time.Time, string, error) {
	deadline := time.Now().Add(within)
	for {
		port, err := portOf(ctx, n, mac)
		at := time.Now()
		if err != nil {
			return at, "", fmt.Errorf("reading %s's br100: %w", n.Name(), err)
		}
		if isGuestPort(port) == want || at.After(deadline) || ctx.Err() != nil {
			return at, port, nil
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// isGuestPort tells a launcher pod's port of br100 from the uplink side
// (uplink or uplink.<vlan>), behind which the node learns any guest of
// another node.
func isGuestPort(port string) bool {
	return port != "" && !strings.HasPrefix(port, fabric.UplinkName)
}

func orNone(port string) string {
	if port == "" {
		return "(no entry)"
	}
	return port
}

// answer is the API server's answer to the eviction.
func answer(d platform.Drain) string {
	if d.Evicted {
		return "granted"
	}
	return "refused: " + d.Refusal
}

// describeOutage is the stream's run of unanswered echoes, from the first
// lost to the first reply after the last.
func describeOutage(o outage, probes []probe.Probe) string {
	if o.Lost == 0 {
		return fmt.Sprintf("no gap beyond %s", streamEvery)
	}
	p, ok := firstReplyAfter(probes, o.LastLost.Sent)
	if !ok {
		return "no reply after the last lost echo"
	}
	return fmt.Sprintf("outage %d ms, from echo #%d sent to echo #%d answered", p.Reply.Sub(o.FirstLost.Sent).Milliseconds(), o.FirstLost.Seq, p.Seq)
}
