package claims

import (
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var updateReadme = flag.Bool("update-readme", false, "rewrite the claim table in README.md (make docs)")

const (
	root       = "../.."
	tableBegin = "<!-- claims table: generated from framework/claims by `make docs`; do not edit -->\n"
	tableEnd   = "<!-- end of claims table -->\n"
)

// specFiles finds, for each claim, the spec files under suites/ that name
// it in brackets.
func specFiles(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(filepath.Join(root, "suites"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		for _, id := range IDs(string(b)) {
			if !slices.Contains(out[id], rel) {
				out[id] = append(out[id], rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The README's claim table is what Table renders from this package, and
// every claim has a spec.
func TestReadmeClaimTable(t *testing.T) {
	specs := specFiles(t)
	for _, c := range All {
		if len(specs[c.ID]) == 0 {
			t.Errorf("%s: no spec under suites/ names it", c.ID)
		}
	}
	path := filepath.Join(root, "README.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	i, j := strings.Index(readme, tableBegin), strings.Index(readme, tableEnd)
	if i < 0 || j < i {
		t.Fatalf("README.md lacks the markers %q and %q around the claim table", tableBegin, tableEnd)
	}
	want := readme[:i+len(tableBegin)] + Table(specs) + readme[j:]
	if *updateReadme {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if readme != want {
		t.Fatal("README.md's claim table is stale: run `make docs` and commit README.md")
	}
}
