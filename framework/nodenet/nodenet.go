// Package nodenet is what the suite observes and does in a node's network
// namespace as the guide's step 1 cabled it (platform.Node.Step1): ping
// from the node, a TCP service on its VLAN address, br100's forwarding
// database, the node's bridges, a bridge a spec caused deleted, step 1
// redone on a node provisioned for macvlan. One implementation for the
// lab's nodes and a kind cluster's, which are both such a namespace. A
// node the suite cannot enter (an existing cluster's) answers through a
// node agent running on it (Agent: the same code, run there): its reads,
// pings, a TCP service, a spec's bridge deleted; step 1 redone, which no
// agent does, is evidence.ErrNotObservable there.
package nodenet

import (
	"context"
	"errors"
	"net/netip"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/probe"
)

// in is the node's namespace, or why the suite cannot observe what in it.
func in(n platform.Node, what string) (*fabric.NodeNetns, error) {
	if nn := n.Step1(); nn != nil {
		return nn, nil
	}
	return nil, evidence.NotObservableOn(what, n.Name())
}

// Ping pings dst from the node: in its namespace, or by its agent (the
// same probe.Ping, its send error then as text).
func Ping(ctx context.Context, n platform.Node, dst netip.Addr, opts ...probe.PingOption) (probe.PingResult, error) {
	if nn := n.Step1(); nn != nil {
		return probe.Ping(ctx, nn.Netns, dst, opts...)
	}
	o := probe.NewPingOptions(opts...)
	r, err := remote[pingReply](ctx, n, "ping", Observation{What: "ping", To: dst, Ping: &o})
	res := probe.PingResult{Sent: r.Sent, Received: r.Received, Replies: r.Replies}
	if r.Err != "" {
		res.Err = errors.New(r.Err)
	}
	return res, err
}

// Serve offers a TCP service on the node's VLAN address (VLAN-04/05: "a
// host-side service on the parent IP").
func Serve(ctx context.Context, n platform.Node) (probe.Service, error) {
	if nn := n.Step1(); nn != nil {
		return probe.Serve(nn.Netns, n.Address().Addr())
	}
	if a, ok := n.(agented); ok && a.Agent() != nil {
		if s, ok := a.Agent().(Server); ok && n.Address().IsValid() {
			return s.Serve(ctx, n.Address().Addr())
		}
	}
	return nil, evidence.NotObservableOn("a TCP service", n.Name())
}

// BridgeFDB reads what br100 has learned or owns, per port (ARP-06, ARP-08).
func BridgeFDB(ctx context.Context, n platform.Node) ([]evidence.FDBEntry, error) {
	return read[[]evidence.FDBEntry](ctx, n, "the bridge FDB", Observation{What: "fdb"})
}

// Bridges lists the node's bridges and the ports of each (VLAN-14: a NAD
// naming another bridge makes one of its own).
func Bridges(ctx context.Context, n platform.Node) (map[string][]string, error) {
	return read[map[string][]string](ctx, n, "the bridges", Observation{What: "bridges"})
}

// DeleteBridge removes a bridge a spec caused (the bridge plugin makes one
// a NAD names and never removes it).
func DeleteBridge(ctx context.Context, n platform.Node, name string) error {
	_, err := read[struct{}](ctx, n, "deleting a bridge", Observation{What: "delete-bridge", Iface: name})
	return err
}

// BridgeParent redoes step 1 on a node provisioned for macvlan, as netplan
// apply does: br100 over its VLAN sub-interface, its address on br100
// (VLAN-13). A refused enslave leaves the node as it was and wraps the
// kernel's errno; undo returns the node to macvlan.
func BridgeParent(_ context.Context, n platform.Node) (undo func() error, err error) {
	nn, err := in(n, "redoing step 1")
	if err != nil {
		return nil, err
	}
	return fabric.BridgeParent(nn)
}

// Links are the node's interfaces, by name (NODE-01, NODE-03: what step 1
// made of them).
func Links(ctx context.Context, n platform.Node) (map[string]evidence.Link, error) {
	return read[map[string]evidence.Link](ctx, n, "the links", Observation{What: "links"})
}

// Driver is what `ethtool -i` says of one of the node's links (NODE-01's
// evidence names the uplink's NIC: what a vendor's product file declares).
func Driver(ctx context.Context, n platform.Node, iface string) (evidence.Driver, error) {
	return read[evidence.Driver](ctx, n, "the NIC's driver", Observation{What: "driver", Iface: iface})
}

// Routes is the node's main IPv4 table (NODE-02: where its default route
// is).
func Routes(ctx context.Context, n platform.Node) ([]evidence.Route, error) {
	return read[[]evidence.Route](ctx, n, "the routes", Observation{What: "routes"})
}
