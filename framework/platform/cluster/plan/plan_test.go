package plan

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// Each step that does something says so as it starts; the run stops at the
// first failure, which names its step, and says nothing of the steps after.
func TestRunSaysEachStepAndStopsAtTheFirstFailure(t *testing.T) {
	var out strings.Builder
	p := &Plan{Progress: &out}
	ok := func(context.Context) error { return nil }
	p.Add("cluster", "kind: create cluster vcf", nil, ok)
	p.Add("apply", "printed by --dry-run only", nil, nil)
	p.Add("wait", "stage nodes", nil, func(context.Context) error { return errors.New("not Ready") })
	p.Add("apply", "never reached", nil, ok)
	err := p.Run(context.Background())
	if err == nil || err.Error() != "wait: stage nodes: not Ready" {
		t.Fatalf("Run: %v, want the failing step named", err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.HasSuffix(lines[0], "step 1/4 cluster: kind: create cluster vcf") || !strings.HasSuffix(lines[1], "step 3/4 wait: stage nodes") {
		t.Fatalf("progress:\n%s", out.String())
	}
}
