package arp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"

	"github.com/cozystack/vlan-conformance/framework/platform"
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
// whose recovery ARP-03 times next.
type vm struct {
	*framework.VM
	addr   netip.Addr
	last   *recreation
	outage *recreation
}

// guests are the container's VMs, each at the tenant's next address in
// this order. ARP-01..04 share one VM: ARP-02 and ARP-04 each re-create
// it, and each that re-creates it first has the gateway resolve the guest
// afresh (warmGateway), so none reads what an earlier one left in the
// gateway; ARP-03 times the recovery of ARP-02's outage, ARP-01 observes
// ARP-04's re-creation (each re-creating it alone when run alone); a TCG
// boot is two minutes saved per spec.
// ARP-05 pins a MAC, and ARP-06's two share one, so they have their own.
// The VMs alternate between the bridge nodes, so that those started
// together fit (each asks for the 4 GiB of vm-instance's default
// instancetype); ARP-06's two stand on different nodes, so that their
// collision spans the trunk.
var guests = []struct {
	claims    []string
	name, mac string
	node      int // index into the bridge nodes, modulo their count
}{
	{[]string{"ARP-01", "ARP-02", "ARP-03", "ARP-04"}, "vm-arp", "", 0},
	{[]string{"ARP-05"}, "vm-arp05", pinnedMAC, 1},
	{[]string{"ARP-06"}, "vm-arp06a", sharedMAC, 0},
	{[]string{"ARP-06"}, "vm-arp06b", sharedMAC, 1},
}

// fleet is the container's VMs as started, by name, with why any did not;
// later are those still starting in the background; pinned ARP-05's
// re-creation when it runs beside vm-arp's (pinned.go).
type fleet struct {
	vms    map[string]*vm
	err    error
	later  *framework.Behind
	pinned *beside
}

// pinnedBeside tells whether ARP-05 re-creates its VM in the background,
// beside the first re-creation of vm-arp: both are selected.
func pinnedBeside() bool {
	return labels.Selected(labels.ARP, labels.Claim("ARP-05")) &&
		slices.ContainsFunc(guests[0].claims, func(c string) bool { return c != "ARP-01" && labels.Selected(labels.ARP, labels.Claim(c)) })
}

// startFleet starts the guests of the specs the run selects, as
// vm-instance renders them with the guide's cloud-init (and a pinned MAC
// where the spec pins one). The first selected spec's guests start now,
// side by side where the platform allows (framework.StartVMs), with
// ARP-05's when it re-creates it beside them (pinnedBeside); the others'
// boot behind the specs that run first (framework.StartVMsBehind).
func startFleet(ctx context.Context, f *framework.Framework, nodes []platform.Node) *fleet {
	var now, later []platform.VMSpec
	var first []string
	for _, g := range guests {
		if !slices.ContainsFunc(g.claims, func(c string) bool { return labels.Selected(labels.ARP, labels.Claim(c)) }) {
			continue
		}
		spec := platform.VMSpec{Name: g.name, Node: nodes[g.node%len(nodes)], Networks: []string{nad}, MAC: g.mac}
		if first == nil {
			first = g.claims
		}
		if slices.Equal(g.claims, first) || slices.Contains(g.claims, "ARP-05") && pinnedBeside() {
			now = append(now, spec)
		} else {
			later = append(later, spec)
		}
		if s := f.Config().Subject(); s != nil && s.IaaS != nil && g.mac != "" {
			f.Note("%s is the suite's own VirtualMachine, not the release's vm-instance render: that chart exposes no way to pin a MAC (%s pinned here)", g.name, g.mac)
		}
	}
	fl := &fleet{vms: map[string]*vm{}}
	if len(later) > 0 {
		fl.later = f.StartVMsBehind(ctx, later...)
	}
	started, err := f.StartVMs(ctx, now...)
	fl.add(started, err)
	return fl
}

func (fl *fleet) add(started []*framework.VM, err error) {
	fl.err = errors.Join(fl.err, err)
	for _, v := range started {
		if v != nil {
			fl.vms[v.Name()] = &vm{VM: v, addr: v.Addr.Addr()}
		}
	}
}

// take is the started VM of that name, once it is up.
func (fl *fleet) take(ctx context.Context, name string) (*vm, error) {
	if _, ok := fl.vms[name]; !ok && fl.later != nil {
		started, err := fl.later.Wait(ctx)
		if ctx.Err() != nil {
			return nil, err
		}
		fl.add(started, err)
		fl.later = nil
	}
	if v, ok := fl.vms[name]; ok {
		if v.Guest == nil {
			return nil, fmt.Errorf("%s is gone: an earlier spec's re-creation of it failed", name)
		}
		return v, nil
	}
	if fl.err != nil {
		return nil, fmt.Errorf("%s did not start: %w", name, fl.err)
	}
	return nil, fmt.Errorf("%s was not started: the run's label filter %q did not select its spec when the container began", name, GinkgoLabelFilter())
}

// warmed is the started VM of that name, the gateway made to resolve it
// (warmGateway): the start of every spec that re-creates a VM the gateway
// already knows. A gateway that cannot ping gives evidence.ErrNotObservable.
func (fl *fleet) warmed(ctx context.Context, gw platform.Gateway, name string) (*vm, error) {
	v, err := fl.take(ctx, name)
	if err != nil {
		return nil, err
	}
	if _, err := warmGateway(ctx, gw, v); err != nil {
		return nil, err
	}
	return v, nil
}

// recreation is one delete-and-create of a VM, timed.
type recreation struct {
	start, ready   time.Time // before the delete; once the new guest is up
	oldMAC, newMAC net.HardwareAddr
	before         platform.VMStatus // the VM object before it, where the platform has one (platform.KubeVMs)
	by             string            // the spec that made it
	// What ARP-02 saw of it, for ARP-03 to time the recovery of the same
	// outage: the gateway's entry warmed before it and read when the VM
	// was up, and when the gateway first sent to the re-created guest.
	warmed, atReady platform.Neighbor
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
// user deleting and re-applying the VM object does.
func (v *vm) recreate(ctx context.Context, p platform.Platform) (*recreation, error) {
	r := &recreation{oldMAC: v.MAC(), by: CurrentSpecReport().LeafNodeText}
	if k, ok := platform.As[platform.KubeVMs](p); ok {
		st, err := k.VMStatus(ctx, v)
		if err != nil {
			return r, fmt.Errorf("%s before re-creation: %w", v.Name(), err)
		}
		r.before = st
	}
	r.start = time.Now()
	err := v.Recreate(ctx)
	r.ready = time.Now()
	if err != nil {
		return r, fmt.Errorf("MAC %s: %w", r.oldMAC, err)
	}
	r.newMAC = v.MAC()
	v.last, v.outage = r, nil
	return r, nil
}

// warmGateway has the gateway resolve the guest, so that its entry is
// REACHABLE and just confirmed, with the guest's current MAC.
// The guest may be one an earlier spec re-created and left the gateway
// probing for at its old MAC (ARP-02): the gateway then reaches it only
// once that entry has failed and it resolves the address afresh, within
// its DELAY and PROBE times, so it tries for warmFor.
func warmGateway(ctx context.Context, gw platform.Gateway, v *vm) (platform.Neighbor, error) {
	deadline := time.Now().Add(warmFor)
	for {
		res, err := gw.Ping(ctx, v.addr, platform.WithCount(1), platform.WithTimeout(2*time.Second))
		if err != nil {
			return platform.Neighbor{}, err
		}
		if res.Succeeded() {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return platform.Neighbor{}, fmt.Errorf("the gateway does not reach %s (%s) before re-creation (tried for %s)", v.Name(), v.addr, warmFor)
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

// awaitReply waits until a reply of the stream comes back after t, at
// most until t+limit.
func awaitReply(ctx context.Context, s platform.PingStream, t time.Time, limit time.Duration) (platform.Probe, bool) {
	deadline := t.Add(limit)
	for {
		if p, ok := firstReplyAfter(s.Probes(), t); ok {
			return p, true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return platform.Probe{}, false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// awaitEntry waits until the gateway's entry for ip holds mac, at most
// limit; it returns when it saw it and the last entry read.
func awaitEntry(ctx context.Context, gw platform.Gateway, ip netip.Addr, mac net.HardwareAddr, limit time.Duration) (time.Time, platform.Neighbor, error) {
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

// isLocalUnicast: the I/G bit clear (unicast), the U/L bit set (locally
// administered), as the kernel's random MACs and KubeMacPool's pool are.
func isLocalUnicast(mac net.HardwareAddr) bool {
	return len(mac) == 6 && mac[0]&0x01 == 0 && mac[0]&0x02 != 0
}
