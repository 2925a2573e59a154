package main

import (
	"bytes"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/nodenet"
	"github.com/cozystack/vlan-conformance/framework/nsexec"
)

// The agent's capture is the suite's own, run where the agent is: it says
// when it captures, records until its stdin ends, and hands back pcap the
// suite reads into the frames it would have recorded itself.
func TestTheAgentCapturesUntilItsStdinEnds(t *testing.T) {
	a := startAgent(t, "test-agent-capture", func(stdin io.Reader, stdout, stderr io.Writer) int {
		return capture(stdin, stdout, stderr, "lo", time.Minute)
	})
	ns, stdout, stderr, feed, code := a.ns, a.stdout, a.stderr, a.feed, a.code
	for deadline := time.Now().Add(10 * time.Second); !strings.HasPrefix(stderr.String(), nodenet.Capturing+"lo"); {
		if time.Now().After(deadline) {
			t.Fatalf("the agent never said it captures: %q", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := nsexec.Do(ns.Path, func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Sendto(fd, []byte("vcf"), 0, &unix.SockaddrInet4{Port: 9, Addr: [4]byte{127, 0, 0, 1}})
	}); err != nil {
		t.Fatal(err)
	}
	feed.Close()
	if c := <-code; c != 0 {
		t.Fatalf("exit %d: %s", c, stderr.String())
	}
	frames, err := evidence.ReadPcap(strings.NewReader(stdout.String()))
	if err != nil {
		t.Fatal(err)
	}
	var udp int
	for _, f := range frames {
		if bytes.HasSuffix(f.Raw, []byte("vcf")) && !f.Time.IsZero() {
			udp++
		}
	}
	if udp == 0 {
		t.Errorf("%d frames, none the datagram sent on lo", len(frames))
	}
}

// An agent asked for nothing it knows exits 2, naming what it knows.
func TestTheAgentRefusesAnUnknownRequest(t *testing.T) {
	var out, errb bytes.Buffer
	for _, args := range [][]string{nil, {"listen"}, {"capture"}, {"observe"}, {"capture", "--iface=lo", "extra"}} {
		if code := node(strings.NewReader(""), &out, &errb, args); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	if !strings.Contains(errb.String(), "observe {bridges|delete-bridge|driver|fdb|links|ping|routes}") {
		t.Errorf("usage: %s", errb.String())
	}
}

// syncBuffer is a buffer one goroutine writes while another reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The agent's TCP service says where it listens, prints each peer it
// accepts, and stops when its stdin ends.
func TestTheAgentServesUntilItsStdinEnds(t *testing.T) {
	a := startAgent(t, "test-agent-serve", func(stdin io.Reader, stdout, stderr io.Writer) int {
		return serve(stdin, stdout, stderr, netip.MustParseAddr("127.0.0.1"), time.Minute)
	})
	ns, stdout, stderr, feed, code := a.ns, a.stdout, a.stderr, a.feed, a.code
	var at netip.AddrPort
	for deadline := time.Now().Add(10 * time.Second); !at.IsValid(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the agent never said where it serves: %q", stderr.String())
		}
		at, _ = netip.ParseAddrPort(strings.TrimSpace(strings.TrimPrefix(stderr.String(), nodenet.Serving)))
	}
	var local netip.AddrPort
	if err := nsexec.Do(ns.Path, func() error {
		c, err := net.Dial("tcp4", at.String())
		if err == nil {
			local = c.LocalAddr().(*net.TCPAddr).AddrPort()
			c.Close()
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(stdout.String(), local.String()); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the agent never printed the peer %s: %q", local, stdout.String())
		}
	}
	feed.Close()
	if c := <-code; c != 0 {
		t.Fatalf("exit %d: %s", c, stderr.String())
	}
}

// agentRun is an agent command running in a network namespace of its own.
type agentRun struct {
	ns             *fabric.Namespace
	stdout, stderr *syncBuffer
	feed           *io.PipeWriter // its stdin: closing it ends the command
	code           chan int
}

// startAgent runs cmd on a thread in a new network namespace.
func startAgent(t *testing.T, name string, cmd func(stdin io.Reader, stdout, stderr io.Writer) int) agentRun {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: makes a network namespace")
	}
	ns, err := fabric.NewNamespace(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Delete() })
	stdin, feed := io.Pipe()
	a := agentRun{ns: ns, stdout: &syncBuffer{}, stderr: &syncBuffer{}, feed: feed, code: make(chan int, 1)}
	go nsexec.Do(ns.Path, func() error {
		a.code <- cmd(stdin, a.stdout, a.stderr)
		return nil
	})
	return a
}
