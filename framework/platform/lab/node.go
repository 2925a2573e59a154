package lab

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/fabric"
)

// node is a lab node: a netns from the fabric plus its own /opt/cni/bin (a
// directory of links to the real plugin binaries, so one node can lack one;
// once staged, the stager's copies of its plugins, see stager.go).
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

func (n *node) WithoutPlugin(_ context.Context, plugin string) (func() error, error) {
	if subjectFor(n.lab.cfg).keepPlugins {
		return func() error { return nil }, nil
	}
	// Moved aside by rename, not removed: the entry is a link to
	// --plugin-dir, or the stager's copy once the node is staged, and
	// restore puts back whichever it was.
	p := filepath.Join(n.binDir, plugin)
	aside := filepath.Join(filepath.Dir(n.binDir), ".vcf-without-"+plugin)
	if err := os.Rename(p, aside); err != nil {
		return nil, err
	}
	return func() error { return os.Rename(aside, p) }, nil
}

// Step1 is the node's netns as the fabric cabled it.
func (n *node) Step1() *fabric.NodeNetns { return n.fab }
