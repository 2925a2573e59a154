package timeline

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func TestMarkKeepsTheFirstAndRoundTrips(t *testing.T) {
	tl := New()
	tl.Mark(Nodes)
	tl.Mark(Multus)
	first := tl.Marks()[1].Seconds
	tl.Mark(Multus) // a re-rollout is not the first
	tl.SideBySide(2)
	if got := tl.Marks(); len(got) != 2 || got[0].Name != Nodes || got[1].Seconds != first {
		t.Fatalf("marks %+v: want nodes then the first multus", got)
	}
	path := filepath.Join(t.TempDir(), "timeline.json")
	if err := tl.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	r, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := r.Milestones()
	if _, ok := m[Nodes]; !ok || m[Multus] != first || len(m) != 2 {
		t.Fatalf("read back %v", m)
	}
	if r.SideBySide != 2 {
		t.Fatalf("read back %d guests at once, want 2", r.SideBySide)
	}
}

// Boots recorded from many goroutines at once are all kept, each with its
// own figures, and survive the file.
func TestBootsFromGoroutinesRoundTrip(t *testing.T) {
	tl := New()
	from := tl.start.Add(10 * time.Second)
	const n = 32
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := Stages{From: from, VMI: from.Add(time.Duration(i+1) * time.Second), Login: from.Add(time.Duration(i+2) * time.Second)}
			kind := BootStart
			if i%2 == 1 {
				kind = BootRecreate
			} else {
				s.CloudInit = from.Add(time.Duration(i+3) * time.Second)
			}
			tl.Boot(fmt.Sprintf("ns/vm-%d", i), kind, s)
		}()
	}
	wg.Wait()
	path := filepath.Join(t.TempDir(), "timeline.json")
	if err := tl.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	r, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Boots) != n {
		t.Fatalf("%d boots read back, want %d", len(r.Boots), n)
	}
	seen := map[string]bool{}
	for _, b := range r.Boots {
		var i int
		if _, err := fmt.Sscanf(b.VM, "ns/vm-%d", &i); err != nil {
			t.Fatalf("boot %+v: %v", b, err)
		}
		seen[b.VM] = true
		want := Boot{VM: b.VM, Kind: BootStart, At: 10, VMI: float64(i + 1), Login: float64(i + 2), CloudInit: float64(i + 3)}
		if i%2 == 1 {
			// Cloud-init never done: 0, and the boot took until its login.
			want.Kind, want.CloudInit = BootRecreate, 0
		}
		if b != want {
			t.Errorf("boot read back %+v, want %+v", b, want)
		}
		if b.Took() != max(want.Login, want.CloudInit) {
			t.Errorf("%s took %v", b.VM, b.Took())
		}
	}
	if len(seen) != n {
		t.Errorf("%d distinct VMs, want %d", len(seen), n)
	}
}

// A timeline.json from before boots were recorded (a bare list of marks)
// still reads.
func TestReadsTheOldFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "timeline.json")
	if err := os.WriteFile(path, []byte(`[{"name":"nodes","seconds":41.5},{"name":"kubevirt","seconds":300}]`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if m := r.Milestones(); m[Nodes] != 41.5 || m[KubeVirt] != 300 || len(r.Boots) != 0 {
		t.Fatalf("read %+v", r)
	}
}

func TestNilRecordsNothing(t *testing.T) {
	var tl *Timeline
	tl.Mark(VMI) // a dry run's platform has none; must not panic
	tl.Boot("ns/vm", BootStart, Stages{From: time.Now()})
	if tl.Marks() != nil || tl.Boots() != nil {
		t.Fatal("a nil timeline has records")
	}
}
