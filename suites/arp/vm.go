package arp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/suites/framework"
)

// nad is the bridge-type NAD every ARP guest is attached to.
const nad = "vlan100"

// vm is a VM the spec re-creates: Guest is always the current incarnation.
type vm struct {
	*framework.VM
	addr netip.Addr
}

// startVM starts a VM on node as vm-instance renders it, with the guide's
// cloud-init at the tenant's next address (and a pinned MAC if mac != "").
func startVM(ctx context.Context, f *framework.Framework, name string, node platform.Node, mac string) (*vm, error) {
	v, err := f.StartVM(ctx, platform.VMSpec{Name: name, Node: node, Networks: []string{nad}, MAC: mac})
	if err != nil {
		return nil, err
	}
	if s := f.Config().Subject(); s != nil && s.IaaS != nil && mac != "" {
		f.Note("%s is the suite's own VirtualMachine, not the release's vm-instance render: that chart exposes no way to pin a MAC (%s pinned here)", v.Name(), mac)
	}
	return &vm{VM: v, addr: v.Addr.Addr()}, nil
}

// startWarmed starts a VM (startVM) and has the gateway resolve it
// (warmGateway): the start of every spec that re-creates a VM the gateway
// already knows. A gateway that cannot ping gives evidence.ErrNotObservable.
func startWarmed(ctx context.Context, f *framework.Framework, gw platform.Gateway, name string, node platform.Node, mac string) (*vm, error) {
	v, err := startVM(ctx, f, name, node, mac)
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
}

func (r recreation) took() time.Duration { return r.ready.Sub(r.start) }

// recreate deletes the VM and creates it again from the same spec, as a
// user deleting and re-applying the VM object does.
func (v *vm) recreate(ctx context.Context) (recreation, error) {
	r := recreation{oldMAC: v.MAC(), start: time.Now()}
	err := v.Recreate(ctx)
	r.ready = time.Now()
	if err != nil {
		return r, fmt.Errorf("MAC %s: %w", r.oldMAC, err)
	}
	r.newMAC = v.MAC()
	return r, nil
}

// warmGateway has the gateway resolve the guest, so that its entry is
// REACHABLE and just confirmed, with the guest's current MAC.
func warmGateway(ctx context.Context, gw platform.Gateway, v *vm) (platform.Neighbor, error) {
	res, err := gw.Ping(ctx, v.addr, platform.WithCount(1), platform.WithTimeout(2*time.Second))
	if err != nil {
		return platform.Neighbor{}, err
	}
	if !res.Succeeded() {
		return platform.Neighbor{}, fmt.Errorf("the gateway does not reach %s (%s) before re-creation", v.Name(), v.addr)
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
