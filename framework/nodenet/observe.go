package nodenet

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/probe"
)

// Observation is one observation of a node's namespace, by name: what a
// node agent makes for the suite on a node the suite cannot enter (an
// existing cluster's), with the same code the suite runs in a node it
// enters. All are read-only but delete-bridge, a spec's cleanup of the
// bridge its NAD made the bridge plugin create (VLAN-14's).
type Observation struct {
	What  string `json:"what"`            // one of Observations()
	Iface string `json:"iface,omitempty"` // driver: the link
	// ping: to whom, how
	To   netip.Addr         `json:"to,omitzero"`
	Ping *probe.PingOptions `json:"ping,omitempty"`
}

// Agent is the suite's way to a node through a process running on it (the
// node agent, `conformance node observe`): it makes an observation in the
// node's namespace and hands back its value as JSON.
type Agent interface {
	Observe(ctx context.Context, o Observation) ([]byte, error)
}

// Capturing is what an agent capturing on a node's link (`conformance
// node capture`) says on stderr once its socket is bound: the suite starts
// what it captures for only then.
const Capturing = "capturing on "

// Serving is what an agent's TCP service (`conformance node serve`) says
// on stderr once it listens, followed by its address and port.
const Serving = "serving on "

// A Server offers a TCP service on a node's address for the suite, where
// the suite cannot open a socket in the node itself.
type Server interface {
	Serve(ctx context.Context, addr netip.Addr) (probe.Service, error)
}

// agented is a node that may have an agent (nil: none).
type agented interface{ Agent() Agent }

// observations are what an agent can make, by Observation.What.
var observations = map[string]func(ctx context.Context, nn *fabric.NodeNetns, o Observation) (any, error){
	"links": func(_ context.Context, nn *fabric.NodeNetns, _ Observation) (any, error) {
		return evidence.ReadLinks(nn.Handle)
	},
	"routes": func(_ context.Context, nn *fabric.NodeNetns, _ Observation) (any, error) {
		return evidence.ReadRoutes(nn.Handle)
	},
	"bridges": func(_ context.Context, nn *fabric.NodeNetns, _ Observation) (any, error) {
		return evidence.ReadBridges(nn.Handle)
	},
	"fdb": func(_ context.Context, nn *fabric.NodeNetns, _ Observation) (any, error) {
		return evidence.ReadBridgeFDB(nn.Handle, fabric.BridgeName)
	},
	"driver": func(_ context.Context, nn *fabric.NodeNetns, o Observation) (any, error) {
		return evidence.ReadDriver(nn.Netns, o.Iface)
	},
	"delete-bridge": func(_ context.Context, nn *fabric.NodeNetns, o Observation) (any, error) {
		return struct{}{}, fabric.DeleteBridge(nn.Handle, nn.Spec.Name, o.Iface)
	},
	"ping": func(ctx context.Context, nn *fabric.NodeNetns, o Observation) (any, error) {
		res, err := probe.Ping(ctx, nn.Netns, o.To, func(p *probe.PingOptions) { *p = *o.Ping })
		return pingReply{Sent: res.Sent, Received: res.Received, Replies: res.Replies, Err: errText(res.Err)}, err
	},
}

// pingReply is a probe.PingResult as JSON carries it: its send error as
// text.
type pingReply struct {
	Sent, Received int
	Replies        []time.Time
	Err            string
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Observations names what an agent can observe.
func Observations() []string {
	out := make([]string, 0, len(observations))
	for k := range observations {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Observe makes o in the namespace nn: the suite's in a node it entered,
// the agent's in its own (Netns "", a handle in the current namespace).
func Observe(ctx context.Context, nn *fabric.NodeNetns, o Observation) (any, error) {
	fn, ok := observations[o.What]
	if !ok {
		return nil, fmt.Errorf("no observation %q: one of %s", o.What, strings.Join(Observations(), ", "))
	}
	switch {
	case (o.What == "driver" || o.What == "delete-bridge") && o.Iface == "":
		return nil, fmt.Errorf("observation %s: which link (--iface)?", o.What)
	case o.What == "ping" && (!o.To.Is4() || o.Ping == nil):
		return nil, fmt.Errorf("observation ping: to which IPv4 address, how (--to, --ping)?")
	}
	return fn(ctx, nn, o)
}

// read is o made in the node's namespace, where the suite enters it, or by
// the node's agent; the node named in its error, or why the suite cannot
// observe the node at all.
func read[T any](ctx context.Context, n platform.Node, what string, o Observation) (T, error) {
	var out T
	if nn := n.Step1(); nn != nil {
		v, err := Observe(ctx, nn, o)
		if err != nil {
			return out, fmt.Errorf("node %s: %w", n.Name(), err)
		}
		return v.(T), nil
	}
	return remote[T](ctx, n, what, o)
}

// remote is o made by the node's agent.
func remote[T any](ctx context.Context, n platform.Node, what string, o Observation) (T, error) {
	var out T
	a, ok := n.(agented)
	if !ok || a.Agent() == nil {
		return out, evidence.NotObservableOn(what, n.Name())
	}
	raw, err := a.Agent().Observe(ctx, o)
	if err != nil {
		return out, fmt.Errorf("node %s, through its agent: %w", n.Name(), err)
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return out, fmt.Errorf("node %s: the agent's %s: %w", n.Name(), o.What, err)
	}
	return out, nil
}

// Step1Links finds step 1 in a node's links: the port of br100 that
// carries the VLAN (uplink.100; on an access-mode trunk the uplink itself)
// and the uplink under it, where the node's VLAN frames leave it. A pod's
// port is a veth the bridge plugin made; the uplink of an access-mode
// trunk is the port that is not one (or, on kind, the suite's "uplink").
func Step1Links(links map[string]evidence.Link) (parent, uplink string, err error) {
	var vlans, others []evidence.Link
	for _, l := range links {
		switch {
		case l.Master != fabric.BridgeName:
		case l.Kind == "vlan":
			vlans = append(vlans, l)
		case l.Kind != "veth" || l.Name == fabric.UplinkName:
			others = append(others, l)
		}
	}
	switch {
	case len(vlans) == 1 && vlans[0].Parent != "":
		return vlans[0].Name, vlans[0].Parent, nil
	case len(vlans) == 0 && len(others) == 1:
		return others[0].Name, others[0].Name, nil
	}
	return "", "", fmt.Errorf("%s has %d VLAN sub-interfaces and %d other ports that are no pod's: no one uplink", fabric.BridgeName, len(vlans), len(others))
}
