package timeline

import (
	"path/filepath"
	"testing"
)

func TestMarkKeepsTheFirstAndRoundTrips(t *testing.T) {
	tl := New()
	tl.Mark(Nodes)
	tl.Mark(Multus)
	first := tl.Marks()[1].Seconds
	tl.Mark(Multus) // a re-rollout is not the first
	if got := tl.Marks(); len(got) != 2 || got[0].Name != Nodes || got[1].Seconds != first {
		t.Fatalf("marks %+v: want nodes then the first multus", got)
	}
	path := filepath.Join(t.TempDir(), "timeline.json")
	if err := tl.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	m, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m[Nodes]; !ok || m[Multus] != first || len(m) != 2 {
		t.Fatalf("read back %v", m)
	}
}

func TestNilRecordsNothing(t *testing.T) {
	var tl *Timeline
	tl.Mark(VMI) // a dry run's platform has none; must not panic
	if tl.Marks() != nil {
		t.Fatal("a nil timeline has marks")
	}
}
