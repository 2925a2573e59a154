package lab

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/probe"
)

// node is a lab node: a netns from the fabric plus its own /opt/cni/bin (a
// directory of links to the real plugin binaries, so one node can lack one).
type node struct {
	lab    *Lab
	fab    *fabric.NodeNetns
	binDir string
}

func newNode(l *Lab, nn *fabric.NodeNetns) (*node, error) {
	src, err := filepath.Abs(l.cfg.PluginDir)
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(l.work, "nodes", nn.Spec.Name, "opt/cni/bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return nil, fmt.Errorf("plugin dir: %w", err)
	}
	for _, e := range entries {
		if err := os.Symlink(filepath.Join(src, e.Name()), filepath.Join(bin, e.Name())); err != nil {
			return nil, err
		}
	}
	return &node{lab: l, fab: nn, binDir: bin}, nil
}

func (n *node) Name() string          { return n.fab.Spec.Name }
func (n *node) CNIBinDir() string     { return n.binDir }
func (n *node) Address() netip.Prefix { return n.fab.Spec.Address }

func (n *node) ParentPoint() evidence.Point {
	return evidence.Point{Netns: n.fab.Netns, Iface: n.fab.Parent, Label: n.fab.Parent + " on " + n.Name()}
}

func (n *node) Ping(ctx context.Context, dst netip.Addr, opts ...probe.PingOption) (probe.PingResult, error) {
	return probe.Ping(ctx, n.fab.Netns, dst, opts...)
}

func (n *node) WithoutPlugin(_ context.Context, plugin string) (func() error, error) {
	if subjectFor(n.lab.cfg).keepPlugins {
		return func() error { return nil }, nil
	}
	p := filepath.Join(n.binDir, plugin)
	target, err := os.Readlink(p)
	if err != nil {
		return nil, err
	}
	if err := os.Remove(p); err != nil {
		return nil, err
	}
	return func() error { return os.Symlink(target, p) }, nil
}

// BridgeFDB lists what br100 has learned or owns, per port.
func (n *node) BridgeFDB(_ context.Context) ([]evidence.FDBEntry, error) {
	out, err := evidence.ReadBridgeFDB(n.fab.Handle, fabric.BridgeName)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Name(), err)
	}
	return out, nil
}

func (n *node) Bridges(_ context.Context) (map[string][]string, error) {
	return evidence.ReadBridges(n.fab.Handle)
}

func (n *node) DeleteBridge(_ context.Context, name string) error {
	return fabric.DeleteBridge(n.fab.Handle, n.Name(), name)
}

func (n *node) BridgeParent(context.Context) (func() error, error) {
	return fabric.BridgeParent(n.fab)
}

func (n *node) Serve(context.Context) (probe.Service, error) {
	return probe.Serve(n.fab.Netns, n.Address().Addr())
}
