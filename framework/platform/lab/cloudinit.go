package lab

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/vishvananda/netlink"
	"sigs.k8s.io/yaml"
)

// The lab guest's stand-in for cloud-init + netplan: it reads the userData
// the VM was given and applies the netplan files it writes, but only when
// the userData runs `netplan apply`, as a real guest would. The subset
// understood is what the guide uses: ethernets.<name>.addresses, routes
// (to/via), gateway4 and mtu. Anything else is an error, so a fixture the
// lab cannot honour fails loudly instead of being half-applied.

type cloudConfig struct {
	WriteFiles []struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	} `json:"write_files"`
	Runcmd []any `json:"runcmd"`
}

type netplan struct {
	Network struct {
		Version   int                        `json:"version"`
		Ethernets map[string]netplanEthernet `json:"ethernets"`
	} `json:"network"`
}

type netplanEthernet struct {
	Addresses []string `json:"addresses"`
	Gateway4  string   `json:"gateway4"`
	MTU       int      `json:"mtu"`
	Routes    []struct {
		To  string `json:"to"`
		Via string `json:"via"`
	} `json:"routes"`
}

// applyCloudInit configures the guest namespace from userData.
func applyCloudInit(h *netlink.Handle, userData string) error {
	if !strings.HasPrefix(strings.TrimSpace(userData), "#cloud-config") {
		return fmt.Errorf("userData is not #cloud-config")
	}
	var cc cloudConfig
	if err := yaml.Unmarshal([]byte(userData), &cc); err != nil {
		return fmt.Errorf("userData: %w", err)
	}
	if !runsNetplanApply(cc.Runcmd) {
		return nil
	}
	for _, f := range cc.WriteFiles {
		if !strings.HasPrefix(f.Path, "/etc/netplan/") {
			continue
		}
		var np netplan
		if err := yaml.UnmarshalStrict([]byte(f.Content), &np); err != nil {
			return fmt.Errorf("%s: %w", f.Path, err)
		}
		for name, eth := range np.Network.Ethernets {
			if err := applyEthernet(h, name, eth); err != nil {
				return fmt.Errorf("%s: %s: %w", f.Path, name, err)
			}
		}
	}
	return nil
}

func runsNetplanApply(cmds []any) bool {
	for _, c := range cmds {
		s := fmt.Sprint(c)
		if strings.Contains(s, "netplan apply") || strings.Contains(s, "[netplan apply]") {
			return true
		}
	}
	return false
}

func applyEthernet(h *netlink.Handle, name string, eth netplanEthernet) error {
	l, err := h.LinkByName(name)
	if err != nil {
		return fmt.Errorf("no interface %s in the guest: %w", name, err)
	}
	if eth.MTU > 0 {
		if err := h.LinkSetMTU(l, eth.MTU); err != nil {
			return err
		}
	}
	if err := h.LinkSetUp(l); err != nil {
		return err
	}
	for _, a := range eth.Addresses {
		p, err := netip.ParsePrefix(a)
		if err != nil {
			return fmt.Errorf("address %q: %w", a, err)
		}
		if err := h.AddrAdd(l, &netlink.Addr{IPNet: ipnet(p)}); err != nil {
			return fmt.Errorf("address %s: %w", p, err)
		}
	}
	type route struct{ to, via string }
	var routes []route
	if eth.Gateway4 != "" {
		routes = append(routes, route{"0.0.0.0/0", eth.Gateway4})
	}
	for _, r := range eth.Routes {
		to := r.To
		if to == "default" {
			to = "0.0.0.0/0"
		}
		routes = append(routes, route{to, r.Via})
	}
	for _, r := range routes {
		dst, err := netip.ParsePrefix(r.to)
		if err != nil {
			return fmt.Errorf("route to %q: %w", r.to, err)
		}
		via, err := netip.ParseAddr(r.via)
		if err != nil {
			return fmt.Errorf("route via %q: %w", r.via, err)
		}
		rt := &netlink.Route{LinkIndex: l.Attrs().Index, Dst: ipnet(dst), Gw: via.AsSlice()}
		if err := h.RouteAdd(rt); err != nil {
			return fmt.Errorf("route %s via %s: %w", dst, via, err)
		}
	}
	return nil
}

func ipnet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
