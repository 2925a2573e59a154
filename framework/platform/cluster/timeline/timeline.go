// Package timeline records when a cluster run reached each milestone,
// counted from the start of building the platform, and how long every VM
// boot took, for `make bench-cluster`. People read the figures against the
// goals; no spec asserts a time.
//
//	0 s -> cluster -> nodes -> multus -> kubevirt -> kubevirt-api -> vmi -> login ... lane
package timeline

import (
	"bytes"
	"encoding/json"
	"fmt"
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

// The kinds of boot.
const (
	BootStart    = "start"     // a VM created
	BootRecreate = "re-create" // a VM deleted and created again from its spec
	BootRestart  = "restart"   // a new instance of a VM kept (ARP-07: stop/start, restart, VMI deleted)
)

// Mark is a milestone and when it was first reached.
type Mark struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
}

// Boot is one VM boot. At is when it began, from the start of building the
// platform; the other figures are seconds from its create (a re-creation:
// from its delete, a restart: from its request, since the guest is off
// the VLAN from then). 0 is a stage not reached: the boot failed before it.
type Boot struct {
	VM        string  `json:"vm"`   // namespace/name
	Kind      string  `json:"kind"` // BootStart, BootRecreate or BootRestart
	At        float64 `json:"at"`
	VMI       float64 `json:"vmi_ready,omitempty"`
	Login     float64 `json:"login,omitempty"`
	CloudInit float64 `json:"cloud_init_done,omitempty"`
}

// Took is the boot's time to the last stage it reached.
func (b Boot) Took() float64 { return max(b.VMI, b.Login, b.CloudInit) }

// Span is the stretch of the run one spec took (or a suite node: the
// set-up, the removal), from the start of building the platform: beside
// the boots, it shows what the lane waited for.
type Span struct {
	Container string  `json:"container"` // the spec's outermost container, or the node's kind
	Spec      string  `json:"spec"`
	At        float64 `json:"at"`
	Took      float64 `json:"took"`
}

// Stages are when one boot began and reached each stage; a zero time is a
// stage not reached.
type Stages struct{ From, VMI, Login, CloudInit time.Time }

// Timeline is a run's milestones and boots. A nil Timeline records nothing
// (dry runs, unit tests).
type Timeline struct {
	mu         sync.Mutex
	start      time.Time
	marks      []Mark
	boots      []Boot
	specs      []Span
	sideBySide int
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

// Boot records one boot of the VM vm (namespace/name); kind is BootStart,
// BootRecreate or BootRestart. Safe to call from several goroutines: VMs may boot side
// by side.
func (t *Timeline) Boot(vm, kind string, s Stages) {
	if t == nil {
		return
	}
	since := func(at time.Time) float64 {
		if at.IsZero() {
			return 0
		}
		return at.Sub(s.From).Seconds()
	}
	b := Boot{VM: vm, Kind: kind, VMI: since(s.VMI), Login: since(s.Login), CloudInit: since(s.CloudInit)}
	t.mu.Lock()
	defer t.mu.Unlock()
	b.At = s.From.Sub(t.start).Seconds()
	t.boots = append(t.boots, b)
}

// Spec records one spec's stretch of the run (see Span). Safe to call
// from several goroutines.
func (t *Timeline) Spec(container, spec string, from, to time.Time) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.specs = append(t.specs, Span{Container: container, Spec: spec, At: from.Sub(t.start).Seconds(), Took: to.Sub(from).Seconds()})
}

// SideBySide records how many guests the run boots at once, so that what
// reads the boots knows what their sum means for the lane.
func (t *Timeline) SideBySide(n int) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sideBySide = n
}

// Marks returns the milestones recorded, in order.
func (t *Timeline) Marks() []Mark {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Mark(nil), t.marks...)
}

// Boots returns the boots recorded, in the order they ended.
func (t *Timeline) Boots() []Boot {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Boot(nil), t.boots...)
}

// Run is what WriteFile writes and ReadFile reads.
type Run struct {
	Marks []Mark `json:"marks"`
	Boots []Boot `json:"boots"`
	// Specs are the specs' stretches, in the order they ended; none in a
	// report from before they were recorded.
	Specs []Span `json:"specs,omitempty"`
	// SideBySide is how many guests booted at once at most; 0 in a
	// report from before it was recorded.
	SideBySide int `json:"side_by_side,omitempty"`
}

// Milestones is the run's marks as milestone -> seconds.
func (r Run) Milestones() map[string]float64 {
	out := map[string]float64{}
	for _, m := range r.Marks {
		out[m.Name] = m.Seconds
	}
	return out
}

// WriteFile writes the marks and boots as JSON.
func (t *Timeline) WriteFile(path string) error {
	t.mu.Lock()
	n, specs := t.sideBySide, append([]Span(nil), t.specs...)
	t.mu.Unlock()
	b, err := json.MarshalIndent(Run{Marks: t.Marks(), Boots: t.Boots(), Specs: specs, SideBySide: n}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadFile reads what WriteFile wrote, or a file from before boots were
// recorded (a bare list of marks), so an earlier run's report stays
// readable.
func ReadFile(path string) (Run, error) {
	var r Run
	b, err := os.ReadFile(path)
	if err != nil {
		return r, err
	}
	if bytes.HasPrefix(bytes.TrimSpace(b), []byte("[")) {
		err = json.Unmarshal(b, &r.Marks)
	} else {
		err = json.Unmarshal(b, &r)
	}
	if err != nil {
		return r, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}
