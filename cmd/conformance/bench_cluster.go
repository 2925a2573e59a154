package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cozystack/vlan-conformance/framework/platform/cluster"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/timeline"
)

// Goals for the cluster tier on a 2-core machine with a warm image cache
// (issue 15). Printed beside the figures, never asserted.
const (
	goalKubeVirt = 5 * time.Minute  // KubeVirt Available, after the nodes are Ready
	goalLogin    = 3 * time.Minute  // first guest logged in, after KubeVirt is Available
	goalVMLane   = 20 * time.Minute // the whole VM lane
)

// benchCluster runs the cluster tier with the flags `run` takes and prints
// when it reached each milestone, counted from the start of building the
// platform (the suite writes them: cluster.TimelineFile), the whole run's
// wall time, and the machine's peak memory in use while it ran.
func (d *driver) benchCluster(ctx context.Context) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	tlPath := filepath.Join(d.cfg.ReportDir, cluster.TimelineFile)
	os.Remove(tlPath) // never an earlier run's figures
	mem := sampleMemory(time.Second)
	start := time.Now()
	cmd := child(ctx, self, append([]string{"run"}, d.rawArgs...)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	runErr := cmd.Run()
	total := time.Since(start)
	base, peak := mem.stop()

	marks, err := timeline.ReadFile(tlPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: no milestones from the run:", err)
		marks = map[string]float64{}
	}
	vms := d.cfg.Cluster.Workload == "vm"
	at := func(name string) string {
		if s, ok := marks[name]; ok {
			return fmt.Sprintf("%.0f s", s)
		}
		if !vms && (name == timeline.KubeVirt || name == timeline.KubeVirtAPI || name == timeline.VMI || name == timeline.Login) {
			return "none in a pod run"
		}
		return "not reached"
	}
	lane := fmt.Sprintf("goal for the VM lane ≤ %s: %s", goalVMLane, met(total <= goalVMLane))
	if !vms {
		lane = "a pod run: the VM lane's goal does not apply"
	}
	// after judges the time from one milestone to the next against a goal.
	after := func(from, to string, goal time.Duration) string {
		if !vms {
			return ""
		}
		a, okA := marks[from]
		b, okB := marks[to]
		if !okA || !okB {
			return fmt.Sprintf("goal ≤ %s after %s: not measured", goal, from)
		}
		gap := time.Duration((b - a) * float64(time.Second))
		return fmt.Sprintf("%.0f s after %s; goal ≤ %s: %s", gap.Seconds(), from, goal, met(gap <= goal))
	}
	rows := [][3]string{
		{"kind cluster created (or found)", at(timeline.Cluster), ""},
		{"nodes Ready", at(timeline.Nodes), ""},
		{"Multus rolled out", at(timeline.Multus), ""},
		{"KubeVirt Available", at(timeline.KubeVirt), after(timeline.Nodes, timeline.KubeVirt, goalKubeVirt)},
		{"virt-api's APIService Available (serial consoles reachable)", at(timeline.KubeVirtAPI), ""},
		{"first VMI Ready", at(timeline.VMI), ""},
		{"first guest logged in (serial console)", at(timeline.Login), after(timeline.KubeVirt, timeline.Login, goalLogin)},
		{"specs done", at(timeline.Lane), ""},
		{"whole run (driver start to exit, cluster deleted)", fmt.Sprintf("%.0f s", total.Seconds()), lane},
		{"peak memory in use on the machine", fmt.Sprintf("%d MiB", peak>>20), fmt.Sprintf("%d MiB above the %d MiB in use before the run", (peak-base)>>20, base>>20)},
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Bench: cluster tier (%s)\n\nTimes from the start of building the platform.\n\n| milestone | at | against the goal |\n|---|---|---|\n", d.cfg.Cluster.Workload)
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", r[0], r[1], r[2])
	}
	fmt.Print("\n" + b.String())
	if err := os.WriteFile(filepath.Join(d.cfg.ReportDir, "bench-cluster.md"), []byte(b.String()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
	}
	if runErr != nil {
		fmt.Fprintln(os.Stderr, "bench: the cluster run failed:", runErr)
		return 1
	}
	return 0
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

// memSampler records the machine's memory in use (MemTotal - MemAvailable):
// the kind nodes, KubeVirt and the QEMU guests run in containers outside
// this process tree, so the machine's figure is the one that counts.
type memSampler struct {
	done chan struct{}
	out  chan [2]uint64
}

func sampleMemory(every time.Duration) *memSampler {
	m := &memSampler{done: make(chan struct{}), out: make(chan [2]uint64, 1)}
	go func() {
		base, _ := memInUse()
		peak := base
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-m.done:
				m.out <- [2]uint64{base, peak}
				return
			case <-t.C:
				if v, err := memInUse(); err == nil && v > peak {
					peak = v
				}
			}
		}
	}()
	return m
}

// stop returns the memory in use when sampling began and its peak, in bytes.
func (m *memSampler) stop() (base, peak uint64) {
	close(m.done)
	r := <-m.out
	return r[0], r[1]
}

func memInUse() (uint64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	kb := map[string]uint64{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 2 {
			v, _ := strconv.ParseUint(fields[1], 10, 64)
			kb[strings.TrimSuffix(fields[0], ":")] = v
		}
	}
	if kb["MemTotal"] == 0 {
		return 0, fmt.Errorf("/proc/meminfo: no MemTotal")
	}
	return (kb["MemTotal"] - kb["MemAvailable"]) << 10, nil
}
