package cloudinit

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path"
	"sort"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/vlan-conformance/framework/dump"
)

// Netplan is the subset of a netplan file the guide uses: network.version
// 2 and ethernets with addresses, routes (to/via/metric), gateway4, mtu,
// dhcp4, match (macaddress, name) and set-name. Any other key is an error,
// so a file the guest cannot honour fails loudly instead of being
// half-applied.
type Netplan struct {
	Network struct {
		Version   int                 `json:"version"`
		Renderer  string              `json:"renderer,omitempty"`
		Ethernets map[string]Ethernet `json:"ethernets,omitempty"`
	} `json:"network"`
}

// Ethernet is one ethernets.<id> entry.
type Ethernet struct {
	Match     *Match   `json:"match,omitempty"`
	SetName   string   `json:"set-name,omitempty"`
	DHCP4     bool     `json:"dhcp4,omitempty"`
	Addresses []string `json:"addresses,omitempty"`
	Gateway4  string   `json:"gateway4,omitempty"`
	MTU       int      `json:"mtu,omitempty"`
	Routes    []Route  `json:"routes,omitempty"`
}

// Match selects interfaces by MAC and/or name (a shell glob).
type Match struct {
	MACAddress string `json:"macaddress,omitempty"`
	Name       string `json:"name,omitempty"`
}

// Route is a static route; to may be "default".
type Route struct {
	To     string `json:"to"`
	Via    string `json:"via"`
	Metric *int   `json:"metric,omitempty"`
}

// IsNetplanPath reports whether a file at p is one netplan reads.
func IsNetplanPath(p string) bool {
	for _, d := range netplanDirs {
		if strings.HasPrefix(p, d+"/") && strings.HasSuffix(p, ".yaml") {
			return true
		}
	}
	return false
}

// netplanDirs are the directories netplan reads.
var netplanDirs = []string{"/lib/netplan", "/etc/netplan", "/run/netplan"}

// ParseNetplan reads one netplan file strictly.
func ParseNetplan(b []byte) (Netplan, error) {
	var np Netplan
	if err := yaml.UnmarshalStrict(b, &np); err != nil {
		return np, err
	}
	if v := np.Network.Version; v != 2 {
		return np, fmt.Errorf("network.version %d: only version 2 is supported", v)
	}
	return np, nil
}

// Apply configures the links behind h (a namespace's netlink handle). It
// only adds: applying twice is harmless. dhcp4: true is an error (no DHCP
// server where it is used).
func (np Netplan) Apply(h *netlink.Handle) error {
	ids := make([]string, 0, len(np.Network.Ethernets))
	for id := range np.Network.Ethernets {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if err := applyEthernet(h, id, np.Network.Ethernets[id]); err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
	}
	return nil
}

// links finds the interfaces an ethernets entry applies to.
func links(h *netlink.Handle, id string, eth Ethernet) ([]netlink.Link, error) {
	if eth.Match == nil {
		l, err := h.LinkByName(id)
		if err != nil {
			return nil, fmt.Errorf("no interface %s in the guest: %w", id, err)
		}
		return []netlink.Link{l}, nil
	}
	all, err := dump.Consistent(h.LinkList)
	if err != nil {
		return nil, err
	}
	var want net.HardwareAddr
	if eth.Match.MACAddress != "" {
		if want, err = net.ParseMAC(eth.Match.MACAddress); err != nil {
			return nil, fmt.Errorf("match.macaddress: %w", err)
		}
	}
	var out []netlink.Link
	for _, l := range all {
		a := l.Attrs()
		if a.Flags&net.FlagLoopback != 0 || virtualTypes[l.Type()] {
			continue // ethernets are NICs, not the VLANs or bridges on them
		}
		if want != nil && a.HardwareAddr.String() != want.String() {
			continue
		}
		if eth.Match.Name != "" {
			if ok, _ := path.Match(eth.Match.Name, a.Name); !ok {
				continue
			}
		}
		out = append(out, l)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no interface in the guest matches %+v", *eth.Match)
	}
	return out, nil
}

var virtualTypes = map[string]bool{"vlan": true, "bridge": true, "bond": true, "vrf": true, "vxlan": true}

func applyEthernet(h *netlink.Handle, id string, eth Ethernet) error {
	ls, err := links(h, id, eth)
	if err != nil {
		return err
	}
	if eth.SetName != "" && len(ls) != 1 {
		return fmt.Errorf("set-name %s: matches %d interfaces", eth.SetName, len(ls))
	}
	for _, l := range ls {
		if eth.SetName != "" && l.Attrs().Name != eth.SetName {
			if err := h.LinkSetDown(l); err != nil {
				return err
			}
			if err := h.LinkSetName(l, eth.SetName); err != nil {
				return fmt.Errorf("set-name %s: %w", eth.SetName, err)
			}
			if l, err = h.LinkByName(eth.SetName); err != nil {
				return err
			}
		}
		if err := configure(h, l, eth); err != nil {
			return err
		}
	}
	return nil
}

func configure(h *netlink.Handle, l netlink.Link, eth Ethernet) error {
	if eth.MTU > 0 {
		if err := h.LinkSetMTU(l, eth.MTU); err != nil {
			return err
		}
	}
	if err := h.LinkSetUp(l); err != nil {
		return err
	}
	if eth.DHCP4 {
		return errors.New("dhcp4: no DHCP client here")
	}
	for _, a := range eth.Addresses {
		p, err := netip.ParsePrefix(a)
		if err != nil {
			return fmt.Errorf("address %q: %w", a, err)
		}
		if err := h.AddrAdd(l, &netlink.Addr{IPNet: IPNet(p)}); err != nil && !errors.Is(err, syscall.EEXIST) {
			return fmt.Errorf("address %s: %w", p, err)
		}
	}
	routes := eth.Routes
	if eth.Gateway4 != "" {
		routes = append([]Route{{To: "default", Via: eth.Gateway4}}, routes...)
	}
	for _, r := range routes {
		to := r.To
		if to == "default" {
			to = "0.0.0.0/0"
		}
		dst, err := netip.ParsePrefix(to)
		if err != nil {
			return fmt.Errorf("route to %q: %w", r.To, err)
		}
		via, err := netip.ParseAddr(r.Via)
		if err != nil {
			return fmt.Errorf("route via %q: %w", r.Via, err)
		}
		rt := &netlink.Route{LinkIndex: l.Attrs().Index, Dst: IPNet(dst), Gw: via.AsSlice()}
		if r.Metric != nil {
			rt.Priority = *r.Metric
		}
		if err := h.RouteAdd(rt); err != nil && !errors.Is(err, syscall.EEXIST) {
			return fmt.Errorf("route %s via %s: %w", dst, via, err)
		}
	}
	return nil
}

// IPNet converts a prefix for netlink.
func IPNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
