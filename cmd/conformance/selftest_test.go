package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/controls"
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
		for _, c := range controls.On("cluster") {
			why := d.notRunReason(c)
			sawVMOnly = sawVMOnly || c.ID == "ARP-07/mac-kept-per-vm-object"
			switch wantSkip := c.OnVMs && workload == "pod"; {
			case wantSkip && !strings.Contains(why, "runs pods"):
				t.Errorf("--workload=%s: %s is run (%q), want it not run: it breaks VMs", workload, c.ID, why)
			case !wantSkip && why != "":
				t.Errorf("--workload=%s: %s not run because %q", workload, c.ID, why)
			}
		}
		if !sawVMOnly {
			t.Errorf("ARP-07/mac-kept-per-vm-object is not among the cluster's controls")
		}
	}
}

// --only runs the named controls, by ID or by claim, in the controls' own
// order; a name that is no control of the tier is refused before anything
// runs, and without --only every control of the tier is selected.
func TestSelftestOnly(t *testing.T) {
	for _, tc := range []struct {
		only, want, err string
	}{
		{"", ids(controls.On("cluster")), ""},
		{"VLAN-11/nad-copied-into-vm-namespace,ARP-07", "ARP-07/mac-kept-per-vm-object,VLAN-11/nad-copied-into-vm-namespace", ""},
		{"ARP-03", "ARP-03/gateway-probes-during-boot,ARP-03/gateway-runs-longer-timers", ""},
		{"ARP-03, ARP-03/gateway-runs-longer-timers", "ARP-03/gateway-probes-during-boot,ARP-03/gateway-runs-longer-timers", ""},
		{"VLAN-99,ARP-07", "", "--only VLAN-99: no control"},
		{"STG-01", "", "--only STG-01: no control of --tier=cluster"},
	} {
		d := &driver{cfg: &config.Config{Tier: "cluster"}, only: tc.only}
		got, err := d.selectedControls()
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("--only=%q: error %v, want one containing %q", tc.only, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("--only=%q: %v", tc.only, err)
		case tc.err == "" && ids(got) != tc.want:
			t.Errorf("--only=%q: %s, want %s", tc.only, ids(got), tc.want)
		}
	}
}

// Under a --time-budget the cluster's own controls run first, in their
// order, and a control starts only while the longest one so far would still
// end within the budget; without a budget every control starts.
func TestSelftestTimeBudget(t *testing.T) {
	cs := controls.On("cluster")
	clusterControlsFirst(cs)
	seenLab := false
	for _, c := range cs {
		if c.Tier != "cluster" {
			seenLab = true
		} else if seenLab {
			t.Errorf("%s, a cluster control, runs after a lab control's run on VMs", c.ID)
		}
	}
	for _, tc := range []struct {
		budget, spent, longest time.Duration
		fits                   bool
	}{
		{0, 5 * time.Hour, time.Hour, true},
		{30 * time.Minute, 0, 0, true},
		{30 * time.Minute, 27 * time.Minute, 3 * time.Minute, true},
		{30 * time.Minute, 27 * time.Minute, 4 * time.Minute, false},
		{30 * time.Minute, 31 * time.Minute, 0, false},
	} {
		if got := fits(tc.budget, tc.spent, tc.longest); got != tc.fits {
			t.Errorf("budget %s, %s spent, longest %s: fits %v, want %v", tc.budget, tc.spent, tc.longest, got, tc.fits)
		}
	}
	// What the next control may take: the longest of its own tier, else
	// the longest of any (CI: ARP-07's 358 s must not keep VLAN-14's
	// 85 s lab control on VMs out when the lab ones took up to 180 s).
	took := durations{}
	if got := took.next("lab"); got != 0 {
		t.Errorf("nothing ran yet: next %s, want 0", got)
	}
	took["cluster"] = 358 * time.Second
	if got := took.next("lab"); got != 358*time.Second {
		t.Errorf("no lab control ran yet: next %s, want the longest of any, 358s", got)
	}
	took["lab"] = 180 * time.Second
	if got := took.next("lab"); got != 180*time.Second {
		t.Errorf("next lab control %s, want the lab controls' longest, 180s", got)
	}
}

// Under a --time-budget the controls on VMs start with those this machine
// ran least recently, never run first, so that a budget too short for all
// of them leaves out different ones from run to run; the cluster's own
// stay in front. The ledger survives a write and a read, and a missing or
// broken one is empty (the registry's order).
func TestLeastRecentlyRunControlsFirst(t *testing.T) {
	cs := controls.On("cluster")
	clusterControlsFirst(cs)
	first := slices.IndexFunc(cs, func(c controls.Control) bool { return c.Tier != "cluster" })
	if first < 0 || len(cs)-first < 3 {
		t.Fatalf("want at least three controls on VMs after the cluster's own, have %s", ids(cs))
	}
	registry := slices.Clone(cs)
	day := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	// The first two on VMs ran, the first of them later; the rest never did.
	led := ledger{cs[first].ID: day.Add(time.Hour), cs[first+1].ID: day}
	path := filepath.Join(t.TempDir(), "selftest", "cluster-vm.json")
	if err := led.write(path); err != nil {
		t.Fatal(err)
	}
	got := slices.Clone(registry)
	read, err := readLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	leastRecentFirst(got, read)
	want := slices.Concat(registry[:first], registry[first+2:], []controls.Control{registry[first+1], registry[first]})
	if ids(got) != ids(want) {
		t.Errorf("order\n%s\nwant\n%s", ids(got), ids(want))
	}
	for _, broken := range []string{"", "{not json"} {
		if broken != "" {
			if err := os.WriteFile(path, []byte(broken), 0o644); err != nil {
				t.Fatal(err)
			}
		} else {
			path = filepath.Join(t.TempDir(), "none.json")
		}
		got := slices.Clone(registry)
		read, err := readLedger(path)
		if (err != nil) != (broken != "") {
			t.Errorf("ledger %q: error %v (none only for a ledger not written yet)", broken, err)
		}
		leastRecentFirst(got, read)
		if ids(got) != ids(registry) {
			t.Errorf("ledger %q: order %s, want the registry's %s", broken, ids(got), ids(registry))
		}
	}
}

// ids lists controls by ID, in their order.
func ids(cs []controls.Control) string {
	var out []string
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return strings.Join(out, ",")
}
