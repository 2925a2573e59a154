package arp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/probe"
	"github.com/cozystack/vlan-conformance/suites/framework"
	"github.com/cozystack/vlan-conformance/suites/labels"
)

// nad is the bridge-type NAD every ARP guest is attached to.
const nad = "vlan100"

// warmFor bounds warmGateway: Linux's default DELAY (5 s) and its three
// 1 s PROBEs, twice over.
const warmFor = 20 * time.Second

// vm is a VM the spec re-creates: Guest is always the current incarnation,
// last its latest re-creation, which a later spec may observe from
// another side (ARP-01); outage a re-creation whose outage ARP-02 saw and
// whose recovery ARP-03 times next; announce one the standby router had
// resolved the guest before, whose outage there ARP-04 ends.
type vm struct {
	*framework.VM
	addr     netip.Addr
	last     *recreation
	outage   *recreation
	announce *recreation
}

// guests are the container's VMs, each at the tenant's next address in
// this order, which is also the order they boot in: vm-arp's first, its
// chain of re-creations and restarts the container's longest.
// ARP-01..04, ARP-07 and ARP-08 share one VM: ARP-02 re-creates it, having
// the gateway and the standby router resolve the guest afresh first
// (warmGateway), so none reads what an earlier one left in a router;
// ARP-03 times the gateway's recovery of ARP-02's outage, ARP-04 ends the
// same outage at the standby router (one re-creation fewer, issue 34),
// ARP-01 observes that re-creation (each re-creating it alone when run
// alone, ARP-04 also without a standby router), ARP-08 then drains the
// node of that last incarnation, which may
// run on any bridge node (free) so that the drain can move it, and ARP-07
// restarts it last, every way, each restart after the gateway resolved it
// afresh too; a TCG boot is a minute of a core saved per spec (issue 34:
// the lane is CPU-bound, so a boot fewer is a minute less wherever it
// stood).
// ARP-05 pins a MAC on a guest of its own, and ARP-06 pins the same MAC
// on a second guest beside that one once ARP-05 is done with it: a boot
// fewer than two guests of its own. That second guest never boots ahead
// (late): up while ARP-05 re-creates the first, it would collide with the
// guest whose re-creation ARP-05 times; it boots beside the chain once
// that re-creation is done (bootLate).
// The VMs alternate between the bridge nodes, so that those started
// together fit (each asks for the 4 GiB of vm-instance's default
// instancetype); ARP-06's two stand on different nodes, so that their
// collision spans the trunk.
var guests = []struct {
	claims    []string
	name, mac string
	node      int  // index into the bridge nodes, modulo their count
	free      bool // the VM may run on any bridge node (VMSpec.AlsoOn), node preferred
	late      bool // never the background's: its spec boots it, or the container once it may (bootLate)
}{
	{[]string{"ARP-01", "ARP-02", "ARP-03", "ARP-04", "ARP-08", "ARP-07"}, "vm-arp", "", 1, true, false},
	{[]string{"ARP-05", "ARP-06"}, "vm-arp05", pinnedMAC, 0, false, false},
	{[]string{"ARP-06"}, "vm-arp06", pinnedMAC, 1, false, true},
}

// kubeClaims are the claims about KubeVirt's own objects (a restart keeps
// the VirtualMachine, a drain migrates its VMI): their specs skip on a
// platform without them (platform.KubeVMs), so they start no guest there.
var kubeClaims = []string{"ARP-07", "ARP-08"}

// fleet is the container's VMs: every guest booting ahead from the
// cluster's set-up (framework.PrestartWhen), those taken by name, and
// ARP-05's re-creation when it runs beside vm-arp's (pinned.go).
type fleet struct {
	f      *framework.Framework
	ahead  map[string]*framework.Prestarted
	vms    map[string]*vm
	failed map[string]error // why a taken guest did not start
	pinned *beside
	// ARP-07's restarts of vm-arp, handed on as the container ended
	// (handOnRestarts); nil when the container did not hand it on.
	restarts *framework.HandedOn[restarts]
}

// recreating are the claims whose specs re-create vm-arp.
var recreating = []string{"ARP-02", "ARP-03", "ARP-04"}

// pinnedBeside tells whether ARP-05 re-creates its VM in the background,
// beside the first re-creation of vm-arp: both are selected.
func pinnedBeside() bool {
	return labels.Selected(labels.ARP, labels.Claim("ARP-05")) && labels.SelectsAny(labels.ARP, recreating...)
}

// selects tells whether the run selects a spec of these claims.
func selects(claims []string) bool { return labels.SelectsAny(labels.ARP, claims...) }

// prestartFleet registers the guests, in order, while the spec tree is
// built: on a platform whose guests boot side by side those of the
// selected specs boot ahead, behind whatever container runs first, as
// vm-instance renders them with the guide's cloud-init (and a pinned MAC
// where the spec pins one).
func prestartFleet(f *framework.Framework) *fleet {
	fl := &fleet{f: f, ahead: map[string]*framework.Prestarted{}, vms: map[string]*vm{}, failed: map[string]error{}}
	for _, g := range guests {
		fl.ahead[g.name] = f.PrestartWhen(g.name, func(ctx context.Context, p platform.Platform) (platform.VMSpec, error) {
			nodes := p.BridgeNodes()
			if len(nodes) == 0 {
				return platform.VMSpec{}, errors.New("no bridge node on this platform")
			}
			err := f.ApplyNAD(ctx, nad, "vlan100-bridge")
			spec := platform.VMSpec{Node: nodes[g.node%len(nodes)], Networks: []string{nad}, MAC: g.mac}
			if g.free {
				spec.AlsoOn = slices.DeleteFunc(slices.Clone(nodes), func(n platform.Node) bool { return n == spec.Node })
			}
			return spec, err
		}, func() bool { return !g.late && selects(g.claims) })
	}
	return fl
}

// start takes, for the whole container, the guests of the first selected
// spec, with ARP-05's when it runs beside them (pinnedBeside): the specs
// time re-creations, never a first boot. The others' specs
// take theirs. A guest that did not start fails the specs that take it;
// one whose spec skips on p is not started.
func (fl *fleet) start(ctx context.Context, p platform.Platform) {
	_, kube := platform.As[platform.KubeVMs](p)
	var names []string
	var first []string
	for _, g := range guests {
		claims := g.claims
		if !kube {
			claims = slices.DeleteFunc(slices.Clone(claims), func(c string) bool { return slices.Contains(kubeClaims, c) })
		}
		if !selects(claims) {
			continue
		}
		beside := slices.Contains(g.claims, "ARP-05") && pinnedBeside()
		if first == nil && !beside {
			first = g.claims
		}
		if beside || slices.Equal(g.claims, first) {
			names = append(names, g.name)
		}
		if s := fl.f.Subject(); s != nil && s.IaaS != nil && g.mac != "" {
			fl.f.Note("%s is the suite's own VirtualMachine, not the release's vm-instance render: that chart exposes no way to pin a MAC (%s pinned here)", g.name, g.mac)
		}
	}
	_, _ = fl.takeAll(ctx, names...) // each spec that takes a guest reports why it did not start
}

// bootLate boots the late guests of the selected specs now, as side work
// beside the chain (framework.Prestarted.BootAside), for their specs to
// take: ARP-06's, once ARP-05 is done with vm-arp05, instead of in ARP-06
// on the chain (measured at 717a77f: 88 s of it).
func (fl *fleet) bootLate(ctx context.Context) (stop func()) {
	var stops []func()
	for _, g := range guests {
		if g.late && selects(g.claims) {
			stops = append(stops, fl.ahead[g.name].BootAside(ctx))
		}
	}
	return func() {
		for _, s := range stops {
			s()
		}
	}
}

// takes tells whether the spec of claim takes the guest of that name.
func takes(name, claim string) bool {
	for _, g := range guests {
		if g.name == name {
			return slices.Contains(g.claims, claim)
		}
	}
	return false
}

// handOnRestarts hands vm-arp on to ARP-07's restarts once the container
// is done with it (framework.HandOn): they run in the background, beside
// the container's last specs and the containers after it, for ARP-07's
// spec to wait for. Only once, only when the run selects ARP-07, the
// platform has VirtualMachines to restart and vm-arp is up, and not when
// the run is being interrupted.
func (fl *fleet) handOnRestarts(ctx context.Context, p platform.Platform, gw platform.Gateway, nic string, wait time.Duration) {
	k, kube := platform.As[platform.KubeVMs](p)
	v, ok := fl.vms["vm-arp"]
	if fl.restarts != nil || !kube || !ok || v.Guest == nil || !labels.Selected(labels.ARP, labels.Claim("ARP-07")) ||
		CurrentSpecReport().State.Is(types.SpecStateInterrupted|types.SpecStateAborted) {
		return
	}
	fl.restarts = framework.HandOn(ctx, func(ctx context.Context) restarts {
		return restartAll(ctx, k, gw, p, v, nic, wait)
	}, v.VM)
}

// take is the VM of that name, up: taken by the container's set-up, or
// now, for the current spec.
func (fl *fleet) take(ctx context.Context, name string) (*vm, error) {
	vms, err := fl.takeAll(ctx, name)
	return vms[0], err
}

// takeAll is take for several VMs, those not taken yet booting side by
// side when the background did not get to them.
func (fl *fleet) takeAll(ctx context.Context, names ...string) ([]*vm, error) {
	out := make([]*vm, len(names))
	var pending []*framework.Prestarted
	var at []int
	for i, name := range names {
		if err, ok := fl.failed[name]; ok {
			return out, fmt.Errorf("%s did not start: %w", name, err)
		}
		if v, ok := fl.vms[name]; ok {
			if v.Guest == nil {
				return out, fmt.Errorf("%s is gone: an earlier spec's re-creation of it failed", name)
			}
			out[i] = v
			continue
		}
		ps, ok := fl.ahead[name]
		if !ok {
			return out, fmt.Errorf("no guest %s in this container: a bug in the suite", name)
		}
		pending, at = append(pending, ps), append(at, i)
	}
	if len(pending) == 0 {
		return out, nil
	}
	started, err := framework.TakeAll(ctx, pending...)
	for k, v := range started {
		if v != nil {
			out[at[k]] = &vm{VM: v, addr: v.Addr.Addr()}
			fl.vms[names[at[k]]] = out[at[k]]
		} else {
			fl.failed[names[at[k]]] = err
		}
	}
	if err != nil {
		return out, fmt.Errorf("starting %s: %w", strings.Join(names, ", "), err)
	}
	return out, nil
}

// recreation is one delete-and-create of a VM, timed; or one restart of
// it, its VirtualMachine kept (ARP-07).
type recreation struct {
	start, ready   time.Time // before the delete; once the new guest is up
	oldMAC, newMAC net.HardwareAddr
	before         platform.VMStatus // the VM object before it, where the platform has one (platform.KubeVMs)
	by             string            // the spec that made it
	// What ARP-02 saw of it, for ARP-03 to time the recovery of the same
	// outage: the gateway's entry warmed before it and read when the VM
	// was up, and when the gateway first sent to the re-created guest.
	warmed, atReady evidence.Neighbor
	firstSent       time.Time
}

// takeOutage is the re-creation whose outage ARP-02 saw right before,
// once: nil when ARP-02 did not run, failed, or another spec took it.
func (v *vm) takeOutage() *recreation {
	rc := v.outage
	v.outage = nil
	return rc
}

func (r recreation) took() time.Duration { return r.ready.Sub(r.start) }

// recreate deletes the VM and creates it again from the same spec, as a
// user deleting and re-applying the VM object does; by names who does.
func (v *vm) recreate(ctx context.Context, p platform.Platform, by string) (*recreation, error) {
	r, err := v.timed(ctx, p, "re-creation", by, v.Recreate)
	if err == nil {
		v.last, v.outage, v.announce = r, nil, nil
	}
	return r, err
}

// standbyFor is the gateway's standby router when ARP-04 will watch it
// (platform.Standby), else nil.
func standbyFor(gw platform.Gateway) platform.Gateway {
	if !labels.Selected(labels.ARP, labels.Claim("ARP-04")) {
		return nil
	}
	return platform.StandbyOf(gw)
}

// staleAtStandby is, once, the re-creation whose outage the standby
// router still holds: the guest is that re-creation's incarnation and the
// standby's entry for it the MAC before. A TCG re-creation (two minutes)
// fewer for ARP-04 (issue 34). Else nil, and why not.
func (v *vm) staleAtStandby(ctx context.Context, standby platform.Gateway) (*recreation, string) {
	rc := v.announce
	v.announce = nil
	switch {
	case standby == nil:
		return nil, "no standby router beside the gateway"
	case rc == nil:
		return nil, "no re-creation the standby router had resolved the guest before (ARP-02's)"
	case !bytes.Equal(v.MAC(), rc.newMAC):
		return nil, fmt.Sprintf("%s was re-created again since %q's re-creation", v.Name(), rc.by)
	}
	n, err := standby.Neighbor(ctx, v.addr)
	if err != nil {
		return nil, fmt.Sprintf("the standby router's entry for %s: %v", v.addr, err)
	}
	if !bytes.Equal(n.MAC, rc.oldMAC) {
		return nil, fmt.Sprintf("the standby router's entry for %s holds %s, not the old MAC %s", v.addr, describeNeighbor(n, rc.oldMAC, rc.newMAC), rc.oldMAC)
	}
	return rc, ""
}

// restart gets the VM a new instance the way how names, its
// VirtualMachine kept (ARP-07), timed as a re-creation is; by names who
// does.
func (v *vm) restart(ctx context.Context, p platform.Platform, how platform.Restart, by string) (*recreation, error) {
	return v.timed(ctx, p, string(how), by, func(ctx context.Context) error { return v.Restart(ctx, how) })
}

// timed runs do, which gets the VM a new instance (what names it), from
// before it until the new guest is up, with the MAC before and after and,
// where the platform has one (platform.KubeVMs), the VM object's status
// before. by is the spec (or the work) that does it, passed in: work in
// the background (ARP-05's re-creation beside the chain, ARP-07's restarts
// handed on) runs while another spec is current.
func (v *vm) timed(ctx context.Context, p platform.Platform, what, by string, do func(context.Context) error) (*recreation, error) {
	r := &recreation{oldMAC: v.MAC(), by: by}
	if k, ok := platform.As[platform.KubeVMs](p); ok {
		st, err := k.VMStatus(ctx, v)
		if err != nil {
			return r, fmt.Errorf("%s before %s: %w", v.Name(), what, err)
		}
		r.before = st
	}
	r.start = time.Now()
	err := do(ctx)
	r.ready = time.Now()
	if err != nil {
		return r, fmt.Errorf("MAC %s: %w", r.oldMAC, err)
	}
	r.newMAC = v.MAC()
	return r, nil
}

// warmGateway has the gateway resolve the guest, so that its entry is
// REACHABLE and just confirmed, with the guest's current MAC.
// The guest may be one an earlier spec re-created and left the gateway
// probing for at its old MAC (ARP-02): the gateway then reaches it only
// once that entry has failed and it resolves the address afresh, within
// its DELAY and PROBE times, so it tries for warmFor.
func warmGateway(ctx context.Context, gw platform.Gateway, v *vm) (evidence.Neighbor, error) {
	deadline := time.Now().Add(warmFor)
	for {
		res, err := gw.Ping(ctx, v.addr, probe.WithCount(1), probe.WithTimeout(2*time.Second))
		if err != nil {
			return evidence.Neighbor{}, err
		}
		if res.Succeeded() {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return evidence.Neighbor{}, fmt.Errorf("the gateway does not reach %s (%s) before re-creation (tried for %s)", v.Name(), v.addr, warmFor)
		}
	}
	n, err := gw.Neighbor(ctx, v.addr)
	if err != nil {
		return n, err
	}
	if !bytes.Equal(n.MAC, v.MAC()) {
		return n, fmt.Errorf("before re-creation the gateway's entry for %s holds %s, not the guest's MAC %s", v.addr, n.MAC, v.MAC())
	}
	return n, nil
}

// recovery is the gateway pinging a guest whose MAC changed under it,
// from its first echo request until the first reply, its entry for the
// guest watched: how ARP-03 times the outage after a re-creation, and
// ARP-07 after each restart.
type recovery struct {
	streamed  time.Time // the stream's first echo request (t = 0)
	first     probe.Probe
	recovered bool // a reply came back within the limit
	probes    []probe.Probe
	changes   []neighChange
	after     evidence.Neighbor // the gateway's entry at the end
}

// timeRecovery has the gateway ping addr every streamEvery, its entry
// sampled every watchEvery, until the first reply or limit.
func timeRecovery(ctx context.Context, gw platform.Gateway, addr netip.Addr, limit time.Duration) (recovery, error) {
	stream, err := gw.StartPing(ctx, addr, streamEvery)
	if err != nil {
		return recovery{}, err
	}
	r := recovery{streamed: time.Now()}
	watch := watchNeighbor(gw, addr, watchEvery)
	r.first, r.recovered = awaitReply(ctx, stream, r.streamed, limit)
	r.probes, r.changes = stream.Stop(), watch.Stop()
	r.after, err = gw.Neighbor(ctx, addr)
	return r, err
}

// awaitReply waits until a reply of the stream comes back after t, at
// most until t+limit.
func awaitReply(ctx context.Context, s probe.PingStream, t time.Time, limit time.Duration) (probe.Probe, bool) {
	deadline := t.Add(limit)
	for {
		if p, ok := firstReplyAfter(s.Probes(), t); ok {
			return p, true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return probe.Probe{}, false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// awaitEntry waits until the gateway's entry for ip holds mac, at most
// limit; it returns when it saw it and the last entry read.
func awaitEntry(ctx context.Context, gw platform.Gateway, ip netip.Addr, mac net.HardwareAddr, limit time.Duration) (time.Time, evidence.Neighbor, error) {
	deadline := time.Now().Add(limit)
	for {
		n, err := gw.Neighbor(ctx, ip)
		at := time.Now()
		if err != nil {
			return time.Time{}, n, err
		}
		if bytes.Equal(n.MAC, mac) {
			return at, n, nil
		}
		if at.After(deadline) || ctx.Err() != nil {
			return time.Time{}, n, errNotSeen
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var errNotSeen = errors.New("not seen in time")

// garpSeen is when the first gratuitous ARP for ip from mac (sender and
// target address both ip) crossed the capture, from since on.
func garpSeen(frames evidence.Frames, ip netip.Addr, mac net.HardwareAddr, since time.Time) (time.Time, bool) {
	for _, fr := range frames {
		a := fr.ARP
		if a != nil && !fr.Time.Before(since) && a.SenderIP == ip && a.TargetIP == ip && bytes.Equal(a.SenderMAC, mac) {
			return fr.Time, true
		}
	}
	return time.Time{}, false
}

// isLocalUnicast: the I/G bit clear (unicast), the U/L bit set (locally
// administered), as the kernel's random MACs and KubeMacPool's pool are.
func isLocalUnicast(mac net.HardwareAddr) bool {
	return len(mac) == 6 && mac[0]&0x01 == 0 && mac[0]&0x02 != 0
}
