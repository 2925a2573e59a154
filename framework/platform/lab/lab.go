// Package lab is the lab tier: nodes, pods and guests are network
// namespaces; attachments are made by the real upstream CNI plugins through
// libcni, as Multus does; the launcher reproduces KubeVirt's bridge binding.
//
//	vcf-gw --trunk--> vcf-node-a: br100 <-CNI veth-> vcf-pod-<vm>: k6t-net1 <-> vcf-vm-<vm>: enp2s0 (VLAN NIC)
//	                                                  eth0-vm 192.0.2.1 <----> enp1s0 192.0.2.10 (pod NIC, default route)
//
// See framework/fabric for the trunk and the nodes.
package lab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/cozystack/vlan-conformance/framework/addresses"
	"github.com/cozystack/vlan-conformance/framework/cni"
	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/gateway"
	"github.com/cozystack/vlan-conformance/framework/platform"
	release "github.com/cozystack/vlan-conformance/framework/subject"
)

// Lab implements platform.Platform with network namespaces.
type Lab struct {
	cfg     *config.Config
	release *release.Subject // the release under test; nil: the suite's reference subject
	fab     *fabric.Fabric
	work    string
	ownWork bool
	bridge  []*node
	macvlan *node
	gw      platform.Gateway

	mu     sync.Mutex
	nads   map[string]string // "ns/name" -> spec.config
	guests map[string]*guest

	multus multus // the stager's replica (stager.go)
}

// New sweeps what a killed run left, then builds the fabric for cfg, the
// release under test (rel, nil without one) staging its nodes' plugins.
func New(ctx context.Context, cfg *config.Config, rel *release.Subject) (*Lab, error) {
	if err := errors.Join(fabric.Sweep(), os.RemoveAll(hostLocalDataDir)); err != nil {
		return nil, fmt.Errorf("sweep leftovers of an earlier run: %w", err)
	}
	l := &Lab{cfg: cfg, release: rel, nads: map[string]string{}, guests: map[string]*guest{}, work: cfg.WorkDir}
	if l.work == "" {
		d, err := os.MkdirTemp("", "vcf-lab-")
		if err != nil {
			return nil, err
		}
		l.work, l.ownWork = d, true
	}
	subnet := netip.MustParsePrefix(cfg.Subnet)
	other := netip.MustParsePrefix(cfg.OtherSubnet)
	gwAddr := netip.PrefixFrom(netip.MustParseAddr(cfg.Gateway), subnet.Bits())
	s := subjectFor(cfg)
	spec := fabric.Spec{
		VLAN: cfg.VLAN, OtherVLAN: cfg.OtherVLAN,
		Gateway:      gwAddr,
		OtherGateway: netip.PrefixFrom(netip.MustParseAddr(cfg.OtherGateway), other.Bits()),
		MTU:          s.mtu,
		Uplink:       cfg.Uplink,
		Nodes: []fabric.NodeSpec{
			{Name: "node-a", Wiring: s.bridgeWiring, Address: addresses.Node(subnet, 0)},
		},
	}
	if !cfg.VendorMode() {
		spec.Standby = addresses.Standby(subnet)
		// A second bridge node so traffic between nodes crosses the trunk, and
		// a node provisioned the way macvlan users do. A single real uplink
		// (vendor mode) carries one node.
		second := s.bridgeWiring
		if second == fabric.BothVLANs {
			// Two nodes bridging VLAN 100 into VLAN 200 would make a loop.
			second = fabric.GuideBridge
		}
		spec.Nodes = append(spec.Nodes,
			fabric.NodeSpec{Name: "node-b", Wiring: second, Address: addresses.Node(subnet, 1)},
			fabric.NodeSpec{Name: "node-m", Wiring: s.macvlanWiring, Address: addresses.Node(subnet, 2)},
		)
	}
	fab, err := fabric.Build(spec)
	if err != nil {
		l.removeWork()
		return nil, err
	}
	l.fab = fab
	for _, nn := range fab.Nodes {
		n, err := newNode(l, nn)
		if err != nil {
			return nil, errors.Join(err, l.Close(ctx))
		}
		if nn.Spec.Name == "node-m" {
			l.macvlan = n
		} else {
			l.bridge = append(l.bridge, n)
		}
	}
	if cfg.VendorMode() {
		l.macvlan = nil
		l.gw = gateway.Vendor{Addr: gwAddr.Addr()}
	} else {
		g, err := gateway.New(fab, cfg.ARPProfile, cfg.SelectedControl().Timers)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("gateway timers: %w", err), l.Close(ctx))
		}
		if cfg.SelectedControl().GatewayIgnoresPings {
			if err := g.IgnorePings(); err != nil {
				return nil, errors.Join(err, l.Close(ctx))
			}
		}
		l.gw = g
	}
	return l, nil
}

func (l *Lab) Name() string {
	if l.cfg.VendorMode() {
		return "lab (vendor uplink " + l.cfg.Uplink + ")"
	}
	return "lab"
}
func (l *Lab) Config() *config.Config    { return l.cfg }
func (l *Lab) Gateway() platform.Gateway { return l.gw }

func (l *Lab) BridgeNodes() []platform.Node {
	var out []platform.Node
	for _, n := range l.bridge {
		out = append(out, n)
	}
	return out
}

// MacvlanNode is nil in vendor mode (one uplink, one node).
func (l *Lab) MacvlanNode() platform.Node {
	if l.macvlan == nil {
		return nil
	}
	return l.macvlan
}

func (l *Lab) Trunk(pn platform.Node) evidence.Point {
	n := pn.(*node)
	if l.cfg.VendorMode() {
		return evidence.Point{Iface: l.cfg.Uplink, Label: "uplink " + l.cfg.Uplink + " (host)"}
	}
	return evidence.Point{Netns: l.fab.Gateway.Path, Iface: fabric.PortName(n.Name()), Label: "trunk (switch port of " + n.Name() + ")"}
}

func (l *Lab) ApplyNAD(_ context.Context, namespace string, nad platform.NAD) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.nads[namespace+"/"+nad.Name] = subjectFor(l.cfg).nadConfig(nad.Config)
	return nil
}

func (l *Lab) nad(namespace, name string) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.nads[namespace+"/"+name]
	if !ok {
		// Multus' wording when the NAD is absent from the pod's namespace.
		return "", fmt.Errorf("cannot find a network-attachment-definition (%s) in namespace (%s)", name, namespace)
	}
	return c, nil
}

func (l *Lab) StartVM(ctx context.Context, spec platform.VMSpec) (platform.Guest, error) {
	ud, err := l.cfg.SelectedControl().BrokenUserData(spec.CloudInit, l.cfg.Gateway)
	if err != nil {
		return nil, err
	}
	spec.CloudInit = ud
	g, err := startGuest(ctx, l, spec)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.guests[tenantName(spec)] = g
	l.mu.Unlock()
	return g, nil
}

func (l *Lab) DeleteVM(ctx context.Context, pg platform.Guest) error {
	g, ok := platform.Own(pg).(*guest)
	if !ok {
		return fmt.Errorf("deleting %s: not a lab guest (%T)", pg.Name(), pg)
	}
	l.mu.Lock()
	delete(l.guests, tenantName(g.spec))
	l.mu.Unlock()
	return g.destroy(ctx)
}

// Dump writes every suite namespace's state with iproute2 (forking is fine
// here: it only runs when a spec failed).
func (l *Lab) Dump(ctx context.Context, dir string) error {
	entries, err := os.ReadDir(fabric.NetnsDir)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), fabric.Prefix) {
			names = append(names, e.Name())
		}
	}
	return evidence.DumpNamespaces(ctx, filepath.Clean(dir), names)
}

// Close deletes every guest, pod and node namespace and the work dir.
func (l *Lab) Close(ctx context.Context) error {
	var errs []error
	l.mu.Lock()
	guests := l.guests
	l.guests = map[string]*guest{}
	l.mu.Unlock()
	for _, g := range guests {
		errs = append(errs, g.destroy(ctx))
	}
	if l.fab != nil {
		errs = append(errs, l.fab.Destroy())
	}
	errs = append(errs, l.closeMultus(), l.removeWork(), os.RemoveAll(hostLocalDataDir))
	return errors.Join(errs...)
}

func (l *Lab) removeWork() error {
	if l.ownWork {
		return os.RemoveAll(l.work)
	}
	return nil
}

// cniRuntime is what every CNI call on node n uses.
func (l *Lab) cniRuntime(n *node) cni.Runtime {
	return cni.Runtime{BinDirs: []string{n.binDir}, CacheDir: filepath.Join(l.work, "cni-cache")}
}
