package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A write lands whole with its mode; one that fails leaves no temporary
// behind (a directory at the destination makes the rename fail).
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "bridge")
	if err := Write(p, strings.NewReader("new"), 0o755); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "new" {
		t.Fatalf("read %q, %v", b, err)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o755 {
		t.Errorf("mode %v", fi.Mode())
	}
	if err := os.Mkdir(filepath.Join(dir, "vlan"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Write(filepath.Join(dir, "vlan"), strings.NewReader("x"), 0o755); err == nil {
		t.Fatal("renaming a file over a directory succeeded")
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".vcf-") {
			t.Errorf("temporary %s left in %s", e.Name(), dir)
		}
	}
}
