package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cozystack/vlan-conformance/framework/platform/cluster"
)

// clusterCommand handles what the cluster tier does without running specs:
// `run --tier=cluster --dry-run` (print every object and node action, in
// order, and exit), `kind-up` (build the platform and keep it: the same
// steps a run takes, so `run` then reuses the cluster) and `kind-down`.
// handled is false when the command is not one of these.
func (d *driver) clusterCommand(ctx context.Context) (code int, handled bool) {
	switch {
	case d.sub == "run" && d.cfg.Tier == "cluster" && d.cfg.Cluster.DryRun:
		c, err := cluster.NewDryRun(d.cfg, d.subj)
		fmt.Print(guideLines(d.subj))
		if err == nil {
			err = cluster.DryRun(os.Stdout, c)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "dry run:", err)
			return 1, true
		}
		return 0, true
	case d.sub == "kind-up":
		d.cfg.Tier, d.cfg.Cluster.KeepCluster = "cluster", true
		c, err := cluster.New(ctx, d.cfg, d.subj)
		if err != nil {
			fmt.Fprintln(os.Stderr, "kind-up:", err)
			return 1, true
		}
		fmt.Printf("kind-up: %s is up and cabled; kubeconfig %s; `make kind-down` deletes it\n", c.Name(), filepath.Join(".cache", "cluster", "kind-"+d.cfg.Cluster.KindName+".kubeconfig"))
		return 0, true
	case d.sub == "kind-down":
		if err := cluster.Down(ctx, d.cfg); err != nil {
			fmt.Fprintln(os.Stderr, "kind-down:", err)
			return 1, true
		}
		return 0, true
	}
	return 0, false
}
