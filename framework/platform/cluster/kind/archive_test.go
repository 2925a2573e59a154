package kind

import (
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The archive's tags map to the image IDs containerd will report for them
// (the config's digest), which is what holds compares.
func TestArchiveImages(t *testing.T) {
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "a.tar")
	tag, _ := name.NewTag("registry.invalid/vcf/a:1")
	other, _ := name.NewTag("registry.invalid/vcf/b:2")
	if err := tarball.MultiRefWriteToFile(file, map[name.Reference]v1.Image{tag: img, other: img}); err != nil {
		t.Fatal(err)
	}
	got, err := archiveImages(file)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := img.ConfigName()
	for _, ref := range []string{"registry.invalid/vcf/a:1", "registry.invalid/vcf/b:2"} {
		if got[ref] != id.String() {
			t.Errorf("%s: ID %q, want %q (all: %v)", ref, got[ref], id, got)
		}
	}
	if holds(nil, map[string]string{"x:1": ""}) {
		t.Error("an image without an ID must always load")
	}
	if holds(nil, nil) {
		t.Error("an archive without images must load (nothing proves the node holds it)")
	}
}
