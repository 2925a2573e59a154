package image

import (
	"path/filepath"
	"testing"

	"github.com/cozystack/vlan-conformance/framework/image/imagetest"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The archive's tags map to the image IDs containerd will report for them
// (the config's digest).
func TestDockerTags(t *testing.T) {
	img := imagetest.Image(t, [2]string{"etc/hostname", "a"})
	file := filepath.Join(t.TempDir(), "a.tar")
	tag, _ := name.NewTag("registry.invalid/vcf/a:1")
	other, _ := name.NewTag("registry.invalid/vcf/b:2")
	if err := tarball.MultiRefWriteToFile(file, map[name.Reference]v1.Image{tag: img, other: img}); err != nil {
		t.Fatal(err)
	}
	got, err := DockerTags(file)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := img.ConfigName()
	for _, ref := range []string{"registry.invalid/vcf/a:1", "registry.invalid/vcf/b:2"} {
		if got[ref] != id.String() {
			t.Errorf("%s: ID %q, want %q (all: %v)", ref, got[ref], id, got)
		}
	}
}
