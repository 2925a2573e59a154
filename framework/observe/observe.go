// Package observe is what the suite's probes report and how they are asked:
// ping options and results, continuous ping streams, and a gateway's
// neighbour timers. It sits below platform, probe and gateway, which all
// speak it, so none of them has to import another's floor.
package observe

import (
	"net/netip"
	"time"
)

// NeighTimers are the neighbour-table settings that bound how long a stale
// entry can survive (net.ipv4.neigh.<if>.*).
type NeighTimers struct {
	BaseReachable   time.Duration
	DelayFirstProbe time.Duration
	RetransTime     time.Duration
	UcastSolicit    int
	GCStaleTime     time.Duration
	McastSolicit    int // broadcast probes when resolving afresh
	McastResolicit  int // broadcast probes after the unicast ones in PROBE (0: none)
	// ReachableTime is the REACHABLE lifetime the kernel drew for the
	// interface, uniformly from [BaseReachable/2, 3*BaseReachable/2); 0
	// when unknown (it is not a sysctl: the neighbour table reports it).
	ReachableTime time.Duration
}

// NeighProfile is a named set of neighbour timers a fixture declares for
// a gateway; specs derive their bounds from it, never from what the
// gateway happens to run.
type NeighProfile struct {
	Name   string // "tuned", "default"
	Timers NeighTimers
	Source string // where the values come from, for the report
}

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

// Dial is one TCP connection attempt (VLAN-04/05: a host-side service).
type Dial struct {
	Dst       netip.AddrPort
	Connected bool
	// Err is why it did not connect ("i/o timeout", "connection
	// refused", "no route to host"); nil when it did.
	Err  error
	Took time.Duration
}

// Service is a TCP service a node offers on its VLAN address: it accepts
// every connection, records the peer and closes it.
type Service interface {
	Addr() netip.AddrPort
	// Accepted lists the peers it accepted so far.
	Accepted() []netip.AddrPort
	Close() error
}
