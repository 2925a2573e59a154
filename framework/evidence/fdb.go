package evidence

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cozystack/vlan-conformance/framework/dump"
)

// FDBEntry is one entry of a bridge's forwarding database.
type FDBEntry struct {
	MAC   net.HardwareAddr
	Port  string // the bridge port the MAC sits behind
	Local bool   // the bridge's or a port's own address, not learned
}

// ReadBridgeFDB lists what a bridge has learned or owns, per port (netlink,
// AF_BRIDGE: what `bridge fdb show br <bridge>` prints), through h, a
// handle in the bridge's network namespace. Lab and cluster nodes both
// read their br100 with it.
func ReadBridgeFDB(h *netlink.Handle, bridge string) ([]FDBEntry, error) {
	br, err := h.LinkByName(bridge)
	if err != nil {
		return nil, fmt.Errorf("no %s: %w", bridge, err)
	}
	list, err := dump.Consistent(func() ([]netlink.Neigh, error) { return h.NeighList(0, unix.AF_BRIDGE) })
	if err != nil {
		return nil, fmt.Errorf("%s FDB: %w", bridge, err)
	}
	idx := br.Attrs().Index
	names := map[int]string{}
	var out []FDBEntry
	for _, e := range list {
		if (e.MasterIndex != idx && e.LinkIndex != idx) || len(e.HardwareAddr) != 6 {
			continue
		}
		port, ok := names[e.LinkIndex]
		if !ok {
			if l, err := h.LinkByIndex(e.LinkIndex); err == nil {
				port = l.Attrs().Name
			} else {
				port = fmt.Sprintf("ifindex %d", e.LinkIndex)
			}
			names[e.LinkIndex] = port
		}
		out = append(out, FDBEntry{MAC: append(net.HardwareAddr(nil), e.HardwareAddr...), Port: port, Local: e.State&netlink.NUD_PERMANENT != 0})
	}
	return out, nil
}

// ReadBridges lists the bridges in h's namespace and the ports enslaved to
// each (what `ip link show type bridge` and `bridge link` print).
func ReadBridges(h *netlink.Handle) (map[string][]string, error) {
	links, err := dump.Consistent(h.LinkList)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	byIndex := map[int]string{}
	for _, l := range links {
		if l.Type() == "bridge" {
			out[l.Attrs().Name] = []string{}
			byIndex[l.Attrs().Index] = l.Attrs().Name
		}
	}
	for _, l := range links {
		if br, ok := byIndex[l.Attrs().MasterIndex]; ok {
			out[br] = append(out[br], l.Attrs().Name)
		}
	}
	return out, nil
}
