package evidence

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/cozystack/vlan-conformance/framework/dump"
)

// Neighbor is one neighbour-table entry.
type Neighbor struct {
	IP    netip.Addr
	MAC   net.HardwareAddr
	State string // REACHABLE, STALE, DELAY, PROBE, FAILED, INCOMPLETE, PERMANENT, NOARP, or "" when absent
	// Confirmed is when the entry was last confirmed (an ARP reply, or
	// upper-layer feedback), to 10 ms; zero when the tier cannot tell.
	Confirmed time.Time
}

// NeighTimers are the neighbour-table settings that bound how long a stale
// entry can survive (net.ipv4.neigh.<if>.*).
type NeighTimers struct {
	BaseReachable   time.Duration
	DelayFirstProbe time.Duration
	RetransTime     time.Duration
	UcastSolicit    int
	GCStaleTime     time.Duration
	McastSolicit    int // broadcast probes when resolving afresh
	McastResolicit  int // broadcast probes after the unicast ones in PROBE (0: none)
	// ReachableTime is the REACHABLE lifetime the kernel drew for the
	// interface, uniformly from [BaseReachable/2, 3*BaseReachable/2); 0
	// when unknown (it is not a sysctl: the neighbour table reports it).
	ReachableTime time.Duration
}

// NeighProfile is a named set of neighbour timers a fixture declares for
// a gateway; specs derive their bounds from it, never from what the
// gateway happens to run.
type NeighProfile struct {
	Name   string // "tuned", "default"
	Timers NeighTimers
	Source string // where the values come from, for the report
}

// ReadNeighbor reads the entry for ip on iface ("" = any interface).
func ReadNeighbor(h *netlink.Handle, iface string, ip netip.Addr) (Neighbor, error) {
	idx := 0
	if iface != "" {
		l, err := h.LinkByName(iface)
		if err != nil {
			return Neighbor{}, err
		}
		idx = l.Attrs().Index
	}
	list, err := dump.Consistent(func() ([]netlink.Neigh, error) { return h.NeighList(idx, netlink.FAMILY_V4) })
	if err != nil {
		return Neighbor{}, err
	}
	now := time.Now()
	for _, n := range list {
		if a, ok := netip.AddrFromSlice(n.IP); ok && a.Unmap() == ip {
			// The cache info counts clock ticks ago, at USER_HZ (100 on Linux).
			confirmed := now.Add(-time.Duration(n.Confirmed) * 10 * time.Millisecond)
			return Neighbor{IP: ip, MAC: n.HardwareAddr, State: NeighState(n.State), Confirmed: confirmed}, nil
		}
	}
	return Neighbor{IP: ip}, nil
}

// NeighState names a NUD_* state as `ip neigh` does.
func NeighState(s int) string {
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
