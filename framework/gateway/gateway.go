// Package gateway is the VLAN's upstream router as the suite sees it: a
// router in the fabric's gateway namespace (the lab's, and a kind cluster's,
// on the host) whose neighbour timers are part of the fixture, or a
// vendor's real gateway, which can be addressed but not observed.
package gateway

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/nsexec"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/probe"
)

// Netns is the upstream router in the gateway netns, on trunk.<vlan> and
// trunk.<other vlan>.
type Netns struct {
	ns                *fabric.Namespace
	addr, otherAddr   netip.Addr
	iface, otherIface string
	profile           string // the declared neighbour timer profile
	role              string // "gateway", or "standby router"
	standby           *Netns // the standby router beside it, when the fabric has one
}

// New is the router of a fabric, with the declared neighbour profile
// written into its sysctls; actual, if not nil, maps the declared timers to
// what the router really runs (a negative control's slower gateway).
func New(f *fabric.Fabric, profile string, actual func(declared map[string]string) map[string]string) (*Netns, error) {
	g := &Netns{
		ns: f.Gateway, addr: f.Spec.Gateway.Addr(), otherAddr: f.Spec.OtherGateway.Addr(),
		iface: f.GatewayIface(), otherIface: f.OtherGatewayIface(), role: "gateway",
	}
	if f.Standby != nil {
		// The same declared timers: what ARP-04 reads of it is the
		// gateway's kind of entry, not another kernel's defaults.
		g.standby = &Netns{ns: f.Standby, addr: f.Spec.Standby.Addr(), iface: f.StandbyIface(), role: "standby router"}
		if err := g.standby.setTimers(profile, actual); err != nil {
			return nil, fmt.Errorf("standby: %w", err)
		}
	}
	return g, g.setTimers(profile, actual)
}

// Standby is the standby router beside the gateway on the VLAN, nil when
// the fabric has none (platform.Standby).
func (g *Netns) Standby() platform.Gateway {
	if g.standby == nil {
		return nil
	}
	return g.standby
}

func (g *Netns) Address() netip.Addr          { return g.addr }
func (g *Netns) OtherVLANAddress() netip.Addr { return g.otherAddr }
func (g *Netns) VLANPoint() evidence.Point {
	return evidence.Point{Netns: g.ns.Path, Iface: g.iface, Label: g.role + " " + g.iface}
}
func (g *Netns) OtherVLANPoint() evidence.Point {
	return evidence.Point{Netns: g.ns.Path, Iface: g.otherIface, Label: g.role + " " + g.otherIface}
}

func (g *Netns) Ping(ctx context.Context, dst netip.Addr, opts ...probe.PingOption) (probe.PingResult, error) {
	return probe.Ping(ctx, g.ns.Path, dst, opts...)
}

// Probe asks for ip with a broadcast ARP request from the gateway's VLAN
// address, as a gateway resolving an address does; the kernel takes the
// answer into its entry (a reply overrides it once the entry's locktime,
// 1 s, has passed).
func (g *Netns) Probe(ip netip.Addr, timeout time.Duration) error {
	_, err := probe.ARPProbe(g.ns.Path, g.iface, g.addr, ip, timeout)
	return err
}

func (g *Netns) Neighbor(_ context.Context, ip netip.Addr) (evidence.Neighbor, error) {
	return evidence.ReadNeighbor(g.ns.Handle, g.iface, ip)
}

// neighProfiles are the gateway's neighbour timers, part of the fixture:
// the kernel's documented defaults (Documentation/networking/ip-sysctl.rst,
// net.ipv4.neigh.*), and a tuned profile that keeps the ARP suite short.
// Every key the recovery bound depends on is written, none is inherited.
var neighProfiles = map[string]map[string]string{
	"default": {"base_reachable_time_ms": "30000", "delay_first_probe_time": "5", "retrans_time_ms": "1000", "ucast_solicit": "3", "mcast_solicit": "3", "mcast_resolicit": "0", "app_solicit": "0", "gc_stale_time": "60"},
	"tuned":   {"base_reachable_time_ms": "2000", "delay_first_probe_time": "1", "retrans_time_ms": "1000", "ucast_solicit": "3", "mcast_solicit": "3", "mcast_resolicit": "0", "app_solicit": "0", "gc_stale_time": "60"},
}

var neighProfileSource = map[string]string{
	"default": "the kernel's documented defaults (ip-sysctl.rst, net.ipv4.neigh.*)",
	"tuned":   "the lab's tuned profile (--arp-profile=tuned): base_reachable_time_ms and delay_first_probe_time shortened",
}

// IgnorePings makes the gateway answer no echo request, as a router
// whose control plane drops ICMP would (a negative control of VLAN-01's
// line of where its frames stopped). Its netns goes with it.
func (g *Netns) IgnorePings() error {
	if err := fabric.NetSysctl(g.ns.Path, "ipv4/icmp_echo_ignore_all", "1"); err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	return nil
}

func (g *Netns) sysctlDir() string { return filepath.Join("/proc/sys/net/ipv4/neigh", g.iface) }

// setTimers declares the profile and writes into the gateway's neighbour
// sysctls the timers it runs: the profile itself, or what a negative
// control puts in its place.
func (g *Netns) setTimers(profile string, actual func(map[string]string) map[string]string) error {
	g.profile = profile
	vals, ok := neighProfiles[profile]
	if !ok {
		return fmt.Errorf("no neighbour timer profile %q", profile)
	}
	if actual != nil {
		vals = actual(vals)
	}
	return nsexec.Do(g.ns.Path, func() error {
		for k, v := range vals {
			if err := os.WriteFile(filepath.Join(g.sysctlDir(), k), []byte(v), 0o644); err != nil {
				return fmt.Errorf("gateway neigh %s: %w", k, err)
			}
		}
		return nil
	})
}

func (g *Netns) NeighProfile(_ context.Context) (evidence.NeighProfile, error) {
	vals, ok := neighProfiles[g.profile]
	if !ok {
		return evidence.NeighProfile{}, fmt.Errorf("no neighbour timer profile %q", g.profile)
	}
	t, err := timersFrom(func(k string) (int, error) { return strconv.Atoi(vals[k]) })
	return evidence.NeighProfile{Name: g.profile, Timers: t, Source: neighProfileSource[g.profile]}, err
}

func (g *Netns) NeighTimers(_ context.Context) (evidence.NeighTimers, error) {
	var t evidence.NeighTimers
	err := nsexec.Do(g.ns.Path, func() error {
		var err error
		t, err = timersFrom(func(k string) (int, error) {
			b, err := os.ReadFile(filepath.Join(g.sysctlDir(), k))
			if err != nil {
				return 0, err
			}
			return strconv.Atoi(strings.TrimSpace(string(b)))
		})
		if err != nil {
			return err
		}
		t.ReachableTime, err = reachableTime(g.iface)
		return err
	})
	return t, err
}

func timersFrom(read func(key string) (int, error)) (evidence.NeighTimers, error) {
	vals := map[string]int{}
	for _, k := range []string{"base_reachable_time_ms", "delay_first_probe_time", "retrans_time_ms", "ucast_solicit", "mcast_solicit", "mcast_resolicit", "gc_stale_time"} {
		v, err := read(k)
		if err != nil {
			return evidence.NeighTimers{}, fmt.Errorf("neigh %s: %w", k, err)
		}
		vals[k] = v
	}
	return evidence.NeighTimers{
		BaseReachable:   time.Duration(vals["base_reachable_time_ms"]) * time.Millisecond,
		DelayFirstProbe: time.Duration(vals["delay_first_probe_time"]) * time.Second,
		RetransTime:     time.Duration(vals["retrans_time_ms"]) * time.Millisecond,
		UcastSolicit:    vals["ucast_solicit"],
		McastSolicit:    vals["mcast_solicit"],
		McastResolicit:  vals["mcast_resolicit"],
		GCStaleTime:     time.Duration(vals["gc_stale_time"]) * time.Second,
	}, nil
}

func (g *Netns) StartPing(_ context.Context, dst netip.Addr, interval time.Duration) (probe.PingStream, error) {
	return probe.StartStream(g.ns.Path, dst, interval, streamLinger)
}

// streamLinger is how long a stopped stream waits for its last replies.
const streamLinger = 500 * time.Millisecond

// Vendor is a real gateway the suite cannot drive: observations from its
// side are not available.
type Vendor struct{ Addr netip.Addr }

func (v Vendor) Address() netip.Addr            { return v.Addr }
func (v Vendor) OtherVLANAddress() netip.Addr   { return netip.Addr{} }
func (v Vendor) VLANPoint() evidence.Point      { return evidence.Point{} }
func (v Vendor) OtherVLANPoint() evidence.Point { return evidence.Point{} }
func (v Vendor) Ping(context.Context, netip.Addr, ...probe.PingOption) (probe.PingResult, error) {
	return probe.PingResult{}, fmt.Errorf("ping from the vendor's gateway: %w", evidence.ErrNotObservable)
}
func (v Vendor) Neighbor(context.Context, netip.Addr) (evidence.Neighbor, error) {
	return evidence.Neighbor{}, fmt.Errorf("the vendor gateway's neighbour table: %w", evidence.ErrNotObservable)
}
func (v Vendor) NeighTimers(context.Context) (evidence.NeighTimers, error) {
	return evidence.NeighTimers{}, fmt.Errorf("the vendor gateway's timers: %w", evidence.ErrNotObservable)
}
func (v Vendor) NeighProfile(context.Context) (evidence.NeighProfile, error) {
	return evidence.NeighProfile{}, fmt.Errorf("the vendor gateway's timers are not the suite's to declare: %w", evidence.ErrNotObservable)
}
func (v Vendor) StartPing(context.Context, netip.Addr, time.Duration) (probe.PingStream, error) {
	return nil, fmt.Errorf("ping from the vendor's gateway: %w", evidence.ErrNotObservable)
}

// reachableTime asks the neighbour table (RTM_GETNEIGHTBL, as `ip ntable`
// does) for the REACHABLE lifetime the kernel drew for iface: it is
// re-drawn from [base/2, 3*base/2) when base_reachable_time_ms is written
// and every 300 s, and no sysctl shows it. The calling thread must be in
// the interface's namespace.
func reachableTime(iface string) (time.Duration, error) {
	l, err := netlink.LinkByName(iface)
	if err != nil {
		return 0, err
	}
	req := nl.NewNetlinkRequest(unix.RTM_GETNEIGHTBL, unix.NLM_F_DUMP)
	req.AddData(ndtmsg{family: unix.AF_INET})
	msgs, err := req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWNEIGHTBL)
	if err != nil {
		return 0, fmt.Errorf("neighbour table dump: %w", err)
	}
	for _, m := range msgs {
		if len(m) < ndtmsgLen {
			continue
		}
		attrs, err := nl.ParseRouteAttr(m[ndtmsgLen:])
		if err != nil {
			return 0, err
		}
		for _, a := range attrs {
			if a.Attr.Type != ndtaParms {
				continue
			}
			parms, err := nl.ParseRouteAttr(a.Value)
			if err != nil {
				return 0, err
			}
			var ifindex int
			var reach time.Duration
			for _, p := range parms {
				switch {
				case p.Attr.Type == ndtpaIfindex && len(p.Value) >= 4:
					ifindex = int(binary.NativeEndian.Uint32(p.Value))
				case p.Attr.Type == ndtpaReachableTime && len(p.Value) >= 8:
					reach = time.Duration(binary.NativeEndian.Uint64(p.Value)) * time.Millisecond
				}
			}
			if ifindex == l.Attrs().Index {
				return reach, nil
			}
		}
	}
	return 0, fmt.Errorf("the ARP table has no parameters for %s", iface)
}

// From linux/neighbour.h.
const (
	ndtmsgLen          = 4 // struct ndtmsg: family, 3 bytes of padding
	ndtaParms          = 6 // NDTA_PARMS
	ndtpaIfindex       = 1 // NDTPA_IFINDEX
	ndtpaReachableTime = 3 // NDTPA_REACHABLE_TIME, u64 ms
)

type ndtmsg struct{ family uint8 }

func (m ndtmsg) Len() int          { return ndtmsgLen }
func (m ndtmsg) Serialize() []byte { return []byte{m.family, 0, 0, 0} }

// ProbeUntilLearned is the gateway of ARP-03's control whose gateway
// resolves the booting guest (controls.GatewayResolves): it probes a
// booting guest's address until an entry it holds has the guest's MAC.
// The kernel ignores a reply that changes an entry's MAC within its
// locktime (1 s) of the entry's last update, and the old entry turns
// STALE (an update) at a moment a re-creation does not control: a
// boot leaves room for a probe past it, so probes repeat, each past the
// locktime of the last.
func (g *Netns) ProbeUntilLearned(ctx context.Context, addr netip.Addr, mac net.HardwareAddr) error {
	var last evidence.Neighbor
	for range 5 {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(1100 * time.Millisecond):
		}
		if err := g.Probe(addr, time.Second); err != nil {
			return fmt.Errorf("the gateway's probe during the boot: %w", err)
		}
		n, err := g.Neighbor(ctx, addr)
		if err != nil {
			return err
		}
		// No entry: a first boot, nothing the gateway held to relearn (an
		// unsolicited reply makes no entry).
		if last = n; n.State == "" || bytes.Equal(n.MAC, mac) {
			return nil
		}
	}
	return fmt.Errorf("the gateway's probes during the boot: its entry for %s holds %s %s, not the guest's %s", addr, last.State, last.MAC, mac)
}
