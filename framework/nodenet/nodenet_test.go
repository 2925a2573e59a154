package nodenet

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/platform"
)

// named is a node known by name only, as an existing cluster's is.
type named struct{ platform.Node }

func (named) Name() string             { return "worker-1" }
func (named) Step1() *fabric.NodeNetns { return nil }

// A node the suite cannot enter is not observable, by name, for each
// helper: its specs skip instead of failing on a nil namespace.
func TestANodeWithoutStep1IsNotObservable(t *testing.T) {
	ctx, n := context.Background(), named{}
	_, ping := Ping(ctx, n, netip.MustParseAddr("203.0.113.1"))
	_, serve := Serve(ctx, n)
	_, fdb := BridgeFDB(ctx, n)
	_, bridges := Bridges(ctx, n)
	del := DeleteBridge(ctx, n, "br-x")
	_, parent := BridgeParent(ctx, n)
	for i, err := range []error{ping, serve, fdb, bridges, del, parent} {
		if !errors.Is(err, evidence.ErrNotObservable) || !strings.Contains(err.Error(), "worker-1") {
			t.Errorf("helper %d: got %v, want not observable, naming the node", i, err)
		}
	}
}
