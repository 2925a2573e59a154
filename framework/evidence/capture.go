// Package evidence observes the datapath: frame captures on any interface of
// any namespace (802.1Q tags included), neighbour and FDB reads (with the
// neighbour timers that age an entry), and dumps of every namespace when a
// spec fails. What a probe reports is framework/probe's.
package evidence

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"golang.org/x/sys/unix"

	"github.com/cozystack/vlan-conformance/framework/nsexec"
)

// Point is a place traffic can be watched: an interface in a namespace.
type Point struct {
	Netns string // path of the network namespace ("" = this process's)
	Iface string
	Label string // human name for reports, e.g. "trunk (gateway side of node-a)"
	// Via captures on Iface where the suite cannot open a socket itself
	// (an existing cluster's node, through its node agent); nil: here,
	// in Netns.
	Via Tap
	// Err says why the point cannot be captured on. Wrapping
	// ErrNotObservable it is a platform that cannot see there (a skip);
	// any other error is a failure: a point the suite should see and
	// could not find.
	Err error
}

func (p Point) String() string {
	if p.Label != "" {
		return p.Label
	}
	return p.Iface
}

// ErrNotObservable is returned for an observation a platform cannot make
// (for example a vendor's switch port); specs skip with it.
var ErrNotObservable = errors.New("not observable on this platform")

// NotObservableOn is ErrNotObservable for what the suite cannot do on a
// node it cannot enter (an existing cluster's).
func NotObservableOn(what, node string) error {
	return fmt.Errorf("%s on node %s of an existing cluster: %w", what, node, ErrNotObservable)
}

// captureDrain is how long a stopped capture keeps reading frames that
// were already queued.
const captureDrain = 200 * time.Millisecond

// A Tap captures for the suite on an interface it cannot open a socket
// on itself: Tap returns once the capture runs, and stop ends it and
// hands back every frame, as Capture would have recorded them. One that
// also has MTU(iface) (int, error) gives the point's MTU.
type Tap interface {
	Tap(ctx context.Context, iface string) (stop func() (Frames, error), err error)
}

// Capture records every frame crossing one Point until Stop.
type Capture struct {
	point   Point
	fd      int
	remote  func() (Frames, error) // a capture through Point.Via: its stop
	file    string
	mu      sync.Mutex
	frames  []Frame
	stopped atomic.Bool
	stopAt  atomic.Int64 // UnixNano of Stop
	done    chan struct{}
}

// StartCapture opens an AF_PACKET socket on the point and records frames.
// pcapPath, if set, receives a pcap file of everything captured.
func StartCapture(p Point, pcapPath string) (*Capture, error) {
	switch {
	case p.Err != nil:
		return nil, fmt.Errorf("capture at %s: %w", p, p.Err)
	case p.Iface == "":
		return nil, fmt.Errorf("capture at %s: %w", p, ErrNotObservable)
	}
	if p.Via != nil {
		stop, err := p.Via.Tap(context.Background(), p.Iface)
		if err != nil {
			return nil, fmt.Errorf("capture on %s: %w", p, err)
		}
		return &Capture{point: p, remote: stop, file: pcapPath}, nil
	}
	var fd int
	err := nsexec.Do(p.Netns, func() error {
		ifi, err := net.InterfaceByName(p.Iface)
		if err != nil {
			return err
		}
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return fmt.Errorf("packet socket: %w", err)
		}
		// The kernel strips the 802.1Q tag into packet metadata on some
		// paths (veth, hardware offload): ask for it back as auxdata.
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1); err != nil {
			unix.Close(fd)
			return fmt.Errorf("PACKET_AUXDATA: %w", err)
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
			unix.Close(fd)
			return fmt.Errorf("bind to %s: %w", p.Iface, err)
		}
		tv := unix.NsecToTimeval(int64(100 * time.Millisecond))
		return unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	})
	if err != nil {
		return nil, fmt.Errorf("capture on %s: %w", p, err)
	}
	c := &Capture{point: p, fd: fd, file: pcapPath, done: make(chan struct{})}
	go c.loop()
	return c, nil
}

func (c *Capture) loop() {
	buf := make([]byte, 65536)
	oob := make([]byte, unix.CmsgSpace(int(unsafeSizeofAuxdata)))
	for {
		n, oobn, _, _, err := unix.Recvmsg(c.fd, buf, oob, 0)
		// The receive timeout lets Stop end the loop once the socket is
		// drained, and on a busy link (a ping stream every 20 ms never
		// lets the read time out) once it has drained for captureDrain;
		// the fd is closed here, never under a blocked read.
		drained := c.stopped.Load() && time.Since(time.Unix(0, c.stopAt.Load())) > captureDrain
		if err != nil && (errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR)) && !c.stopped.Load() {
			continue
		}
		if err != nil || drained {
			unix.Close(c.fd)
			close(c.done)
			return
		}
		data := append([]byte(nil), buf[:n]...)
		if tci, ok := vlanFromAuxdata(oob[:oobn]); ok {
			data = insertTag(data, tci)
		}
		f := Decode(data)
		f.Time = time.Now()
		c.mu.Lock()
		c.frames = append(c.frames, f)
		c.mu.Unlock()
	}
}

// Frames returns what has been captured so far (through a Tap: nothing
// before Stop).
func (c *Capture) Frames() Frames {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append(Frames(nil), c.frames...)
}

// Stop ends the capture, writes the pcap file if asked, and returns the frames.
func (c *Capture) Stop() (Frames, error) {
	if c.remote != nil {
		frames, err := c.remote()
		if err != nil {
			return frames, fmt.Errorf("capture on %s: %w", c.point, err)
		}
		c.mu.Lock()
		c.frames = frames
		c.mu.Unlock()
	} else {
		c.stopAt.Store(time.Now().UnixNano())
		c.stopped.Store(true)
		<-c.done
	}
	frames := c.Frames()
	if c.file == "" {
		return frames, nil
	}
	return frames, frames.WritePcap(c.file)
}

// WritePcap writes the frames as a pcap file (Ethernet link type).
func (fs Frames) WritePcap(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := fs.Pcap(f); err != nil {
		return err
	}
	return f.Close()
}

// Pcap writes the frames to w as a pcap stream (Ethernet link type).
func (fs Frames) Pcap(w io.Writer) error {
	pw := pcapgo.NewWriter(w)
	if err := pw.WriteFileHeader(65536, layers.LinkTypeEthernet); err != nil {
		return err
	}
	for _, fr := range fs {
		ci := gopacket.CaptureInfo{Timestamp: fr.Time, CaptureLength: len(fr.Raw), Length: len(fr.Raw)}
		if err := pw.WritePacket(ci, fr.Raw); err != nil {
			return err
		}
	}
	return nil
}

// ReadPcap is the frames of a pcap stream, each at its recorded time.
func ReadPcap(r io.Reader) (Frames, error) {
	pr, err := pcapgo.NewReader(r)
	if err != nil {
		return nil, err
	}
	var out Frames
	for {
		data, ci, err := pr.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		f := Decode(data)
		f.Time = ci.Timestamp
		out = append(out, f)
	}
}

// tpacket_auxdata: status u32, len u32, snaplen u32, mac u16, net u16,
// vlan_tci u16, vlan_tpid u16.
const unsafeSizeofAuxdata = 20

func vlanFromAuxdata(oob []byte) (uint16, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0, false
	}
	for _, m := range msgs {
		if m.Header.Level != unix.SOL_PACKET || m.Header.Type != unix.PACKET_AUXDATA || len(m.Data) < unsafeSizeofAuxdata {
			continue
		}
		status := binary.NativeEndian.Uint32(m.Data[0:4])
		tci := binary.NativeEndian.Uint16(m.Data[16:18])
		if status&unix.TP_STATUS_VLAN_VALID != 0 || tci != 0 {
			return tci, true
		}
	}
	return 0, false
}

// insertTag puts an 802.1Q header back after the two MAC addresses.
func insertTag(frame []byte, tci uint16) []byte {
	if len(frame) < 12 {
		return frame
	}
	out := make([]byte, 0, len(frame)+4)
	out = append(out, frame[:12]...)
	out = binary.BigEndian.AppendUint16(out, 0x8100)
	out = binary.BigEndian.AppendUint16(out, tci)
	return append(out, frame[12:]...)
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// MTU reads the MTU of the point's interface in its namespace.
func (p Point) MTU() (int, error) {
	switch {
	case p.Err != nil:
		return 0, fmt.Errorf("MTU of %s: %w", p, p.Err)
	case p.Iface == "":
		return 0, fmt.Errorf("MTU of %s: %w", p, ErrNotObservable)
	case p.Via != nil:
		m, ok := p.Via.(interface {
			MTU(iface string) (int, error)
		})
		if !ok {
			return 0, fmt.Errorf("MTU of %s: %w", p, ErrNotObservable)
		}
		mtu, err := m.MTU(p.Iface)
		if err != nil {
			return 0, fmt.Errorf("MTU of %s: %w", p, err)
		}
		return mtu, nil
	}
	mtu := 0
	err := nsexec.Do(p.Netns, func() error {
		ifi, err := net.InterfaceByName(p.Iface)
		if err == nil {
			mtu = ifi.MTU
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("MTU of %s: %w", p, err)
	}
	return mtu, nil
}
