// Package plan is the run plan of the cluster tier: every step of building
// the platform, in order. New runs the steps; --dry-run prints them, from
// the same list, so what is printed is what a run does.
package plan

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/cozystack/vlan-conformance/framework/platform/cluster/kube"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/timeline"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/wait"
)

// Step is one thing building the platform does.
type Step struct {
	Phase  string // cluster, node, host, gateway, apply, wait
	Action string
	Object any // printed in full by --dry-run
	Do     func(ctx context.Context) error
}

// Plan is the steps of building a run's platform, in order.
type Plan struct {
	Steps []Step
	// Timeline, if set, gets a mark when each readiness stage is reached.
	Timeline *timeline.Timeline
	// Progress, if set, gets a line as each step starts: building a
	// cluster takes minutes, and a failure then shows where it stood.
	Progress io.Writer
}

// Add appends a step and returns its index (for a step whose work is
// known only once later steps are listed).
func (p *Plan) Add(phase, action string, obj any, do func(context.Context) error) int {
	p.Steps = append(p.Steps, Step{Phase: phase, Action: action, Object: obj, Do: do})
	return len(p.Steps) - 1
}

// Wait appends a readiness stage; reaching it is a milestone of the run.
func (p *Plan) Wait(s wait.Stage) {
	p.Add("wait", fmt.Sprintf("stage %s (timeout %s)", s.Name, s.Timeout), nil, func(ctx context.Context) error {
		if err := s.Wait(ctx); err != nil {
			return err
		}
		p.Timeline.Mark(s.Name)
		return nil
	})
}

// Run does the steps in order and stops at the first that fails, naming it.
func (p *Plan) Run(ctx context.Context) error {
	start := time.Now()
	for i, s := range p.Steps {
		if s.Do == nil {
			continue
		}
		if p.Progress != nil {
			fmt.Fprintf(p.Progress, "platform: %4.0fs step %d/%d %s: %s\n", time.Since(start).Seconds(), i+1, len(p.Steps), s.Phase, short(s.Action))
		}
		if err := s.Do(ctx); err != nil {
			return fmt.Errorf("%s: %s: %w", s.Phase, s.Action, err)
		}
	}
	return nil
}

// short is an action cut for a progress line (--dry-run prints it whole).
func short(action string) string {
	if len(action) > 150 {
		return action[:150] + "..."
	}
	return action
}

// Printer prints steps as --dry-run shows them: numbered, each object in
// full as YAML.
type Printer struct {
	W io.Writer
	n int
}

// Print prints one step.
func (pr *Printer) Print(phase, action string, obj any) error {
	pr.n++
	fmt.Fprintf(pr.W, "# %02d %-7s %s\n", pr.n, phase, action)
	if obj == nil {
		return nil
	}
	y, err := kube.ToYAML(obj)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(pr.W, "---\n%s", y)
	return err
}

// Plan prints every step of the plan.
func (pr *Printer) Plan(p *Plan) error {
	for _, s := range p.Steps {
		if err := pr.Print(s.Phase, s.Action, s.Object); err != nil {
			return err
		}
	}
	return nil
}
