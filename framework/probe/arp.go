package probe

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"golang.org/x/sys/unix"

	"github.com/cozystack/vlan-conformance/framework/nsexec"
)

// ErrNoReply means nobody answered within the timeout.
var ErrNoReply = errors.New("no ARP reply")

// ARPProbe asks who has target on iface (in the namespace at nsPath), with
// the interface's own MAC and address sender, and returns the MAC that
// answered.
func ARPProbe(nsPath, iface string, sender, target netip.Addr, timeout time.Duration) (net.HardwareAddr, error) {
	var answer net.HardwareAddr
	err := withARPSocket(nsPath, iface, func(fd int, ifi *net.Interface) error {
		frame, err := arpFrame(layers.ARPRequest, ifi.HardwareAddr, sender, layers.EthernetBroadcast, net.HardwareAddr{0, 0, 0, 0, 0, 0}, target)
		if err != nil {
			return err
		}
		if err := sendFrame(fd, ifi, frame); err != nil {
			return err
		}
		deadline := time.Now().Add(timeout)
		buf := make([]byte, 1500)
		for time.Now().Before(deadline) {
			tv := unix.NsecToTimeval(time.Until(deadline).Nanoseconds())
			unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
			n, _, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				if errors.Is(err, unix.EINTR) {
					continue
				}
				break
			}
			p := gopacket.NewPacket(buf[:n], layers.LayerTypeEthernet, gopacket.Default)
			a, ok := p.Layer(layers.LayerTypeARP).(*layers.ARP)
			if !ok || a.Operation != layers.ARPReply || !bytes.Equal(a.SourceProtAddress, target.AsSlice()) {
				continue
			}
			answer = append(net.HardwareAddr(nil), a.SourceHwAddress...)
			return nil
		}
		return fmt.Errorf("who-has %s on %s: %w within %s", target, iface, ErrNoReply, timeout)
	})
	return answer, err
}

// GratuitousARP announces ip at the interface's MAC (an ARP request with
// sender = target = ip, to broadcast), as a guest's network stack does when
// an address comes up.
func GratuitousARP(nsPath, iface string, ip netip.Addr) error {
	return withARPSocket(nsPath, iface, func(fd int, ifi *net.Interface) error {
		frame, err := arpFrame(layers.ARPRequest, ifi.HardwareAddr, ip, layers.EthernetBroadcast, net.HardwareAddr{0, 0, 0, 0, 0, 0}, ip)
		if err != nil {
			return err
		}
		return sendFrame(fd, ifi, frame)
	})
}

// SpoofedARP asks who has target on iface with src as the frame's source
// MAC and the ARP sender's, not the interface's own: what a guest that
// sends from another MAC puts on the wire.
func SpoofedARP(nsPath, iface string, src net.HardwareAddr, sender, target netip.Addr) error {
	return withARPSocket(nsPath, iface, func(fd int, ifi *net.Interface) error {
		frame, err := arpFrame(layers.ARPRequest, src, sender, layers.EthernetBroadcast, net.HardwareAddr{0, 0, 0, 0, 0, 0}, target)
		if err != nil {
			return err
		}
		return sendFrame(fd, ifi, frame)
	})
}

func withARPSocket(nsPath, iface string, fn func(fd int, ifi *net.Interface) error) error {
	var fd int
	var ifi *net.Interface
	err := nsexec.Do(nsPath, func() error {
		var err error
		if ifi, err = net.InterfaceByName(iface); err != nil {
			return err
		}
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ARP)))
		if err != nil {
			return fmt.Errorf("ARP socket: %w", err)
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ARP), Ifindex: ifi.Index})
	})
	if err != nil {
		if fd > 0 {
			unix.Close(fd)
		}
		return err
	}
	defer unix.Close(fd)
	return fn(fd, ifi)
}

func arpFrame(op uint16, srcMAC net.HardwareAddr, srcIP netip.Addr, dstMAC, targetMAC net.HardwareAddr, targetIP netip.Addr) ([]byte, error) {
	eth := &layers.Ethernet{SrcMAC: srcMAC, DstMAC: dstMAC, EthernetType: layers.EthernetTypeARP}
	arp := &layers.ARP{
		AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4,
		HwAddressSize: 6, ProtAddressSize: 4, Operation: op,
		SourceHwAddress: srcMAC, SourceProtAddress: srcIP.AsSlice(),
		DstHwAddress: targetMAC, DstProtAddress: targetIP.AsSlice(),
	}
	buf := gopacket.NewSerializeBuffer()
	err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, eth, arp)
	return buf.Bytes(), err
}

func sendFrame(fd int, ifi *net.Interface, frame []byte) error {
	var addr [8]byte
	copy(addr[:], layers.EthernetBroadcast)
	return unix.Sendto(fd, frame, 0, &unix.SockaddrLinklayer{Ifindex: ifi.Index, Halen: 6, Addr: addr, Protocol: htons(unix.ETH_P_ARP)})
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
