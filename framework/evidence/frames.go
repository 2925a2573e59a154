package evidence

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// Frame is one captured Ethernet frame, decoded to the fields specs judge.
type Frame struct {
	Time     time.Time
	Raw      []byte
	Src, Dst net.HardwareAddr
	VLAN     int // 802.1Q VLAN id, 0 when untagged
	Tagged   bool
	ARP      *ARP
	ICMP     *ICMP
	TCP      *TCP
	Size     int
}

// ARP is the payload of an ARP frame.
type ARP struct {
	Op                   uint16 // 1 request, 2 reply
	SenderMAC, TargetMAC net.HardwareAddr
	SenderIP, TargetIP   netip.Addr
}

// ICMP is an ICMPv4 echo request/reply (or other type) with its IP header fields.
type ICMP struct {
	Type     uint8 // 8 request, 0 reply
	Src, Dst netip.Addr
	DF       bool
}

// TCP is a TCP segment's addresses and the flags of a handshake.
type TCP struct {
	Src, Dst      netip.AddrPort
	SYN, ACK, RST bool
}

// Decode parses a raw Ethernet frame.
func Decode(raw []byte) Frame {
	f := Frame{Raw: raw, Size: len(raw)}
	pkt := gopacket.NewPacket(raw, layers.LayerTypeEthernet, gopacket.Default)
	if eth, ok := pkt.Layer(layers.LayerTypeEthernet).(*layers.Ethernet); ok {
		f.Src, f.Dst = eth.SrcMAC, eth.DstMAC
	}
	if d, ok := pkt.Layer(layers.LayerTypeDot1Q).(*layers.Dot1Q); ok {
		f.Tagged, f.VLAN = true, int(d.VLANIdentifier)
	}
	if a, ok := pkt.Layer(layers.LayerTypeARP).(*layers.ARP); ok {
		s, _ := netip.AddrFromSlice(a.SourceProtAddress)
		t, _ := netip.AddrFromSlice(a.DstProtAddress)
		f.ARP = &ARP{Op: a.Operation, SenderMAC: a.SourceHwAddress, TargetMAC: a.DstHwAddress, SenderIP: s.Unmap(), TargetIP: t.Unmap()}
	}
	if ip, ok := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4); ok {
		if ic, ok := pkt.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4); ok {
			s, _ := netip.AddrFromSlice(ip.SrcIP)
			d, _ := netip.AddrFromSlice(ip.DstIP)
			f.ICMP = &ICMP{Type: ic.TypeCode.Type(), Src: s.Unmap(), Dst: d.Unmap(), DF: ip.Flags&layers.IPv4DontFragment != 0}
		}
		if t, ok := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP); ok {
			s, _ := netip.AddrFromSlice(ip.SrcIP)
			d, _ := netip.AddrFromSlice(ip.DstIP)
			f.TCP = &TCP{Src: netip.AddrPortFrom(s.Unmap(), uint16(t.SrcPort)), Dst: netip.AddrPortFrom(d.Unmap(), uint16(t.DstPort)), SYN: t.SYN, ACK: t.ACK, RST: t.RST}
		}
	}
	return f
}

func (f Frame) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s > %s", f.Src, f.Dst)
	if f.Tagged {
		fmt.Fprintf(&b, " vlan %d", f.VLAN)
	}
	switch {
	case f.ARP != nil && f.ARP.Op == 1:
		fmt.Fprintf(&b, " ARP who-has %s tell %s", f.ARP.TargetIP, f.ARP.SenderIP)
	case f.ARP != nil:
		fmt.Fprintf(&b, " ARP %s is-at %s", f.ARP.SenderIP, f.ARP.SenderMAC)
	case f.ICMP != nil:
		fmt.Fprintf(&b, " ICMP type %d %s > %s", f.ICMP.Type, f.ICMP.Src, f.ICMP.Dst)
	case f.TCP != nil:
		fmt.Fprintf(&b, " TCP %s > %s", f.TCP.Src, f.TCP.Dst)
		for _, fl := range []struct {
			on   bool
			name string
		}{{f.TCP.SYN, " SYN"}, {f.TCP.ACK, " ACK"}, {f.TCP.RST, " RST"}} {
			if fl.on {
				b.WriteString(fl.name)
			}
		}
	}
	fmt.Fprintf(&b, " len %d", f.Size)
	return b.String()
}

// Frames is a capture's worth of frames with filters that read as sentences.
type Frames []Frame

func (fs Frames) filter(keep func(Frame) bool) Frames {
	var out Frames
	for _, f := range fs {
		if keep(f) {
			out = append(out, f)
		}
	}
	return out
}

// From keeps frames whose Ethernet source is mac.
func (fs Frames) From(mac net.HardwareAddr) Frames {
	return fs.filter(func(f Frame) bool { return bytes.Equal(f.Src, mac) })
}

// To keeps frames whose Ethernet destination is mac.
func (fs Frames) To(mac net.HardwareAddr) Frames {
	return fs.filter(func(f Frame) bool { return bytes.Equal(f.Dst, mac) })
}

// WithVLAN keeps frames tagged with the VLAN id.
func (fs Frames) WithVLAN(id int) Frames {
	return fs.filter(func(f Frame) bool { return f.Tagged && f.VLAN == id })
}

// Untagged keeps frames without an 802.1Q tag.
func (fs Frames) Untagged() Frames { return fs.filter(func(f Frame) bool { return !f.Tagged }) }

// ARPRequestsFor keeps ARP requests asking for ip.
func (fs Frames) ARPRequestsFor(ip netip.Addr) Frames {
	return fs.filter(func(f Frame) bool { return f.ARP != nil && f.ARP.Op == 1 && f.ARP.TargetIP == ip })
}

// ARPSentBy keeps ARP frames whose sender protocol address is ip.
func (fs Frames) ARPSentBy(ip netip.Addr) Frames {
	return fs.filter(func(f Frame) bool { return f.ARP != nil && f.ARP.SenderIP == ip })
}

// ARPRepliesFrom keeps ARP replies announcing ip.
func (fs Frames) ARPRepliesFrom(ip netip.Addr) Frames {
	return fs.filter(func(f Frame) bool { return f.ARP != nil && f.ARP.Op == 2 && f.ARP.SenderIP == ip })
}

// EchoRequests keeps ICMP echo requests from src to dst.
func (fs Frames) EchoRequests(src, dst netip.Addr) Frames {
	return fs.filter(func(f Frame) bool { return f.ICMP != nil && f.ICMP.Type == 8 && f.ICMP.Src == src && f.ICMP.Dst == dst })
}

// EchoReplies keeps ICMP echo replies from src to dst.
func (fs Frames) EchoReplies(src, dst netip.Addr) Frames {
	return fs.filter(func(f Frame) bool { return f.ICMP != nil && f.ICMP.Type == 0 && f.ICMP.Src == src && f.ICMP.Dst == dst })
}

// SYNsTo keeps TCP connection requests (SYN without ACK) to dst.
func (fs Frames) SYNsTo(dst netip.AddrPort) Frames {
	return fs.filter(func(f Frame) bool { return f.TCP != nil && f.TCP.SYN && !f.TCP.ACK && f.TCP.Dst == dst })
}

// Replies keeps ARP replies and ICMP echo replies.
func (fs Frames) Replies() Frames {
	return fs.filter(func(f Frame) bool {
		return (f.ARP != nil && f.ARP.Op == 2) || (f.ICMP != nil && f.ICMP.Type == 0)
	})
}

// Summary lists up to n frames, one per line, for failure messages.
func (fs Frames) Summary(n int) string {
	var b strings.Builder
	for i, f := range fs {
		if i == n {
			fmt.Fprintf(&b, "... and %d more\n", len(fs)-n)
			break
		}
		b.WriteString(f.String() + "\n")
	}
	return b.String()
}
