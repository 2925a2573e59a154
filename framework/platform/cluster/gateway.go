package cluster

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/nsexec"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/probe"
)

// gateway is the upstream router of a kind cluster: the fabric's gateway
// netns on the host, the same as the lab's.
type gateway struct {
	ns                *fabric.Namespace
	addr, otherAddr   netip.Addr
	iface, otherIface string
	profile           string
}

// neighProfiles: the gateway's neighbour timers by --arp-profile (the lab's
// two profiles; kept equal to framework/platform/lab's).
var neighProfiles = map[string]map[string]string{
	"default": {"base_reachable_time_ms": "30000", "delay_first_probe_time": "5", "retrans_time_ms": "1000", "ucast_solicit": "3", "mcast_solicit": "3", "mcast_resolicit": "0", "app_solicit": "0", "gc_stale_time": "60"},
	"tuned":   {"base_reachable_time_ms": "2000", "delay_first_probe_time": "1", "retrans_time_ms": "1000", "ucast_solicit": "3", "mcast_solicit": "3", "mcast_resolicit": "0", "app_solicit": "0", "gc_stale_time": "60"},
}

func (g *gateway) sysctl(k string) string {
	return filepath.Join("/proc/sys/net/ipv4/neigh", g.iface, k)
}

func (g *gateway) setTimers(profile string) error {
	g.profile = profile
	return nsexec.Do(g.ns.Path, func() error {
		for k, v := range neighProfiles[profile] {
			if err := os.WriteFile(g.sysctl(k), []byte(v), 0o644); err != nil {
				return fmt.Errorf("gateway neigh %s: %w", k, err)
			}
		}
		return nil
	})
}

func (g *gateway) Address() netip.Addr          { return g.addr }
func (g *gateway) OtherVLANAddress() netip.Addr { return g.otherAddr }
func (g *gateway) OtherVLANPoint() evidence.Point {
	return evidence.Point{Netns: g.ns.Path, Iface: g.otherIface, Label: "gateway " + g.otherIface}
}

func (g *gateway) Ping(ctx context.Context, dst netip.Addr, opts ...platform.PingOption) (platform.PingResult, error) {
	return probe.Ping(ctx, g.ns.Path, dst, opts...)
}

func (g *gateway) StartPing(_ context.Context, dst netip.Addr, interval time.Duration) (platform.PingStream, error) {
	return probe.StartStream(g.ns.Path, dst, interval, 2*time.Second)
}

func (g *gateway) Neighbor(_ context.Context, ip netip.Addr) (platform.Neighbor, error) {
	h := g.ns.Handle
	l, err := h.LinkByName(g.iface)
	if err != nil {
		return platform.Neighbor{}, err
	}
	list, err := h.NeighList(l.Attrs().Index, netlink.FAMILY_V4)
	if err != nil {
		return platform.Neighbor{}, err
	}
	for _, n := range list {
		if a, ok := netip.AddrFromSlice(n.IP); ok && a.Unmap() == ip {
			return platform.Neighbor{IP: ip, MAC: n.HardwareAddr, State: neighState(n.State)}, nil
		}
	}
	return platform.Neighbor{IP: ip}, nil
}

func neighState(s int) string {
	for _, st := range []struct {
		bit  int
		name string
	}{{netlink.NUD_REACHABLE, "REACHABLE"}, {netlink.NUD_STALE, "STALE"}, {netlink.NUD_DELAY, "DELAY"}, {netlink.NUD_PROBE, "PROBE"},
		{netlink.NUD_FAILED, "FAILED"}, {netlink.NUD_INCOMPLETE, "INCOMPLETE"}, {netlink.NUD_PERMANENT, "PERMANENT"}, {netlink.NUD_NOARP, "NOARP"}} {
		if s&st.bit != 0 {
			return st.name
		}
	}
	return fmt.Sprintf("0x%x", s)
}

func timersOf(get func(string) (int, error)) (platform.NeighTimers, error) {
	v := map[string]int{}
	for _, k := range []string{"base_reachable_time_ms", "delay_first_probe_time", "retrans_time_ms", "ucast_solicit", "gc_stale_time", "mcast_solicit", "mcast_resolicit"} {
		n, err := get(k)
		if err != nil {
			return platform.NeighTimers{}, err
		}
		v[k] = n
	}
	return platform.NeighTimers{
		BaseReachable: time.Duration(v["base_reachable_time_ms"]) * time.Millisecond, DelayFirstProbe: time.Duration(v["delay_first_probe_time"]) * time.Second,
		RetransTime: time.Duration(v["retrans_time_ms"]) * time.Millisecond, UcastSolicit: v["ucast_solicit"], GCStaleTime: time.Duration(v["gc_stale_time"]) * time.Second,
		McastSolicit: v["mcast_solicit"], McastResolicit: v["mcast_resolicit"],
	}, nil
}

func (g *gateway) NeighTimers(_ context.Context) (platform.NeighTimers, error) {
	var t platform.NeighTimers
	err := nsexec.Do(g.ns.Path, func() error {
		var err error
		t, err = timersOf(func(k string) (int, error) {
			b, err := os.ReadFile(g.sysctl(k))
			if err != nil {
				return 0, err
			}
			return strconv.Atoi(strings.TrimSpace(string(b)))
		})
		return err
	})
	return t, err
}

func (g *gateway) NeighProfile(_ context.Context) (platform.NeighProfile, error) {
	vals, ok := neighProfiles[g.profile]
	if !ok {
		return platform.NeighProfile{}, fmt.Errorf("no neighbour timer profile %q", g.profile)
	}
	t, err := timersOf(func(k string) (int, error) { return strconv.Atoi(vals[k]) })
	return platform.NeighProfile{Name: g.profile, Timers: t, Source: "--arp-profile=" + g.profile + ", written into the kind cluster's gateway netns"}, err
}

// vendorGateway is an existing cluster's gateway (--gateway): the suite
// can address it but not observe it.
type vendorGateway struct{ addr netip.Addr }

func (v vendorGateway) Address() netip.Addr            { return v.addr }
func (v vendorGateway) OtherVLANAddress() netip.Addr   { return netip.Addr{} }
func (v vendorGateway) OtherVLANPoint() evidence.Point { return evidence.Point{} }
func (v vendorGateway) Ping(context.Context, netip.Addr, ...platform.PingOption) (platform.PingResult, error) {
	return platform.PingResult{}, fmt.Errorf("ping from the vendor's gateway: %w", platform.ErrNotObservable)
}
func (v vendorGateway) StartPing(context.Context, netip.Addr, time.Duration) (platform.PingStream, error) {
	return nil, fmt.Errorf("ping from the vendor's gateway: %w", platform.ErrNotObservable)
}
func (v vendorGateway) Neighbor(context.Context, netip.Addr) (platform.Neighbor, error) {
	return platform.Neighbor{}, fmt.Errorf("the vendor gateway's neighbour table: %w", platform.ErrNotObservable)
}
func (v vendorGateway) NeighTimers(context.Context) (platform.NeighTimers, error) {
	return platform.NeighTimers{}, fmt.Errorf("the vendor gateway's timers: %w", platform.ErrNotObservable)
}
func (v vendorGateway) NeighProfile(context.Context) (platform.NeighProfile, error) {
	return platform.NeighProfile{}, fmt.Errorf("the vendor gateway's timers: %w", platform.ErrNotObservable)
}
