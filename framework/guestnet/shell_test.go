package guestnet

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/probe"
)

// A guest's ping that printed no summary sent nothing: it is an error,
// never a drop (issue 22, item 4). With a local error per packet the
// summary still counts what was sent.
func TestParsePing(t *testing.T) {
	for _, tc := range []struct {
		out            string
		ran            bool
		sent, received int
		localErr       bool
	}{
		{"3 packets transmitted, 3 received, 0% packet loss, time 2003ms", true, 3, 3, false},
		{"3 packets transmitted, 0 received, 100% packet loss, time 2040ms", true, 3, 0, false},
		{"ping: local error: message too long, mtu=1500\n3 packets transmitted, 0 received, +3 errors, 100% packet loss", true, 3, 0, true},
		{"ping: connect: Network is unreachable", false, 0, 0, false},
		{"sh: 1: ping: not found", false, 0, 0, false},
		{"ping: invalid argument: '-M'", false, 0, 0, false},
	} {
		r, ran := parsePing(tc.out)
		if ran != tc.ran || r.Sent != tc.sent || r.Received != tc.received || (r.Err != nil) != tc.localErr {
			t.Errorf("%q: ran %v, %d/%d, err %v", tc.out, ran, r.Received, r.Sent, r.Err)
		}
	}
}

// shell answers each command by its first word, as a guest's would.
type shell map[string]struct {
	out  string
	code int
}

func (s shell) Run(_ context.Context, cmd string, _ time.Duration) (string, int, error) {
	for prefix, r := range s {
		if strings.HasPrefix(cmd, prefix) {
			return r.out, r.code, nil
		}
	}
	return "sh: 1: " + strings.Fields(cmd)[0] + ": not found", 127, nil
}

type guest struct {
	platform.Guest
	in platform.Inside
}

func (g guest) Name() string           { return "vm-t" }
func (g guest) VLANInterface() string  { return "enp2s0" }
func (g guest) In() platform.Inside    { return g.in }
func (g guest) Unwrap() platform.Guest { return nil }

// Through a shell, the helpers read what the guest's tools print, and
// tell a tool's "no answer" from a tool that failed.
func TestThroughAShell(t *testing.T) {
	ctx := context.Background()
	g := guest{in: platform.Inside{Shell: shell{
		"ip -4 -o addr": {out: "3: enp2s0    inet 203.0.113.10/24 brd 203.0.113.255 scope global enp2s0\n"},
		"ip -4 route":   {out: "default via 192.0.2.1 dev enp1s0\n203.0.113.0/24 dev enp2s0 proto kernel scope link src 203.0.113.10\n"},
		"ping":          {out: "ping: connect: Network is unreachable", code: 2},
		"python3":       {code: 3},
	}}}
	if a, err := VLANAddr(ctx, g); err != nil || a != netip.MustParseAddr("203.0.113.10") {
		t.Errorf("VLANAddr: %v %v", a, err)
	}
	rs, err := Routes(ctx, g)
	if err != nil || len(rs) != 2 || rs[0].Dst.Bits() != 0 || rs[0].Iface != "enp1s0" || rs[1].Scope != "link" {
		t.Errorf("Routes: %+v %v", rs, err)
	}
	if _, err := Ping(ctx, g, netip.MustParseAddr("203.0.113.1")); err == nil || !strings.Contains(err.Error(), "sent no echo request") {
		t.Errorf("a ping that sent nothing must be an error, got %v", err)
	}
	if _, err := ARPProbe(ctx, g, netip.MustParseAddr("203.0.113.1"), time.Second); !errors.Is(err, probe.ErrNoReply) {
		t.Errorf("the ARP tool's exit 3 must be no reply, got %v", err)
	}
	if _, err := MTU(ctx, g, "enp2s0"); err == nil || !strings.Contains(err.Error(), "exited 127") {
		t.Errorf("a missing tool must fail the read, got %v", err)
	}
}

// A guest with no way in is an error naming it, never a panic.
func TestNoWayIn(t *testing.T) {
	if _, err := Routes(context.Background(), guest{}); err == nil || !strings.Contains(err.Error(), "vm-t") {
		t.Errorf("got %v", err)
	}
}
