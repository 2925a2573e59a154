package nodenet

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/platform"
)

// Observation is one read-only observation of a node's namespace, by name:
// what a node agent makes for the suite on a node the suite cannot enter
// (an existing cluster's), with the same code the suite runs in a node it
// enters.
type Observation struct {
	What  string `json:"what"`            // one of Observations()
	Iface string `json:"iface,omitempty"` // driver: the link
}

// Agent is the suite's way to a node through a process running on it (the
// node agent, `conformance node observe`): it makes an observation in the
// node's namespace and hands back its value as JSON.
type Agent interface {
	Observe(ctx context.Context, o Observation) ([]byte, error)
}

// agented is a node that may have an agent (nil: none).
type agented interface{ Agent() Agent }

// observations are the reads an agent can make, by Observation.What.
var observations = map[string]func(nn *fabric.NodeNetns, o Observation) (any, error){
	"links":   func(nn *fabric.NodeNetns, _ Observation) (any, error) { return evidence.ReadLinks(nn.Handle) },
	"routes":  func(nn *fabric.NodeNetns, _ Observation) (any, error) { return evidence.ReadRoutes(nn.Handle) },
	"bridges": func(nn *fabric.NodeNetns, _ Observation) (any, error) { return evidence.ReadBridges(nn.Handle) },
	"fdb": func(nn *fabric.NodeNetns, _ Observation) (any, error) {
		return evidence.ReadBridgeFDB(nn.Handle, fabric.BridgeName)
	},
	"driver": func(nn *fabric.NodeNetns, o Observation) (any, error) { return evidence.ReadDriver(nn.Netns, o.Iface) },
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
func Observe(nn *fabric.NodeNetns, o Observation) (any, error) {
	fn, ok := observations[o.What]
	if !ok {
		return nil, fmt.Errorf("no observation %q: one of %s", o.What, strings.Join(Observations(), ", "))
	}
	if o.What == "driver" && o.Iface == "" {
		return nil, fmt.Errorf("observation driver: which link (--iface)?")
	}
	return fn(nn, o)
}

// read is o made in the node's namespace, where the suite enters it, or by
// the node's agent; the node named in its error, or why the suite cannot
// observe the node at all.
func read[T any](ctx context.Context, n platform.Node, what string, o Observation) (T, error) {
	var out T
	if nn := n.Step1(); nn != nil {
		v, err := Observe(nn, o)
		if err != nil {
			return out, fmt.Errorf("node %s: %w", n.Name(), err)
		}
		return v.(T), nil
	}
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
