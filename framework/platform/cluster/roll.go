package cluster

import (
	"context"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/cozystack/vlan-conformance/framework/platform"
)

var _ platform.MultusRoll = (*Cluster)(nil)

// RollStaging rolls Multus (multus.RollWithProbes) with the workloads'
// probe pods on n. Each roll has a pair of its own, named by the roll's
// number: the last roll's may still be terminating when the next begins.
func (c *Cluster) RollStaging(ctx context.Context, on bool, n platform.Node, ns, nad string) (platform.Roll, func(context.Context) error, error) {
	c.rolls++
	suffix := strconv.Itoa(c.rolls)
	created := false
	r, err := c.Multus.RollWithProbes(ctx, on, n.Name(), func(ctx context.Context) ([]*corev1.Pod, error) {
		pods, err := c.Workloads.CreateProbes(ctx, ns, nad, n.Name(), suffix)
		created = created || len(pods) > 0
		return pods, err
	})
	if !created {
		return r, nil, err
	}
	return r, func(ctx context.Context) error { return c.Workloads.DeleteProbes(ctx, ns, suffix) }, err
}
