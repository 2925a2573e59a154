package probe

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"

	"github.com/cozystack/vlan-conformance/framework/nsexec"
)

// Probe is one echo request of a PingStream.
type Probe struct {
	Seq   int
	Sent  time.Time
	Reply time.Time // zero when no reply came back
	Err   error     // a local send error, nil otherwise
}

// Answered reports whether the probe's reply came back.
func (p Probe) Answered() bool { return !p.Reply.IsZero() }

// PingStream is a continuous ping: one echo request every interval, sent
// whether or not the previous one was answered.
type PingStream interface {
	// Probes returns what has been sent so far.
	Probes() []Probe
	// Stop stops sending, waits briefly for outstanding replies and returns
	// every probe. Calling it again returns the same probes.
	Stop() []Probe
}

// maxStreamProbes bounds a stream by the 16-bit echo sequence number (at
// 20 ms that is 21 minutes).
const maxStreamProbes = 0xffff

// Stream is a continuous ping from one namespace: a sender puts an echo
// request on the wire every interval, whether or not the last one was
// answered, and a receiver stamps each reply as it arrives. One socket, no
// fork, monotonic timestamps: an outage shows as a run of unanswered
// probes with millisecond edges.
type Stream struct {
	fd       int
	dst      netip.Addr
	id       int
	interval time.Duration
	linger   time.Duration

	mu     sync.Mutex
	probes []Probe

	stop     chan struct{}
	stopOnce sync.Once
	sent     chan struct{} // closed when the sender has finished
	received chan struct{} // closed when the receiver has finished
	final    []Probe
}

var _ PingStream = (*Stream)(nil)

// StartStream opens a raw ICMP socket in the namespace at nsPath and pings
// dst every interval until Stop. Stop waits up to linger for the replies
// of the last probes.
func StartStream(nsPath string, dst netip.Addr, interval, linger time.Duration) (*Stream, error) {
	if interval <= 0 {
		return nil, fmt.Errorf("ping stream to %s: interval must be positive", dst)
	}
	var fd int
	err := nsexec.Do(nsPath, func() error {
		var err error
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP)
		if err != nil {
			return fmt.Errorf("raw ICMP socket: %w", err)
		}
		// A short receive timeout lets the receiver notice Stop.
		tv := unix.NsecToTimeval(int64(20 * time.Millisecond))
		return unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	})
	if err != nil {
		if fd > 0 {
			unix.Close(fd)
		}
		return nil, err
	}
	s := &Stream{
		fd: fd, dst: dst, id: int(echoID.Add(1) & 0xffff), interval: interval, linger: linger,
		stop: make(chan struct{}), sent: make(chan struct{}), received: make(chan struct{}),
	}
	go s.send()
	go s.receive()
	return s, nil
}

func (s *Stream) send() {
	defer close(s.sent)
	to := &unix.SockaddrInet4{Addr: s.dst.As4()}
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for seq := 1; seq <= maxStreamProbes; seq++ {
		wb, err := (&icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: s.id, Seq: seq, Data: make([]byte, 56)}}).Marshal(nil)
		// Recorded before it leaves: on one CPU the whole round trip can
		// complete inside sendto (veth hands the frame to a softirq that
		// runs before sendto returns), and the reply must find its probe.
		s.mu.Lock()
		s.probes = append(s.probes, Probe{Seq: seq, Sent: time.Now()})
		s.mu.Unlock()
		if err == nil {
			err = unix.Sendto(s.fd, wb, 0, to)
		}
		if err != nil {
			s.mu.Lock()
			s.probes[seq-1].Err = fmt.Errorf("send to %s: %w", s.dst, err)
			s.mu.Unlock()
		}
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
	}
}

func (s *Stream) receive() {
	defer close(s.received)
	buf := make([]byte, 65536)
	var lingerUntil time.Time
	for {
		if lingerUntil.IsZero() {
			select {
			case <-s.sent:
				lingerUntil = time.Now().Add(s.linger)
			default:
			}
		}
		if !lingerUntil.IsZero() && (time.Now().After(lingerUntil) || s.allAnswered()) {
			return
		}
		n, from, err := unix.Recvfrom(s.fd, buf, 0)
		at := time.Now()
		if err != nil {
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				continue
			}
			return
		}
		src, ok := from.(*unix.SockaddrInet4)
		if !ok || netip.AddrFrom4(src.Addr) != s.dst || n < 20 {
			continue
		}
		ihl := int(buf[0]&0x0f) * 4
		m, err := icmp.ParseMessage(1, buf[ihl:n])
		if err != nil || m.Type != ipv4.ICMPTypeEchoReply {
			continue
		}
		e, ok := m.Body.(*icmp.Echo)
		if !ok || e.ID != s.id {
			continue
		}
		s.mu.Lock()
		if i := e.Seq - 1; i >= 0 && i < len(s.probes) && s.probes[i].Reply.IsZero() {
			s.probes[i].Reply = at
		}
		s.mu.Unlock()
	}
}

func (s *Stream) allAnswered() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.probes {
		if p.Reply.IsZero() && p.Err == nil {
			return false
		}
	}
	return true
}

// Probes returns a copy of what has been sent so far.
func (s *Stream) Probes() []Probe {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Probe(nil), s.probes...)
}

// Stop stops sending, lets the last replies land (up to linger) and
// closes the socket.
func (s *Stream) Stop() []Probe {
	s.stopOnce.Do(func() {
		close(s.stop)
		<-s.sent
		<-s.received
		unix.Close(s.fd)
		s.final = s.Probes()
	})
	return s.final
}
