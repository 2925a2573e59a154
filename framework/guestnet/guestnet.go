// Package guestnet is what the suite observes and sends from inside a
// guest: its links, addresses and routes, its neighbour entries, ping, TCP
// and ARP. A guest only gives a way in (platform.Inside):
//
//   - a network namespace the suite enters, where netlink and sockets
//     opened in it answer (framework/probe, framework/evidence): the lab's
//     VM stand-ins and the cluster's pod workloads;
//   - a shell in the guest's own OS, where iproute2, iputils, bash and a
//     small ARP tool answer: a KubeVirt VM through its serial console.
//
// Each helper holds both ways side by side, so one place answers what the
// suite does inside a guest, and a new claim adds a helper here, not a
// method to every kind of guest.
package guestnet

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/cozystack/vlan-conformance/framework/dump"
	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/probe"
)

// cmdTimeout bounds one command in a guest's shell: a TCG guest under
// load answers in seconds.
const cmdTimeout = 30 * time.Second

// way is a guest's way in, checked: exactly one of a netns with its
// netlink handle, or a shell.
func way(g platform.Guest) (platform.Inside, error) {
	in := g.In()
	switch {
	case in.Shell != nil:
		return in, nil
	case in.Netns != "" && in.Handle != nil:
		return in, nil
	}
	return in, fmt.Errorf("guest %s: no way in (neither a network namespace nor a shell)", g.Name())
}

// Run runs a command that has to succeed in the guest's shell: a guest
// with only a network namespace has none.
func Run(ctx context.Context, g platform.Guest, cmd string) (string, error) {
	in, err := way(g)
	if err != nil {
		return "", err
	}
	if in.Shell == nil {
		return "", fmt.Errorf("guest %s: no shell to run %q in", g.Name(), cmd)
	}
	return must(ctx, g, in.Shell, cmd)
}

// must runs a command that has to succeed in the guest's shell.
func must(ctx context.Context, g platform.Guest, sh platform.Shell, cmd string) (string, error) {
	out, code, err := sh.Run(ctx, cmd, cmdTimeout)
	if err != nil {
		return "", fmt.Errorf("guest %s: %w", g.Name(), err)
	}
	if code != 0 {
		return out, fmt.Errorf("guest %s: %q exited %d: %s", g.Name(), cmd, code, strings.TrimSpace(out))
	}
	return out, nil
}

// Addresses are the IPv4 addresses on the guest's interface iface.
func Addresses(ctx context.Context, g platform.Guest, iface string) ([]netip.Prefix, error) {
	in, err := way(g)
	if err != nil {
		return nil, err
	}
	if in.Shell != nil {
		out, err := must(ctx, g, in.Shell, "ip -4 -o addr show dev "+iface)
		if err != nil {
			return nil, err
		}
		return parseAddrs(out), nil
	}
	l, err := in.Handle.LinkByName(iface)
	if err != nil {
		return nil, err
	}
	addrs, err := dump.Consistent(func() ([]netlink.Addr, error) { return in.Handle.AddrList(l, netlink.FAMILY_V4) })
	if err != nil {
		return nil, err
	}
	var out []netip.Prefix
	for _, a := range addrs {
		out = append(out, PrefixOf(a.IPNet))
	}
	return out, nil
}

// VLANAddr is the first IPv4 address on the guest's VLAN NIC.
func VLANAddr(ctx context.Context, g platform.Guest) (netip.Addr, error) {
	addrs, err := Addresses(ctx, g, g.VLANInterface())
	if err != nil || len(addrs) == 0 {
		return netip.Addr{}, fmt.Errorf("guest %s has no address on %s (%v)", g.Name(), g.VLANInterface(), err)
	}
	return addrs[0].Addr(), nil
}

// LinkMAC is the MAC the guest's own OS reports for an interface it
// names: an observation apart from Guest.MAC(), which a cluster takes
// from the VMI status.
func LinkMAC(ctx context.Context, g platform.Guest, iface string) (net.HardwareAddr, error) {
	in, err := way(g)
	if err != nil {
		return nil, err
	}
	if in.Shell != nil {
		out, err := must(ctx, g, in.Shell, "cat /sys/class/net/"+iface+"/address")
		if err != nil {
			return nil, err
		}
		return net.ParseMAC(strings.TrimSpace(out))
	}
	l, err := in.Handle.LinkByName(iface)
	if err != nil {
		return nil, err
	}
	return l.Attrs().HardwareAddr, nil
}

// MTU is the MTU of the guest's interface iface.
func MTU(ctx context.Context, g platform.Guest, iface string) (int, error) {
	in, err := way(g)
	if err != nil {
		return 0, err
	}
	if in.Shell != nil {
		out, err := must(ctx, g, in.Shell, "cat /sys/class/net/"+iface+"/mtu")
		if err != nil {
			return 0, err
		}
		return strconv.Atoi(strings.TrimSpace(out))
	}
	l, err := in.Handle.LinkByName(iface)
	if err != nil {
		return 0, err
	}
	return l.Attrs().MTU, nil
}

// Routes is the guest's IPv4 main routing table.
func Routes(ctx context.Context, g platform.Guest) ([]platform.Route, error) {
	in, err := way(g)
	if err != nil {
		return nil, err
	}
	if in.Shell != nil {
		out, err := must(ctx, g, in.Shell, "ip -4 route show table main")
		if err != nil {
			return nil, err
		}
		return parseRoutes(out)
	}
	rs, err := dump.Consistent(func() ([]netlink.Route, error) { return in.Handle.RouteList(nil, netlink.FAMILY_V4) })
	if err != nil {
		return nil, err
	}
	var out []platform.Route
	for _, r := range rs {
		pr := platform.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Scope: r.Scope.String()}
		if r.Dst != nil {
			pr.Dst = PrefixOf(r.Dst)
		}
		if gw, ok := netip.AddrFromSlice(r.Gw); ok {
			pr.Gw = gw.Unmap()
		}
		if l, err := in.Handle.LinkByIndex(r.LinkIndex); err == nil {
			pr.Iface = l.Attrs().Name
		}
		out = append(out, pr)
	}
	return out, nil
}

// Neighbor is the guest's neighbour entry for ip on its VLAN NIC.
func Neighbor(ctx context.Context, g platform.Guest, ip netip.Addr) (evidence.Neighbor, error) {
	in, err := way(g)
	if err != nil {
		return evidence.Neighbor{}, err
	}
	if in.Shell != nil {
		out, err := must(ctx, g, in.Shell, "ip -4 neigh show "+ip.String()+" dev "+g.VLANInterface())
		if err != nil {
			return evidence.Neighbor{}, err
		}
		return parseNeigh(ip, out), nil
	}
	return evidence.ReadNeighbor(in.Handle, g.VLANInterface(), ip)
}

// Ping pings dst from the guest.
func Ping(ctx context.Context, g platform.Guest, dst netip.Addr, opts ...probe.PingOption) (probe.PingResult, error) {
	in, err := way(g)
	if err != nil {
		return probe.PingResult{}, err
	}
	if in.Shell == nil {
		return probe.Ping(ctx, in.Netns, dst, opts...)
	}
	o := probe.NewPingOptions(opts...)
	cmd := fmt.Sprintf("ping -n -c %d -i %.3f -W %d -s %d", o.Count, o.Interval.Seconds(), max(1, int(o.Timeout.Seconds())), o.Size)
	if o.DontFrag {
		cmd += " -M do"
	}
	if o.Iface != "" {
		cmd += " -I " + o.Iface
	}
	out, code, err := in.Shell.Run(ctx, cmd+" "+dst.String()+" 2>&1", cmdTimeout)
	if err != nil {
		return probe.PingResult{}, err
	}
	r, ran := parsePing(out)
	if !ran {
		// No summary: ping never got to send (a bad option, no route, no
		// binary). Its silence must not read as "dropped".
		return r, fmt.Errorf("guest %s: %s sent no echo request (exit %d): %s", g.Name(), cmd, code, strings.TrimSpace(out))
	}
	return r, nil
}

// Dial opens a TCP connection from the guest to dst within timeout and
// closes it; a connection that fails is the result's Err, err a dial
// never tried. A shell dials with bash's /dev/tcp (the guest image has
// bash, not necessarily nc): exit 0 is a connection, 124 timeout's cut,
// any other code bash's own complaint, which it prints.
func Dial(ctx context.Context, g platform.Guest, dst netip.AddrPort, timeout time.Duration) (probe.DialResult, error) {
	in, err := way(g)
	if err != nil {
		return probe.DialResult{}, err
	}
	if in.Shell == nil {
		return probe.Dial(ctx, in.Netns, dst, timeout)
	}
	d := probe.DialResult{Dst: dst}
	cmd := fmt.Sprintf("timeout %d bash -c 'exec 3<>/dev/tcp/%s/%d' 2>&1", max(1, int(timeout.Seconds())), dst.Addr(), dst.Port())
	start := time.Now()
	out, code, err := in.Shell.Run(ctx, cmd, cmdTimeout)
	d.Took = time.Since(start)
	if err != nil {
		return d, fmt.Errorf("guest %s: %w", g.Name(), err)
	}
	out = strings.TrimSpace(out)
	switch code {
	case 0:
		d.Connected = true
	case 124:
		d.Err = fmt.Errorf("no connection within %s (timeout)", timeout)
	case 126, 127:
		return d, fmt.Errorf("guest %s: %s could not run (exit %d): %s", g.Name(), cmd, code, out)
	default:
		d.Err = fmt.Errorf("exit %d: %s", code, out)
	}
	return d, nil
}

// Prober is a guest that sends its ARP probes its own way: the lab's,
// under the control whose probe cannot leave (its VLAN NIC down while the
// probe runs).
type Prober interface {
	ARPProbe(ctx context.Context, ip netip.Addr, timeout time.Duration) (net.HardwareAddr, error)
}

// Announcer is a guest that sends its gratuitous ARP its own way: the
// lab's, under the control that keeps it silent.
type Announcer interface {
	AnnounceGARP(ctx context.Context) error
}

// ARPProbe asks for ip on the guest's VLAN NIC, from its VLAN address, and
// returns the MAC that answered; nobody answering within timeout is
// probe.ErrNoReply. A Prober probes its own way.
func ARPProbe(ctx context.Context, g platform.Guest, ip netip.Addr, timeout time.Duration) (net.HardwareAddr, error) {
	if p, ok := platform.Own(g).(Prober); ok {
		return p.ARPProbe(ctx, ip, timeout)
	}
	return WhoHas(ctx, g, ip, timeout)
}

// WhoHas is ARPProbe's probe, whatever way the guest has of its own: what
// a Prober sends when it does.
func WhoHas(ctx context.Context, g platform.Guest, ip netip.Addr, timeout time.Duration) (net.HardwareAddr, error) {
	in, err := way(g)
	if err != nil {
		return nil, err
	}
	src, err := VLANAddr(ctx, g)
	if err != nil {
		return nil, err
	}
	if in.Shell == nil {
		return probe.ARPProbe(in.Netns, g.VLANInterface(), src, ip, timeout)
	}
	out, code, err := in.Shell.Run(ctx, fmt.Sprintf("python3 %s probe %s %s %s %.1f", arpToolPath, g.VLANInterface(), src, ip, timeout.Seconds()), timeout+cmdTimeout)
	if err != nil {
		return nil, err
	}
	switch code {
	case 0:
	case 3: // the tool's "nobody answered"; anything else is the tool failing
		return nil, fmt.Errorf("who-has %s on %s: %w within %s", ip, g.VLANInterface(), probe.ErrNoReply, timeout)
	default:
		return nil, fmt.Errorf("ARP probe for %s on %s: exit %d: %s", ip, g.VLANInterface(), code, strings.TrimSpace(out))
	}
	return net.ParseMAC(strings.TrimSpace(out))
}

// AnnounceGARP sends a gratuitous ARP for the guest's VLAN address. An
// Announcer announces its own way.
func AnnounceGARP(ctx context.Context, g platform.Guest) error {
	if a, ok := platform.Own(g).(Announcer); ok {
		return a.AnnounceGARP(ctx)
	}
	return GARP(ctx, g)
}

// GARP is AnnounceGARP's announcement, whatever way the guest has of its
// own: what an Announcer sends when it does.
func GARP(ctx context.Context, g platform.Guest) error {
	in, err := way(g)
	if err != nil {
		return err
	}
	src, err := VLANAddr(ctx, g)
	if err != nil {
		return err
	}
	if in.Shell == nil {
		return probe.GratuitousARP(in.Netns, g.VLANInterface(), src)
	}
	_, err = must(ctx, g, in.Shell, fmt.Sprintf("python3 %s garp %s %s", arpToolPath, g.VLANInterface(), src))
	return err
}

// SpoofARP sends one ARP request for target from the guest's VLAN NIC
// with src as the frame's source MAC (and the ARP sender's), not the
// NIC's own.
func SpoofARP(ctx context.Context, g platform.Guest, src net.HardwareAddr, target netip.Addr) error {
	in, err := way(g)
	if err != nil {
		return err
	}
	sender, err := VLANAddr(ctx, g)
	if err != nil {
		return err
	}
	if in.Shell == nil {
		return probe.SpoofedARP(in.Netns, g.VLANInterface(), src, sender, target)
	}
	_, err = must(ctx, g, in.Shell, fmt.Sprintf("python3 %s spoof %s %s %s %s", arpToolPath, g.VLANInterface(), src, sender, target))
	return err
}

// PrefixOf converts a netlink address to a prefix.
func PrefixOf(n *net.IPNet) netip.Prefix {
	a, _ := netip.AddrFromSlice(n.IP)
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), ones)
}
