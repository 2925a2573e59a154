package atomicfile

import (
	"errors"
	"io"
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

// A streamed write lands whole; one whose producer fails half-way leaves
// no file and says why.
func TestWriteFunc(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "results.tar.gz")
	if err := WriteFunc(p, 0o644, func(w io.Writer) error {
		_, err := io.WriteString(w, "packed")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "packed" {
		t.Fatalf("read %q, %v", b, err)
	}
	q := filepath.Join(dir, "half.tar.gz")
	err := WriteFunc(q, 0o644, func(w io.Writer) error {
		io.WriteString(w, "half")
		return errors.New("the pod went away")
	})
	if err == nil || !strings.Contains(err.Error(), "the pod went away") {
		t.Errorf("a failed producer: %v", err)
	}
	if _, err := os.Stat(q); err == nil {
		t.Error("a failed producer left its half")
	}
}
