package stager

import (
	"os"
	"path/filepath"
	"testing"
)

// The verdicts must not rest on inode numbers: a file rewritten in place,
// one replaced by rename, one left alone, one removed and one added, told
// apart with the old inodes held open.
func TestVerdicts(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("kept", "same")
	write("in-place", "old")
	write("renamed", "old")
	write("gone", "old")
	if err := os.Mkdir(filepath.Join(dir, "adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	cat := &catalog{byHash: map[string]string{}, byName: map[string]string{}, version: map[string]string{}}
	before, err := cat.take(dir)
	if err != nil {
		t.Fatal(err)
	}
	h, err := hold(before)
	if err != nil {
		t.Fatal(err)
	}
	defer h.close()

	// What a stager might do.
	f, err := os.OpenFile(filepath.Join(dir, "in-place"), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("new")
	f.Close()
	write(".renamed.tmp", "new")
	if err := os.Rename(filepath.Join(dir, ".renamed.tmp"), filepath.Join(dir, "renamed")); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "gone"))
	write("added", "new")

	after, err := cat.take(dir)
	if err != nil {
		t.Fatal(err)
	}
	changes, err := compare(before, after, h)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Verdict{"kept": Untouched, "adir": Untouched, "in-place": RewrittenInPlace, "renamed": Replaced, "gone": Removed, "added": Added}
	if len(changes) != len(want) {
		t.Errorf("%d changes, want %d", len(changes), len(want))
	}
	for _, c := range changes {
		if c.Verdict != want[c.Name] {
			t.Errorf("%s: %s, want %s", c.Name, c.Verdict, want[c.Name])
		}
		switch c.Name {
		case "renamed":
			if !c.InodeChanged() || c.Held.Linked || !c.Held.ContentKept {
				t.Errorf("renamed: %+v; want the old inode unlinked and still reading its old bytes", c.Held)
			}
		case "in-place":
			if c.InodeChanged() || c.Held.ContentKept {
				t.Errorf("in-place: %+v; want the same inode, its bytes changed", c.Held)
			}
		}
	}
}

func TestFixtureLayouts(t *testing.T) {
	ls, err := LoadLayouts(os.DirFS(filepath.Join("..", "..", "fixtures", "stager", "layouts")))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"talos", "k3s", "cilium", "generic"} {
		if _, ok := ls[n]; !ok {
			t.Errorf("layout %s missing", n)
		}
	}
	if got := len(ls["talos"].Files); got != 6 {
		t.Errorf("talos: %d files, the guide says six", got)
	}
}
