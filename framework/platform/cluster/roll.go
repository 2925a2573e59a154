package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/node"
)

// cniConfigDir is where the container runtime on a node reads CNI configs.
const cniConfigDir = "/etc/cni/net.d"

var _ platform.MultusRoll = (*Cluster)(nil)

// RollStaging rolls Multus (multus.RollWithProbes) with the workloads'
// probe pods on n. Each roll has a pair of its own, named by the roll's
// number: the last roll's may still be terminating when the next begins.
func (c *Cluster) RollStaging(ctx context.Context, on bool, n platform.Node, ns, nad string) (platform.Roll, func(context.Context) error, error) {
	c.rolls++
	suffix := strconv.Itoa(c.rolls)
	created := false
	var configs []string
	var configsErr error
	r, err := c.Multus.RollWithProbes(ctx, on, n.Name(), func(ctx context.Context) ([]*corev1.Pod, error) {
		// Read first: what the runtime will choose from for the probes.
		if kn, ok := n.(*node.Node); ok && kn.Reachable() {
			configs, configsErr = dirNames(kn.HostPath(cniConfigDir))
		}
		pods, err := c.Workloads.CreateProbes(ctx, ns, nad, n.Name(), suffix)
		created = created || len(pods) > 0
		return pods, err
	})
	r.CNIConfigs = configs
	if configsErr != nil {
		err = errors.Join(err, fmt.Errorf("reading %s's %s: %w", n.Name(), cniConfigDir, configsErr))
	}
	if !created {
		return r, nil, err
	}
	return r, func(ctx context.Context) error { return c.Workloads.DeleteProbes(ctx, ns, suffix) }, err
}

// dirNames lists a directory's entries by name, in order.
func dirNames(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names, err
}
