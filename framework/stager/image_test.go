package stager

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/cozystack/vlan-conformance/framework/image"
	"github.com/cozystack/vlan-conformance/framework/image/imagetest"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

const pinnedRepo = "ghcr.io/cozystack/cozystack/multus-cni:v1.6.0"

// twoLayers is an image whose second layer deletes a plugin of the first
// (a whiteout) and adds another: only applying layers in order gives the
// right /cni-plugins.
func twoLayers(t *testing.T) v1.Image {
	t.Helper()
	return imagetest.Layers(t,
		[][2]string{{"cni-plugins/", ""}, {"cni-plugins/bridge", "old"}, {"cni-plugins/loopback", "x"}},
		[][2]string{{"cni-plugins/.wh.loopback", ""}, {"cni-plugins/bridge", "new"}, {"cni-plugins/vlan", "v"}},
	)
}

func TestExtractPluginsFromEachImageForm(t *testing.T) {
	dir := t.TempDir()
	img := twoLayers(t)

	dockerArchive := filepath.Join(dir, "docker-save.tar")
	if err := tarball.WriteToFile(dockerArchive, name.MustParseReference("example.invalid/multus:t"), img); err != nil {
		t.Fatal(err)
	}
	ociDir := imagetest.Layout(t, filepath.Join(dir, "oci"), func(lp layout.Path) error { return lp.AppendImage(img) })
	ociTar := filepath.Join(dir, "oci.tar")
	imagetest.WriteTarDir(t, ociDir, ociTar)
	exported := filepath.Join(dir, "crane-export.tar")
	if err := os.WriteFile(exported, imagetest.Tar(t, [2]string{"./cni-plugins/", ""}, [2]string{"./cni-plugins/bridge", "new"}, [2]string{"./cni-plugins/vlan", "v"}, [2]string{"./etc/hostname", "x"}), 0o644); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(filepath.Join(root, "cni-plugins"), 0o755); err != nil {
		t.Fatal(err)
	}
	for n, c := range map[string]string{"bridge": "new", "vlan": "v"} {
		if err := os.WriteFile(filepath.Join(root, "cni-plugins", n), []byte(c), 0o755); err != nil {
			t.Fatal(err)
		}
	}

	for _, src := range []string{dockerArchive, ociDir, ociTar, exported, root} {
		if err := CheckImage(src); err != nil {
			t.Errorf("CheckImage(%s): %v", filepath.Base(src), err)
			continue
		}
		dst := filepath.Join(dir, "out-"+filepath.Base(src))
		if err := extractPlugins(src, "", dst); err != nil {
			t.Errorf("extract %s: %v", filepath.Base(src), err)
			continue
		}
		got, err := dirNames(dst)
		if err != nil {
			t.Fatal(err)
		}
		sort.Strings(got)
		if strings.Join(got, " ") != "bridge vlan" {
			t.Errorf("%s: /cni-plugins holds %v, want bridge vlan (layers applied in order)", filepath.Base(src), got)
		}
		if b, _ := os.ReadFile(filepath.Join(dst, "bridge")); string(b) != "new" {
			t.Errorf("%s: bridge reads %q, want the later layer's", filepath.Base(src), b)
		}
	}
}

func TestCheckImageWithoutPlugins(t *testing.T) {
	p := filepath.Join(t.TempDir(), "rootfs.tar")
	if err := os.WriteFile(p, imagetest.Tar(t, [2]string{"etc/hostname", "x"}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CheckImage(p); err == nil || !strings.Contains(err.Error(), "no /cni-plugins/") {
		t.Fatalf("got %v, want an error naming the missing /cni-plugins/", err)
	}
}

// A tarball is unpacked once per process; every harness copies from the cache,
// and a rewritten tarball at the same path is unpacked afresh.
func TestImageTarballUnpackedOncePerProcess(t *testing.T) {
	t.Cleanup(func() { _ = DropImageCache() })
	dir := t.TempDir()
	src := filepath.Join(dir, "fs.tar")
	if err := os.WriteFile(src, imagetest.Tar(t, [2]string{"cni-plugins/", ""}, [2]string{"cni-plugins/bridge", "one"}), 0o644); err != nil {
		t.Fatal(err)
	}
	read := func(dst string) string {
		t.Helper()
		if err := cachedPlugins(src, "", dst); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dst, "bridge"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got := read(filepath.Join(dir, "a")) + read(filepath.Join(dir, "b")); got != "oneone" {
		t.Fatalf("bridge read %q twice, want one each time", got)
	}
	if n := len(imageCache.byKey); n != 1 {
		t.Fatalf("%d unpacked copies of one tarball, want 1", n)
	}
	if err := os.WriteFile(src, imagetest.Tar(t, [2]string{"cni-plugins/", ""}, [2]string{"cni-plugins/bridge", "two!"}), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := read(filepath.Join(dir, "c")); got != "two!" {
		t.Fatalf("after the tarball changed, bridge is %q, want two!", got)
	}
	cache := imageCache.dir
	if err := DropImageCache(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cache); !os.IsNotExist(err) {
		t.Fatalf("the cache %s is still there after DropImageCache: %v", cache, err)
	}
}

// The cluster tier's --cni-plugins-image is read from the --images-archive
// that carries it, as --stager-image is: layers in order.
func TestClusterImageFromArchive(t *testing.T) {
	dir := t.TempDir()
	archive := filepath.Join(dir, "multus.tar")
	if err := tarball.WriteToFile(archive, name.MustParseReference("localhost/vcf/multus-cni:v4.3.0"), twoLayers(t)); err != nil {
		t.Fatal(err)
	}
	info, found, err := ClusterImage("localhost/vcf/multus-cni:v4.3.0", []string{archive})
	if err != nil || !found {
		t.Fatalf("found %v, err %v", found, err)
	}
	var got []string
	for _, e := range info.Entries {
		got = append(got, e.Name)
	}
	if strings.Join(got, " ") != "bridge vlan" {
		t.Fatalf("/cni-plugins holds %v, want bridge vlan (the whiteout applied)", got)
	}
	if _, found, err := ClusterImage("localhost/vcf/other:v1", []string{archive}); found || err != nil {
		t.Fatalf("an image in no archive: found %v, err %v; want not found, no error", found, err)
	}

	bare := filepath.Join(dir, "bare.tar")
	if err := tarball.WriteToFile(bare, name.MustParseReference("localhost/vcf/bare:v1"), imagetest.Image(t, [2]string{"etc/hostname", "x"})); err != nil {
		t.Fatal(err)
	}
	if err := CheckClusterImage("localhost/vcf/bare:v1", []string{bare}); err == nil || !strings.Contains(err.Error(), "no /cni-plugins/") {
		t.Fatalf("got %v, want an error naming the missing /cni-plugins/", err)
	}
}

// A pinned image without /cni-plugins is read as such (the release's
// failure), once per process, not refused.
func TestPinnedImageWithoutPluginsDir(t *testing.T) {
	t.Cleanup(func() { _ = DropImageCache() })
	dir := t.TempDir()
	img := imagetest.Image(t, [2]string{"usr/src/multus-cni/bin/multus-daemon", "m"})
	p := imagetest.Layout(t, filepath.Join(dir, "oci"), func(lp layout.Path) error { return lp.AppendImage(img) })
	pinned := &image.Pinned{Ref: pinnedRepo + "@" + imagetest.Digest(t, img), Archive: p, Format: "OCI layout", Digest: imagetest.Digest(t, img), Compared: "manifest digest"}
	for i := range 2 {
		info, err := readImage(Options{Pinned: pinned}, "", "", filepath.Join(dir, "payload", string(rune('a'+i))), cachedPlugins)
		if err != nil || !info.NoPluginsDir {
			t.Fatalf("read %d: %+v, %v; want an image without /cni-plugins and no error", i, info, err)
		}
		if !strings.Contains(info.String(), pinned.Ref) || !strings.Contains(info.String(), "no /cni-plugins") {
			t.Errorf("the image is described as %q", info)
		}
	}
	if n := len(imageCache.byKey); n != 1 {
		t.Errorf("%d reads of one archive cached, want 1", n)
	}
	if err := extractPlugins(p, pinned.Digest, ""); !errors.Is(err, ErrNoPluginsDir) {
		t.Errorf("extract: %v, want ErrNoPluginsDir", err)
	}
}
