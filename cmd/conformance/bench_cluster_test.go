package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cozystack/vlan-conformance/framework/platform/cluster"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/timeline"
	"github.com/cozystack/vlan-conformance/framework/report"
)

// bench-cluster.md from a run's JUnit and timeline, read by the parsers the
// driver uses: the goals judged on both sides, the specs slowest first and
// every boot with their sum.
func TestRenderBenchCluster(t *testing.T) {
	dir := filepath.Join("testdata", "bench-cluster")
	specs, err := report.ReadJUnit(filepath.Join(dir, "junit.xml"))
	if err != nil {
		t.Fatal(err)
	}
	tl, err := timeline.ReadFile(filepath.Join(dir, cluster.TimelineFile))
	if err != nil {
		t.Fatal(err)
	}
	md := renderBenchCluster(benchClusterRun{Workload: "vm", Timeline: tl, Specs: specs, Total: 14 * time.Minute, Base: 1 << 30, Peak: 3 << 30})
	rows := map[string]string{}
	for _, l := range strings.Split(md, "\n") {
		if f := strings.SplitN(l, " | ", 2); len(f) == 2 {
			rows[strings.TrimPrefix(f[0], "| ")] = f[1]
		}
	}
	for row, want := range map[string][]string{
		"KubeVirt Available":                     {"330 s", "270 s after nodes; goal ≤ 5 min: met"},
		"first guest logged in (serial console)": {"420 s", "90 s after kubevirt; goal ≤ 60 s: missed"},
		// Re-creations logged in 30.5, 40 and 62 s after their deletes.
		"slowest re-created VM (delete to guest logged in again)": {"62.0 s", "goal ≤ 45 s: missed"},
		"median re-created VM (delete to guest logged in again)":  {"40.0 s (of 3)", "goal ≤ 45 s: met"},
		"whole run (driver start to exit, cluster deleted)":       {"840 s", "goal for the VM lane ≤ 15 min: met"},
		"peak memory in use on the machine":                       {"3072 MiB", "2048 MiB above the 1024 MiB"},
	} {
		got, ok := rows[row]
		if !ok {
			t.Errorf("no row %q in:\n%s", row, md)
			continue
		}
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("row %q is %q: no %q", row, got, w)
			}
		}
	}

	specTable := section(t, md, "## Specs, slowest first")
	lines := strings.Split(strings.TrimSpace(specTable), "\n")
	// Title, blank, header, rule, then the slowest: ARP-01, its "|" escaped.
	if len(lines) != 9 || !strings.HasPrefix(lines[4], `| [It] Re-creating a VM on the cluster [ARP-01] gives its VLAN NIC a fresh MAC \| VMI status`) || !strings.HasSuffix(lines[4], "| passed | 140.4 |") {
		t.Fatalf("spec table, want ARP-01 (140.4 s) first:\n%s", specTable)
	}
	for i, want := range []string{"[VLAN-01]", "[BeforeSuite]", "[VLAN-03]"} {
		if !strings.Contains(lines[5+i], want) {
			t.Errorf("spec row %d is %q, want %s (slowest first)", 2+i, lines[5+i], want)
		}
	}
	if !strings.Contains(lines[5], "| 12.5 |") || !strings.Contains(lines[7], "| failed | 3.0 |") {
		t.Errorf("spec rows lost their figures:\n%s", specTable)
	}
	if lines[8] != "| **total (4 specs)** | | 159.0 |" {
		t.Errorf("total row %q, want 159 s over 4 specs", lines[8])
	}

	order := section(t, md, "## Containers in the order they ran")
	for _, want := range []string{
		"| A VM bridged onto VLAN 100 through br100 | 420 | 436 | 16.0 | 2 |",
		"| Re-creating a VM on the cluster | 460 | 600 | 140.4 | 1 |",
		"| A node provisioned for macvlan | 601 | 604 | 3.0 | 1 |",
	} {
		if !strings.Contains(order, want) {
			t.Errorf("no %q in the order:\n%s", want, order)
		}
	}
	if strings.Index(order, "br100") > strings.Index(order, "Re-creating") {
		t.Errorf("containers not in the order they began:\n%s", order)
	}

	boots := section(t, md, "## VM boots")
	for _, want := range []string{
		"| vlan-01/vm-a | start | 345 | 55.0 | 75.0 | 90.0 |",
		"| arp/vm-b | re-create | 600 | 20.0 | 30.5 | 41.0 |",
		"Sum of boot time: 251.0 s over 4 boots",
		"at most 2 at once, the boots alone take at least 126 s of the lane",
	} {
		if !strings.Contains(boots, want) {
			t.Errorf("no %q in the boots:\n%s", want, boots)
		}
	}
	// In the order they began, not the order they ended.
	if strings.Index(boots, "arp/vm-b") > strings.Index(boots, "recreate/vm-recreate") {
		t.Errorf("boots not in the order they began:\n%s", boots)
	}
}

// A pod run has no VM goals to judge and says why, rather than "missed".
func TestRenderBenchClusterPods(t *testing.T) {
	md := renderBenchCluster(benchClusterRun{Workload: "pod", Total: 30 * time.Minute})
	for _, want := range []string{
		"| slowest re-created VM (delete to guest logged in again) | none in a pod run |",
		"a pod run: the VM lane's goal does not apply",
		"No spec times: the run's JUnit was not read, or lists no spec.",
		"None recorded (a run from before they were, or one that ran no spec).",
		"None in a pod run.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("no %q in:\n%s", want, md)
		}
	}
	if strings.Contains(md, "missed") {
		t.Errorf("a pod run judged against the VM goals:\n%s", md)
	}
}

// A re-creation that never logged in misses the goal, whatever the others.
func TestRecreationNeverLoggedInMisses(t *testing.T) {
	rows := recreations([]timeline.Boot{
		{VM: "a/x", Kind: timeline.BootRecreate, VMI: 10, Login: 20},
		{VM: "a/y", Kind: timeline.BootRecreate, VMI: 30},
		{VM: "a/z", Kind: timeline.BootStart, VMI: 90, Login: 120},
	}, true)
	if rows[0][1] != "1 of 2 never logged in" || !strings.HasSuffix(rows[0][2], "missed") {
		t.Errorf("slowest %q", rows[0])
	}
	if rows[1][1] != "20.0 s (of 1)" || !strings.HasSuffix(rows[1][2], "met") {
		t.Errorf("median %q", rows[1])
	}
}

// section is md from the line starting with title to the next "## ".
func section(t *testing.T, md, title string) string {
	t.Helper()
	i := strings.Index(md, title)
	if i < 0 {
		t.Fatalf("no %q in:\n%s", title, md)
	}
	s := md[i:]
	if j := strings.Index(s[1:], "\n## "); j >= 0 {
		s = s[:j+1]
	}
	return s
}

// A soak's run line: the lane's figures against its goals, and what the
// boots alone take at most as many at a time as the run recorded.
func TestLaneFigures(t *testing.T) {
	tl, err := timeline.ReadFile(filepath.Join("testdata", "bench-cluster", cluster.TimelineFile))
	if err != nil {
		t.Fatal(err)
	}
	got := laneFigures(tl)
	for _, want := range []string{
		"first login 90 s after KubeVirt (goal ≤ 60 s: missed)",
		"re-created VMs: median 40.0 s (of 3), slowest 62.0 s (goal ≤ 45 s)",
		"251.0 s over 4 boots",
		"at most 2 at once, the boots alone take at least 126 s of the lane",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in %q", want, got)
		}
	}
	if none := laneFigures(timeline.Run{}); !strings.Contains(none, "its specs never ended") {
		t.Errorf("a lane without milestones: %q", none)
	}
	// A report from before the run recorded it claims no floor.
	tl.SideBySide = 0
	if old := laneFigures(tl); !strings.Contains(old, "how many booted at once was not recorded") || strings.Contains(old, "at least") {
		t.Errorf("a lane without side_by_side: %q", old)
	}
}
