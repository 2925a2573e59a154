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
	// Tier is where the broken subject is built: "" for the lab, "cluster"
	// for a kind cluster the suite makes (the cluster-only claims).
	Tier string
	// NeedsRelease: the broken subject is made from the release under test
	// (--cozystack); without one there is nothing to break.
	NeedsRelease bool
	// Native: the claim's spec runs where the stager's do, outside the lab
	// VM (a VLAN claim proven on a staged directory, VLAN-15).
	Native bool
}

// OnTier reports whether the control's subject is built on tier.
func (c Control) OnTier(tier string) bool { return c.TierName() == tier }

// TierName is the tier the control's subject is built on: lab or cluster.
func (c Control) TierName() string {
	if c.Tier == "" {
		return "lab"
	}
	return c.Tier
}

// ControlsOn lists the controls whose subject is built on tier.
func ControlsOn(tier string) []Control {
	var out []Control
	for _, c := range Controls() {
		if c.OnTier(tier) {
			out = append(out, c)
		}
	}
	return out
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
