package main

import (
	"strings"
	"testing"

	"github.com/cozystack/vlan-conformance/framework/config"
)

// On a cluster that runs pods, the controls that break VMs there, the
// lab's applied to VMs and the cluster's own for a claim about VMs
// (ARP-07), are not run, each saying why: their specs would skip and the
// control look uncaught. The cluster's other controls run; with VMs all do.
func TestSelftestOnPodsRunsNoControlThatBreaksVMs(t *testing.T) {
	for _, workload := range []string{"pod", "vm"} {
		cfg := &config.Config{Tier: "cluster"}
		cfg.Cluster.Workload = workload
		d := &driver{cfg: cfg}
		sawVMOnly := false
		for _, c := range config.ControlsOn("cluster") {
			why := d.notRunReason(c)
			sawVMOnly = sawVMOnly || c.ID == config.CtlARPMACPerVM
			switch wantSkip := c.OnVMs && workload == "pod"; {
			case wantSkip && !strings.Contains(why, "runs pods"):
				t.Errorf("--workload=%s: %s is run (%q), want it not run: it breaks VMs", workload, c.ID, why)
			case !wantSkip && why != "":
				t.Errorf("--workload=%s: %s not run because %q", workload, c.ID, why)
			}
		}
		if !sawVMOnly {
			t.Errorf("%s is not among the cluster's controls", config.CtlARPMACPerVM)
		}
	}
}
