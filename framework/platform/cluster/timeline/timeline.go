// Package timeline records when a cluster run reached each milestone,
// counted from the start of building the platform, for `make
// bench-cluster`. People read the figures against the goals; no spec
// asserts a time.
//
//	0 s -> cluster -> nodes -> multus -> kubevirt -> kubevirt-api -> vmi -> login ... lane
package timeline

import (
	"encoding/json"
	"os"
	"sync"
	"time"
)

// The milestones, in the order a VM run reaches them.
const (
	Cluster  = "cluster"  // kind created the cluster (or the suite found it)
	Nodes    = "nodes"    // readiness stage: every node Ready
	Multus   = "multus"   // readiness stage: the Multus DaemonSet rolled out
	KubeVirt = "kubevirt" // readiness stage: the KubeVirt CR Available
	// readiness stage: virt-api's aggregated API Available (the consoles)
	KubeVirtAPI = "kubevirt-api"
	VMI         = "vmi"   // the first VMI Ready
	Login       = "login" // the first guest logged in on its serial console
	Lane        = "lane"  // the specs are done; the platform is being removed
)

// Mark is a milestone and when it was first reached.
type Mark struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
}

// Timeline is a run's milestones. A nil Timeline records nothing (dry runs,
// unit tests).
type Timeline struct {
	mu    sync.Mutex
	start time.Time
	marks []Mark
}

// New starts the clock.
func New() *Timeline { return &Timeline{start: time.Now()} }

// Mark records the first time name is reached; later ones are not firsts
// (Multus rolls out again when a spec re-creates its pods) and are dropped.
func (t *Timeline) Mark(name string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, m := range t.marks {
		if m.Name == name {
			return
		}
	}
	t.marks = append(t.marks, Mark{Name: name, Seconds: time.Since(t.start).Seconds()})
}

// Marks returns what was recorded, in order.
func (t *Timeline) Marks() []Mark {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Mark(nil), t.marks...)
}

// WriteFile writes the marks as JSON.
func (t *Timeline) WriteFile(path string) error {
	b, err := json.MarshalIndent(t.Marks(), "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadFile reads what WriteFile wrote, as milestone -> seconds.
func ReadFile(path string) (map[string]float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var marks []Mark
	if err := json.Unmarshal(b, &marks); err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, m := range marks {
		out[m.Name] = m.Seconds
	}
	return out, nil
}
