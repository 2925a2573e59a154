package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/cozystack/vlan-conformance/framework/nsexec"
)

// Service is a TCP service a node offers on its VLAN address: it accepts
// every connection, records the peer and closes it.
type Service interface {
	Addr() netip.AddrPort
	// Accepted lists the peers it accepted so far.
	Accepted() []netip.AddrPort
	Close() error
}

// listener is a Service inside a namespace. The socket is made on a
// thread in that namespace and stays there; accepting needs no further
// switch.
type listener struct {
	ln       net.Listener
	addr     netip.AddrPort
	mu       sync.Mutex
	accepted []netip.AddrPort
	done     chan struct{}
}

// Serve listens on addr, on a port the kernel picks, in the namespace at
// nsPath.
func Serve(nsPath string, addr netip.Addr) (Service, error) {
	var ln net.Listener
	err := nsexec.Do(nsPath, func() error {
		var err error
		ln, err = net.Listen("tcp4", netip.AddrPortFrom(addr, 0).String())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("TCP service on %s: %w", addr, err)
	}
	s := &listener{ln: ln, addr: ln.Addr().(*net.TCPAddr).AddrPort(), done: make(chan struct{})}
	go s.accept()
	return s, nil
}

func (s *listener) accept() {
	defer close(s.done)
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		peer := c.RemoteAddr().(*net.TCPAddr).AddrPort()
		s.mu.Lock()
		s.accepted = append(s.accepted, netip.AddrPortFrom(peer.Addr().Unmap(), peer.Port()))
		s.mu.Unlock()
		c.Close()
	}
}

func (s *listener) Addr() netip.AddrPort { return s.addr }

func (s *listener) Accepted() []netip.AddrPort {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]netip.AddrPort(nil), s.accepted...)
}

func (s *listener) Close() error {
	err := s.ln.Close()
	<-s.done
	return err
}

// DialResult is one TCP connection attempt (VLAN-04/05: a host-side
// service).
type DialResult struct {
	Dst       netip.AddrPort
	Connected bool
	// Err is why it did not connect ("i/o timeout", "connection
	// refused", "no route to host"); nil when it did.
	Err  error
	Took time.Duration
}

// Dial opens a TCP connection to dst from the namespace at nsPath, within
// timeout, and closes it. A failed connection is the result's Err; err is
// for a dial that could not be tried.
func Dial(ctx context.Context, nsPath string, dst netip.AddrPort, timeout time.Duration) (DialResult, error) {
	d := DialResult{Dst: dst}
	start := time.Now()
	err := nsexec.Do(nsPath, func() error {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		// The socket is made and connected on this thread, in the namespace.
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp4", dst.String())
		if err != nil {
			d.Err = err
			return nil
		}
		d.Connected = true
		return c.Close()
	})
	d.Took = time.Since(start)
	if err != nil {
		return d, err
	}
	if d.Err != nil && ctx.Err() != nil {
		return d, errors.Join(fmt.Errorf("dial %s cut short", dst), ctx.Err())
	}
	return d, nil
}
