package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// A DHCPv4 client for netplan's dhcp4: true, enough for KubeVirt's bridge
// binding (virt-launcher's server hands the guest the pod's address, an
// infinite lease) and QEMU's user network. Replies are requested as
// broadcasts, so a UDP socket bound to the NIC receives them before the
// NIC has an address. The lease is applied as netplan/networkd would:
// address, routes with metric 100 and proto dhcp, the MTU, resolv.conf.
// Finite leases are not renewed: the address is kept (KubeVirt's never
// expire).

const (
	dhcpDiscover = 1
	dhcpOffer    = 2
	dhcpRequest  = 3
	dhcpAck      = 5
	dhcpNak      = 6

	dhcpMetric = 100 // netplan's default dhcp4 route metric
)

type lease struct {
	addr    netip.Prefix
	server  net.IP
	routers []net.IP
	routes  []classlessRoute // option 121; when present, routers are ignored (RFC 3442)
	dns     []net.IP
	domain  string
	mtu     int
	time    time.Duration
}

type classlessRoute struct {
	dst netip.Prefix
	gw  net.IP
}

// hasGlobalIPv4 reports whether a NIC already holds a lease (a global
// IPv4 address).
func hasGlobalIPv4(h *netlink.Handle, l netlink.Link) (bool, error) {
	addrs, err := h.AddrList(l, netlink.FAMILY_V4)
	if err != nil {
		return false, err
	}
	for _, a := range addrs {
		if a.Scope == unix.RT_SCOPE_UNIVERSE {
			return true, nil
		}
	}
	return false, nil
}

// dhcpIfNeeded is netplan's DHCPFunc: a NIC that already has a global
// IPv4 address keeps its lease (netplan apply re-run by runcmd).
func dhcpIfNeeded(h *netlink.Handle, l netlink.Link) error {
	if leased, err := hasGlobalIPv4(h, l); err != nil || leased {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), dhcpTimeout())
	defer cancel()
	ls, err := dhcpAcquire(ctx, l)
	if err != nil {
		return err
	}
	return ls.apply(h, l)
}

// dhcpTimeout is how long a NIC may wait for a lease (as networkd-wait-online
// would hold up boot); vcf.dhcp_timeout=SECONDS on the kernel command line
// changes it.
func dhcpTimeout() time.Duration {
	b, _ := os.ReadFile("/proc/cmdline")
	for _, f := range strings.Fields(string(b)) {
		if v, ok := strings.CutPrefix(f, "vcf.dhcp_timeout="); ok {
			if d, err := time.ParseDuration(v + "s"); err == nil {
				return d
			}
		}
	}
	return 30 * time.Second
}

func dhcpAcquire(ctx context.Context, l netlink.Link) (*lease, error) {
	ifname, mac := l.Attrs().Name, l.Attrs().HardwareAddr
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			for _, o := range []int{unix.SO_REUSEADDR, unix.SO_BROADCAST} {
				if serr == nil {
					serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, o, 1)
				}
			}
			if serr == nil {
				serr = unix.BindToDevice(int(fd), ifname)
			}
		})
		return errors.Join(err, serr)
	}}
	pc, err := lc.ListenPacket(ctx, "udp4", "0.0.0.0:68")
	if err != nil {
		return nil, err
	}
	defer pc.Close()
	conn := pc.(*net.UDPConn)
	bcast := &net.UDPAddr{IP: net.IPv4bcast, Port: 67}
	var xid [4]byte
	rand.Read(xid[:])

	exchange := func(msg []byte, want byte) (*lease, byte, error) {
		wait := time.Second
		for {
			if _, err := conn.WriteTo(msg, bcast); err != nil {
				return nil, 0, err
			}
			end := time.Now().Add(wait)
			if d, ok := ctx.Deadline(); ok && d.Before(end) {
				end = d
			}
			conn.SetReadDeadline(end)
			buf := make([]byte, 1500)
			for {
				n, _, err := conn.ReadFrom(buf)
				if err != nil {
					if ctx.Err() != nil {
						return nil, 0, fmt.Errorf("no DHCP %s on %s: %w", map[byte]string{dhcpOffer: "offer", dhcpAck: "ack"}[want], ifname, ctx.Err())
					}
					break // resend
				}
				ls, typ, ok := parseDHCP(buf[:n], xid, mac)
				if ok && (typ == want || typ == dhcpNak) {
					return ls, typ, nil
				}
			}
			wait = min(2*wait, 8*time.Second)
		}
	}
	offer, _, err := exchange(dhcpMessage(dhcpDiscover, xid, mac, nil, nil), dhcpOffer)
	if err != nil {
		return nil, err
	}
	ack, typ, err := exchange(dhcpMessage(dhcpRequest, xid, mac, offer.addr.Addr().AsSlice(), offer.server), dhcpAck)
	if err != nil {
		return nil, err
	}
	if typ == dhcpNak {
		return nil, fmt.Errorf("DHCP server %s refused %s on %s", offer.server, offer.addr.Addr(), ifname)
	}
	return ack, nil
}

var dhcpCookie = []byte{99, 130, 83, 99}

// dhcpMessage builds a BOOTREQUEST asking for broadcast replies.
func dhcpMessage(typ byte, xid [4]byte, mac net.HardwareAddr, reqIP, server net.IP) []byte {
	m := make([]byte, 240, 300)
	m[0], m[1], m[2] = 1, 1, 6 // BOOTREQUEST, ethernet, hlen
	copy(m[4:8], xid[:])
	binary.BigEndian.PutUint16(m[10:12], 0x8000) // broadcast flag
	copy(m[28:34], mac)
	copy(m[236:240], dhcpCookie)
	opt := func(code byte, data ...byte) { m = append(append(m, code, byte(len(data))), data...) }
	opt(53, typ)
	opt(61, append([]byte{1}, mac...)...)
	opt(55, 1, 3, 6, 12, 15, 26, 28, 121)
	opt(57, 0x05, 0xdc)
	if reqIP != nil {
		opt(50, reqIP.To4()...)
	}
	if server != nil {
		opt(54, server.To4()...)
	}
	return append(m, 255)
}

// parseDHCP reads a BOOTREPLY for our transaction.
func parseDHCP(p []byte, xid [4]byte, mac net.HardwareAddr) (*lease, byte, bool) {
	if len(p) < 240 || p[0] != 2 || !bytes.Equal(p[4:8], xid[:]) || !bytes.Equal(p[28:34], mac) || !bytes.Equal(p[236:240], dhcpCookie) {
		return nil, 0, false
	}
	yiaddr, _ := netip.AddrFromSlice(p[16:20])
	ls := &lease{}
	var typ byte
	mask := -1
	for o := p[240:]; len(o) > 0; {
		code := o[0]
		if code == 0 {
			o = o[1:]
			continue
		}
		if code == 255 || len(o) < 2 || len(o) < 2+int(o[1]) {
			break
		}
		d := o[2 : 2+int(o[1])]
		o = o[2+int(o[1]):]
		switch code {
		case 53:
			if len(d) == 1 {
				typ = d[0]
			}
		case 1:
			if len(d) == 4 {
				mask, _ = net.IPMask(d).Size()
			}
		case 3:
			ls.routers = ips(d)
		case 6:
			ls.dns = ips(d)
		case 15:
			ls.domain = strings.TrimRight(string(d), "\x00")
		case 26:
			if len(d) == 2 {
				ls.mtu = int(binary.BigEndian.Uint16(d))
			}
		case 51:
			if len(d) == 4 {
				ls.time = time.Duration(binary.BigEndian.Uint32(d)) * time.Second
			}
		case 54:
			if len(d) == 4 {
				ls.server = net.IP(append([]byte(nil), d...))
			}
		case 121:
			ls.routes = classless(d)
		}
	}
	if mask < 0 {
		mask = 24
	}
	ls.addr = netip.PrefixFrom(yiaddr, mask)
	return ls, typ, typ != 0
}

func ips(d []byte) []net.IP {
	var out []net.IP
	for ; len(d) >= 4; d = d[4:] {
		out = append(out, net.IP(append([]byte(nil), d[:4]...)))
	}
	return out
}

// classless decodes option 121: width, significant octets, gateway.
func classless(d []byte) []classlessRoute {
	var out []classlessRoute
	for len(d) > 0 {
		w := int(d[0])
		n := (w + 7) / 8
		if w > 32 || len(d) < 1+n+4 {
			break
		}
		var a [4]byte
		copy(a[:], d[1:1+n])
		out = append(out, classlessRoute{netip.PrefixFrom(netip.AddrFrom4(a), w), net.IP(append([]byte(nil), d[1+n:5+n]...))})
		d = d[5+n:]
	}
	return out
}

func (ls *lease) apply(h *netlink.Handle, l netlink.Link) error {
	if ls.mtu >= 576 && ls.mtu != l.Attrs().MTU {
		if err := h.LinkSetMTU(l, ls.mtu); err != nil {
			return fmt.Errorf("mtu %d: %w", ls.mtu, err)
		}
	}
	a := &netlink.Addr{IPNet: &net.IPNet{IP: ls.addr.Addr().AsSlice(), Mask: net.CIDRMask(ls.addr.Bits(), 32)}}
	if ls.addr.Bits() < 31 {
		a.Broadcast = broadcast(ls.addr)
	}
	if err := h.AddrAdd(l, a); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("address %s: %w", ls.addr, err)
	}
	routes := ls.routes
	if len(routes) == 0 {
		for _, r := range ls.routers[:min(1, len(ls.routers))] {
			routes = append(routes, classlessRoute{netip.MustParsePrefix("0.0.0.0/0"), r})
		}
	}
	src := ls.addr.Addr().AsSlice()
	for _, r := range routes {
		rt := &netlink.Route{LinkIndex: l.Attrs().Index, Dst: &net.IPNet{IP: r.dst.Addr().AsSlice(), Mask: net.CIDRMask(r.dst.Bits(), 32)},
			Src: src, Priority: dhcpMetric, Protocol: unix.RTPROT_DHCP}
		if !r.gw.Equal(net.IPv4zero) {
			rt.Gw = r.gw
			gw, _ := netip.AddrFromSlice(r.gw.To4())
			if !ls.addr.Masked().Contains(gw) {
				// An off-subnet gateway (a /32 pod address) is reached on-link.
				rt.Flags = int(netlink.FLAG_ONLINK)
			}
		} else {
			rt.Scope = netlink.SCOPE_LINK
		}
		if err := h.RouteAdd(rt); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("route %s via %s: %w", r.dst, r.gw, err)
		}
	}
	if len(ls.dns) > 0 {
		var b strings.Builder
		b.WriteString("# from the DHCP lease on " + l.Attrs().Name + "\n")
		for _, d := range ls.dns {
			fmt.Fprintf(&b, "nameserver %s\n", d)
		}
		if ls.domain != "" {
			fmt.Fprintf(&b, "search %s\n", ls.domain)
		}
		os.WriteFile("/etc/resolv.conf", []byte(b.String()), 0o644)
	}
	return nil
}

func broadcast(p netip.Prefix) net.IP {
	a := p.Addr().As4()
	m := net.CIDRMask(p.Bits(), 32)
	for i := range a {
		a[i] |= ^m[i]
	}
	return net.IP(a[:])
}
