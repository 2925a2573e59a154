package config

import "sort"

// Control is a negative control: the same specs run against a deliberately
// broken subject, where the named claim's spec must FAIL.
type Control struct {
	ID          string   // e.g. "VLAN-01/no-vlan-subinterface"; passed as --control
	Claim       string   // the claim whose spec must fail, e.g. "VLAN-01"
	Description string   // what is broken, in one line
	ExtraArgs   []string // more flags the control needs (e.g. a mutant manifest)
	// Expect is a substring of the failure message the control must cause
	// in its claim's own It; a failure for another reason is not caught.
	Expect string
	// Cluster: the control exists in the cluster lane too (none does yet:
	// every control breaks a subject the lab builds).
	Cluster bool
}

var controls = map[string]Control{}

func register(cs ...Control) {
	for _, c := range cs {
		controls[c.ID] = c
	}
}

// Controls lists every negative control, sorted by ID.
func Controls() []Control {
	out := make([]Control, 0, len(controls))
	for _, c := range controls {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// ControlIDs lists the IDs accepted by --control.
func ControlIDs() []string {
	var ids []string
	for _, c := range Controls() {
		ids = append(ids, c.ID)
	}
	return ids
}

func knownControl(id string) bool { _, ok := controls[id]; return ok }

// Is reports whether the run applies the control id.
func (c *Config) Is(id string) bool { return c.Control == id }
