// Package cluster is the cluster tier: the same Platform, Node, Gateway and
// Guest the lab implements, on Kubernetes with Multus and KubeVirt.
//
//	 host: gateway netns vcf-gw (framework/fabric, as in the lab)
//	+---------------------------+   veth trunk   kind node container vcf-worker (its netns, by PID)
//	| trunk.100 203.0.113.1/24  |<==============>| uplink -> uplink.100 -> br100 203.0.113.2/24
//	| trunk.200 198.51.100.1/24 |   802.1Q       |   Multus thick -> bridge plugin (NAD vlan100)
//	+---------------------------+                |   virt-launcher: KubeVirt bridge binding -> VM
//	                               ==============>| vcf-worker2: the same, br100 203.0.113.3/24
//
// Two ways to get a cluster, one code path: kind (the suite makes it, cables
// the workers, installs Multus and KubeVirt, deletes it afterwards unless
// --keep-cluster), or an existing cluster (--kubeconfig: the suite only
// creates namespaces, NADs, Secrets and VMs, labelled, and deletes them).
// Every step of building is a step of one plan: --dry-run prints the plan
// and the guide's objects instead of applying them.
//
// Each part lives in a package named after what it models, and owns its
// state; Cluster holds only what they share (the API clients, the nodes,
// the gateway) and composes them:
//
//	kind/      the kind cluster (kind's Go package)
//	cabling/   the trunk into each node netns, the guide's step 1
//	multus/    Multus and the staging of /opt/cni/bin (installer, stager)
//	kubevirt/  the operator, the CR, emulation or KVM
//	workload/  a VM or a pod guest behind platform.Guest
//	plan/      the run plan, run by New and printed by --dry-run
//	kube/ wait/ node/ vm/ console/   what the parts share below them
package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/cabling"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/kind"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/kube"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/multus"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/node"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/nodeagent"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/timeline"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/workload"
	"github.com/cozystack/vlan-conformance/framework/subject"
)

// Cluster implements platform.Platform on Kubernetes. The stager
// capability is Multus's and the workload capabilities are the
// workloads': embedded, so the platform offers them as its own.
type Cluster struct {
	cfg      *config.Config
	subj     *subject.Subject // the release under test; nil: the suite's reference subject
	timeouts map[string]time.Duration
	work     string // kubeconfig, serial logs

	kube  *kube.Clients // shared: filled once the plan reaches a cluster
	nodes *node.Set     // shared: cabled, or listed on an existing cluster
	gw    platform.Gateway

	kind    *kind.Cluster // nil: not made or found by this run
	agent   bool          // this run deployed the node agent (nodeagent)
	cabling *cabling.Cabling
	*multus.Multus
	*workload.Workloads

	rolls    int                // RollStaging's calls so far: each roll's probes are its own
	failed   bool               // a spec failed: export kind's logs before deleting
	timeline *timeline.Timeline // milestones, for make bench-cluster
}

var _ platform.Platform = (*Cluster)(nil)
var _ platform.KubeVMs = (*Cluster)(nil)
var _ platform.Stager = (*Cluster)(nil)

func newCluster(cfg *config.Config, subj *subject.Subject) (*Cluster, error) {
	t, err := cfg.Cluster.StageTimeouts()
	if err != nil {
		return nil, err
	}
	work := cfg.WorkDir
	if work == "" {
		work = filepath.Join(".cache", "cluster")
	}
	c := &Cluster{cfg: cfg, subj: subj, timeouts: t, work: work, kube: &kube.Clients{}, nodes: &node.Set{PIDs: map[string]int{}}, cabling: cabling.New(cfg), timeline: timeline.New()}
	c.Multus = multus.New(cfg, subj, t, c.kube)
	c.Workloads = workload.New(cfg, subj, t, work, c.kube, c.nodes, c.cabling, &c.gw, c.timeline)
	return c, nil
}

// TimelineFile is where Close writes the run's milestones (timeline.Mark)
// and VM boots (timeline.Boot), in the report directory; `conformance
// bench --tier=cluster` reads it.
const TimelineFile = "timeline.json"

// New builds the platform: the plan's steps in order. On error, whatever was
// made is removed (and kind's logs exported first).
func New(ctx context.Context, cfg *config.Config, subj *subject.Subject) (*Cluster, error) {
	c, err := newCluster(cfg, subj)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(c.work, 0o755); err != nil {
		return nil, err
	}
	p, err := c.plan()
	if err != nil {
		return nil, err
	}
	p.Progress = os.Stderr
	if err := p.Run(ctx); err != nil {
		c.failed = true
		return nil, errors.Join(err, c.Close(context.WithoutCancel(ctx)))
	}
	return c, nil
}

// NewDryRun makes a Cluster that only plans (no client, nothing touched).
func NewDryRun(cfg *config.Config, subj *subject.Subject) (*Cluster, error) {
	return newCluster(cfg, subj)
}

func (c *Cluster) Name() string {
	if c.cfg.ExistingCluster() {
		return "cluster (existing, " + c.cfg.Kubeconfig + ")"
	}
	return "cluster (kind " + c.cfg.Cluster.KindName + ")"
}

func (c *Cluster) Config() *config.Config       { return c.cfg }
func (c *Cluster) Gateway() platform.Gateway    { return c.gw }
func (c *Cluster) BridgeNodes() []platform.Node { return c.nodes.BridgeNodes() }

// SpecRan: see platform.Timed.
func (c *Cluster) SpecRan(container, spec string, from, to time.Time) {
	c.timeline.Spec(container, spec, from, to)
}

// MacvlanNode is the control plane of a kind cluster, provisioned as
// macvlan users do (address on the VLAN parent, no bridge).
func (c *Cluster) MacvlanNode() platform.Node {
	if c.nodes.Macvlan == nil {
		return nil
	}
	return c.nodes.Macvlan
}

// Untagged reports whether the trunk runs in access mode. The suite cables
// a kind cluster's trunk itself; an existing cluster's is the vendor's,
// tagged per the guide unless declared otherwise (--trunk=untagged).
func (c *Cluster) Untagged() (bool, string) {
	if c.cfg.ExistingCluster() {
		return c.cfg.Cluster.Trunk == "untagged", "access mode, as --trunk=untagged declares the existing cluster's"
	}
	return c.cabling.Untagged()
}

// Trunk is the switch port of a kind node's trunk (the gateway's side),
// or an existing cluster's node's uplink seen through its agent.
func (c *Cluster) Trunk(pn platform.Node) evidence.Point {
	if n := c.nodes.ByName(pn.Name()); n != nil {
		if at, ok := n.Uplink(); ok {
			return at
		}
	}
	return c.cabling.Trunk(pn)
}

// Dump writes, for a failed spec, the workloads' state (workload.Dump) and
// `ip` and `bridge` state from every node and the gateway. It also marks
// the run failed, so Close exports kind's logs.
func (c *Cluster) Dump(ctx context.Context, dir string) error {
	c.failed = true
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var b strings.Builder
	c.Workloads.Dump(ctx, dir, &b)
	for _, n := range c.nodes.Bridge {
		switch {
		case n.Reachable():
			fmt.Fprintf(&b, "node %s: %s\n", n.Name(), node.WriteCommands(ctx, filepath.Join(dir, "node-"+n.Name()+".txt"), n.NetnsPath()))
		case n.Agent() != nil:
			fmt.Fprintf(&b, "node %s: %s\n", n.Name(), nodeagent.Dump(ctx, n.Agent(), filepath.Join(dir, "node-"+n.Name()+".json")))
		}
	}
	if gw := c.cabling.GatewayNetns(); gw != "" {
		fmt.Fprintf(&b, "gateway: %s\n", node.WriteCommands(ctx, filepath.Join(dir, "gateway.txt"), gw))
	}
	return os.WriteFile(filepath.Join(dir, "index.txt"), []byte(b.String()), 0o644)
}

// Close deletes what the run made, in reverse: VMs and namespaces (or
// single objects in namespaces it did not make), the links in the nodes
// and the gateway netns, then the kind cluster unless it was found, not
// made, or --keep-cluster. kind's logs go to the report dir first if a
// spec failed.
func (c *Cluster) Close(ctx context.Context) error {
	c.timeline.Mark(timeline.Lane)
	var errs []error
	if err := os.MkdirAll(c.cfg.ReportDir, 0o755); err == nil {
		errs = append(errs, c.timeline.WriteFile(filepath.Join(c.cfg.ReportDir, TimelineFile)))
	}
	if c.kube.Connected() {
		errs = append(errs, c.Workloads.Close(ctx))
		if c.agent {
			errs = append(errs, nodeagent.Remove(ctx, c.kube))
		}
	}
	errs = append(errs, c.cabling.Close())
	if c.kind != nil {
		if c.failed {
			dir := filepath.Join(c.cfg.ReportDir, "kind-logs")
			if err := c.kind.ExportLogs(dir); err != nil {
				errs = append(errs, fmt.Errorf("kind export logs: %w", err))
			}
		}
		if c.kind.Created && !c.cfg.Cluster.KeepCluster {
			errs = append(errs, c.kind.Delete(c.kube.Kubeconfig))
		}
	}
	return errors.Join(errs...)
}

// Down removes what `kind-up` left: the links in the nodes, the gateway
// netns and the kind cluster.
func Down(ctx context.Context, cfg *config.Config) error {
	k, err := kind.Find(cfg.Cluster.KindName, cfg.Cluster.Runtime)
	if err != nil {
		return err
	}
	containers, err := k.Containers()
	if err != nil {
		return err
	}
	var errs []error
	var pids []int
	for _, c := range containers {
		pid, err := kind.PID(ctx, cfg.Cluster.Runtime, c.Name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		pids = append(pids, pid)
	}
	errs = append(errs, cabling.Down(pids), k.Delete(""))
	return errors.Join(errs...)
}
