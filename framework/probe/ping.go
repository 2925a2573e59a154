// Package probe is where ping lives: ICMP echo (a run of them or a
// continuous stream), ARP and TCP sent from inside a network namespace,
// in-process: no fork per probe (each `ip netns exec ping` costs 0.1-0.3 s
// in the TCG lab VM), millisecond timestamps. Its results and options are
// what every platform's nodes, guests and gateway speak, a cluster VM's
// console ping included.
package probe

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"

	"github.com/cozystack/vlan-conformance/framework/nsexec"
)

// PingResult is what one ping run observed.
type PingResult struct {
	Sent, Received int
	Replies        []time.Time
	Err            error // a local send error (e.g. EMSGSIZE), nil otherwise
}

// Succeeded reports whether at least one reply came back.
func (r PingResult) Succeeded() bool { return r.Received > 0 }

// PingOptions tune a ping.
type PingOptions struct {
	Count    int
	Interval time.Duration
	Timeout  time.Duration // per reply
	Size     int           // ICMP payload bytes
	DontFrag bool
	Iface    string // bind to this interface
}

type PingOption func(*PingOptions)

func WithCount(n int) PingOption              { return func(o *PingOptions) { o.Count = n } }
func WithInterval(d time.Duration) PingOption { return func(o *PingOptions) { o.Interval = d } }
func WithTimeout(d time.Duration) PingOption  { return func(o *PingOptions) { o.Timeout = d } }
func WithPayload(n int) PingOption            { return func(o *PingOptions) { o.Size = n } }
func WithDontFragment() PingOption            { return func(o *PingOptions) { o.DontFrag = true } }
func ViaInterface(name string) PingOption     { return func(o *PingOptions) { o.Iface = name } }

// NewPingOptions applies opts over the defaults (3 probes, 200 ms apart, 1 s
// timeout, 56 bytes).
func NewPingOptions(opts ...PingOption) PingOptions {
	o := PingOptions{Count: 3, Interval: 200 * time.Millisecond, Timeout: time.Second, Size: 56}
	for _, f := range opts {
		f(&o)
	}
	return o
}

var echoID atomic.Uint32

func init() { echoID.Store(uint32(os.Getpid()) & 0x7fff) }

// Ping sends o.Count echo requests to dst from the namespace at nsPath and
// counts the replies. A local send error (e.g. EMSGSIZE for a DF packet
// larger than the interface MTU) is reported in the result, not as err.
func Ping(ctx context.Context, nsPath string, dst netip.Addr, opts ...PingOption) (PingResult, error) {
	o := NewPingOptions(opts...)
	var fd int
	err := nsexec.Do(nsPath, func() error {
		var err error
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP)
		if err != nil {
			return fmt.Errorf("raw ICMP socket: %w", err)
		}
		pmtu := unix.IP_PMTUDISC_DONT
		if o.DontFrag {
			pmtu = unix.IP_PMTUDISC_PROBE // DF set, no local fragmentation, ignore cached PMTU
		}
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, pmtu); err != nil {
			return err
		}
		if o.Iface != "" {
			if err := unix.BindToDevice(fd, o.Iface); err != nil {
				return fmt.Errorf("bind to %s: %w", o.Iface, err)
			}
		}
		return nil
	})
	if err != nil {
		if fd > 0 {
			unix.Close(fd)
		}
		return PingResult{}, err
	}
	defer unix.Close(fd)

	id := int(echoID.Add(1) & 0xffff)
	res := PingResult{}
	to := &unix.SockaddrInet4{Addr: dst.As4()}
	payload := make([]byte, o.Size)
	buf := make([]byte, 65536)
	for seq := 1; seq <= o.Count; seq++ {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		msg := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: id, Seq: seq, Data: payload}}
		wb, err := msg.Marshal(nil)
		if err != nil {
			return res, err
		}
		res.Sent++
		if err := unix.Sendto(fd, wb, 0, to); err != nil {
			res.Err = fmt.Errorf("send to %s: %w", dst, err)
			continue
		}
		deadline := time.Now().Add(o.Timeout)
		if got := awaitReply(fd, buf, dst, id, seq, deadline); got {
			res.Received++
			res.Replies = append(res.Replies, time.Now())
		}
		if seq < o.Count {
			select {
			case <-ctx.Done():
				return res, ctx.Err()
			case <-time.After(o.Interval):
			}
		}
	}
	return res, nil
}

// awaitReply reads ICMP until the echo reply matching id/seq from dst
// arrives or the deadline passes.
func awaitReply(fd int, buf []byte, dst netip.Addr, id, seq int, deadline time.Time) bool {
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		tv := unix.NsecToTimeval(left.Nanoseconds())
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return false
		}
		n, from, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return false
		}
		src, ok := from.(*unix.SockaddrInet4)
		if !ok || netip.AddrFrom4(src.Addr) != dst || n < 20 {
			continue
		}
		ihl := int(buf[0]&0x0f) * 4
		m, err := icmp.ParseMessage(1, buf[ihl:n])
		if err != nil || m.Type != ipv4.ICMPTypeEchoReply {
			continue
		}
		if e, ok := m.Body.(*icmp.Echo); ok && e.ID == id && e.Seq == seq {
			return true
		}
	}
}
