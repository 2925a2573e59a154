package evidence

import (
	"net"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// A TCP SYN decodes to its addresses and flags, and SYNsTo finds it by
// destination; the SYN-ACK coming back is not a connection request.
func TestTCPSynDecodes(t *testing.T) {
	src, dst := netip.MustParseAddrPort("203.0.113.58:40000"), netip.MustParseAddrPort("203.0.113.4:34337")
	syn := tcpFrame(t, src, dst, true, false)
	synAck := tcpFrame(t, dst, src, true, true)
	fs := Frames{Decode(syn), Decode(synAck)}
	if f := fs[0]; f.TCP == nil || f.TCP.Src != src || f.TCP.Dst != dst || !f.TCP.SYN || f.TCP.ACK {
		t.Fatalf("SYN decoded as %+v", f.TCP)
	}
	if got := fs.SYNsTo(dst); len(got) != 1 {
		t.Fatalf("SYNsTo(%s): %d frames, want the SYN alone:\n%s", dst, len(got), fs.Summary(5))
	}
	if got := fs.SYNsTo(src); len(got) != 0 {
		t.Fatalf("a SYN-ACK counted as a connection request to %s", src)
	}
}

func tcpFrame(t *testing.T, src, dst netip.AddrPort, syn, ack bool) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: src.Addr().AsSlice(), DstIP: dst.Addr().AsSlice()}
	tcp := &layers.TCP{SrcPort: layers.TCPPort(src.Port()), DstPort: layers.TCPPort(dst.Port()), SYN: syn, ACK: ack, Window: 64240}
	if err := tcp.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, tcp); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
