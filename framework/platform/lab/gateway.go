package lab

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

// labGateway is the upstream router in the gateway netns.
type labGateway struct {
	ns                *fabric.Namespace
	addr, otherAddr   netip.Addr
	iface, otherIface string
}

func (g *labGateway) Address() netip.Addr          { return g.addr }
func (g *labGateway) OtherVLANAddress() netip.Addr { return g.otherAddr }
func (g *labGateway) OtherVLANPoint() evidence.Point {
	return evidence.Point{Netns: g.ns.Path, Iface: g.otherIface, Label: "gateway " + g.otherIface}
}

func (g *labGateway) Ping(ctx context.Context, dst netip.Addr, opts ...platform.PingOption) (platform.PingResult, error) {
	return probe.Ping(ctx, g.ns.Path, dst, opts...)
}

func (g *labGateway) Neighbor(_ context.Context, ip netip.Addr) (platform.Neighbor, error) {
	return neighbor(g.ns.Handle, g.iface, ip)
}

// neighProfiles are the gateway's neighbour timers: the kernel's documented
// defaults, and a tuned profile that keeps the ARP suite short.
var neighProfiles = map[string]map[string]string{
	"default": {"base_reachable_time_ms": "30000", "delay_first_probe_time": "5", "retrans_time_ms": "1000", "ucast_solicit": "3", "mcast_solicit": "3", "gc_stale_time": "60"},
	"tuned":   {"base_reachable_time_ms": "2000", "delay_first_probe_time": "1", "retrans_time_ms": "1000", "ucast_solicit": "3", "mcast_solicit": "3", "gc_stale_time": "60"},
}

func (g *labGateway) sysctlDir() string { return filepath.Join("/proc/sys/net/ipv4/neigh", g.iface) }

// setTimers writes the profile into the gateway's neighbour sysctls.
func (g *labGateway) setTimers(profile string) error {
	return nsexec.Do(g.ns.Path, func() error {
		for k, v := range neighProfiles[profile] {
			if err := os.WriteFile(filepath.Join(g.sysctlDir(), k), []byte(v), 0o644); err != nil {
				return fmt.Errorf("gateway neigh %s: %w", k, err)
			}
		}
		return nil
	})
}

func (g *labGateway) NeighTimers(_ context.Context) (platform.NeighTimers, error) {
	var t platform.NeighTimers
	err := nsexec.Do(g.ns.Path, func() error {
		read := func(k string) (int, error) {
			b, err := os.ReadFile(filepath.Join(g.sysctlDir(), k))
			if err != nil {
				return 0, err
			}
			return strconv.Atoi(strings.TrimSpace(string(b)))
		}
		vals := map[string]int{}
		for _, k := range []string{"base_reachable_time_ms", "delay_first_probe_time", "retrans_time_ms", "ucast_solicit", "gc_stale_time"} {
			v, err := read(k)
			if err != nil {
				return err
			}
			vals[k] = v
		}
		t = platform.NeighTimers{
			BaseReachable:   time.Duration(vals["base_reachable_time_ms"]) * time.Millisecond,
			DelayFirstProbe: time.Duration(vals["delay_first_probe_time"]) * time.Second,
			RetransTime:     time.Duration(vals["retrans_time_ms"]) * time.Millisecond,
			UcastSolicit:    vals["ucast_solicit"],
			GCStaleTime:     time.Duration(vals["gc_stale_time"]) * time.Second,
		}
		return nil
	})
	return t, err
}

// vendorGateway is a real gateway the suite cannot drive: observations
// from its side are not available.
type vendorGateway struct{ addr netip.Addr }

func (v vendorGateway) Address() netip.Addr            { return v.addr }
func (v vendorGateway) OtherVLANAddress() netip.Addr   { return netip.Addr{} }
func (v vendorGateway) OtherVLANPoint() evidence.Point { return evidence.Point{} }
func (v vendorGateway) Ping(context.Context, netip.Addr, ...platform.PingOption) (platform.PingResult, error) {
	return platform.PingResult{}, fmt.Errorf("ping from the vendor's gateway: %w", platform.ErrNotObservable)
}
func (v vendorGateway) Neighbor(context.Context, netip.Addr) (platform.Neighbor, error) {
	return platform.Neighbor{}, fmt.Errorf("the vendor gateway's neighbour table: %w", platform.ErrNotObservable)
}
func (v vendorGateway) NeighTimers(context.Context) (platform.NeighTimers, error) {
	return platform.NeighTimers{}, fmt.Errorf("the vendor gateway's timers: %w", platform.ErrNotObservable)
}

// neighbor reads the entry for ip on iface ("" = any interface).
func neighbor(h *netlink.Handle, iface string, ip netip.Addr) (platform.Neighbor, error) {
	idx := 0
	if iface != "" {
		l, err := h.LinkByName(iface)
		if err != nil {
			return platform.Neighbor{}, err
		}
		idx = l.Attrs().Index
	}
	list, err := h.NeighList(idx, netlink.FAMILY_V4)
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
	switch {
	case s&netlink.NUD_REACHABLE != 0:
		return "REACHABLE"
	case s&netlink.NUD_STALE != 0:
		return "STALE"
	case s&netlink.NUD_DELAY != 0:
		return "DELAY"
	case s&netlink.NUD_PROBE != 0:
		return "PROBE"
	case s&netlink.NUD_FAILED != 0:
		return "FAILED"
	case s&netlink.NUD_INCOMPLETE != 0:
		return "INCOMPLETE"
	case s&netlink.NUD_PERMANENT != 0:
		return "PERMANENT"
	case s&netlink.NUD_NOARP != 0:
		return "NOARP"
	}
	return fmt.Sprintf("0x%x", s)
}
