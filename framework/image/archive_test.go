package image

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/cozystack/vlan-conformance/framework/image/imagetest"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const pinnedRepo = "ghcr.io/cozystack/cozystack/multus-cni:v1.6.0"

// Every form a mirror holds a pinned image in: the digest the archive
// keeps is compared with the pin's, and a mismatch names both.
func TestArchivePinByDigest(t *testing.T) {
	dir := t.TempDir()
	withPlugins := imagetest.Image(t, [2]string{"cni-plugins/", ""}, [2]string{"cni-plugins/bridge", "b"})
	without := imagetest.Image(t, [2]string{"usr/src/multus-cni/bin/multus-daemon", "m"})
	want, other := imagetest.Digest(t, withPlugins), imagetest.Digest(t, without)

	ociDir := imagetest.Layout(t, filepath.Join(dir, "oci"), func(lp layout.Path) error { return lp.AppendImage(withPlugins) })
	ociArchive := filepath.Join(dir, "oci-archive.tar")
	imagetest.WriteTarDir(t, ociDir, ociArchive)
	// `docker save` of the containerd image store: the OCI index beside
	// manifest.json.
	both := filepath.Join(dir, "docker-save-containerd.tar")
	dockerOnly := filepath.Join(dir, "docker-save.tar")
	if err := tarball.WriteToFile(dockerOnly, name.MustParseReference(pinnedRepo), withPlugins); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(both, mergeTars(t, mustRead(t, ociArchive), mustRead(t, dockerOnly)), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct{ path, format string }{
		{ociDir, "OCI layout"}, {ociArchive, "oci-archive"}, {both, "docker-archive with an OCI index"},
	} {
		a, err := ReadArchive(tc.path)
		if err != nil {
			t.Fatalf("%s: %v", tc.format, err)
		}
		if a.Format != tc.format {
			t.Errorf("%s read as %q", tc.path, a.Format)
		}
		p, err := a.Pin(pinnedRepo + "@" + want)
		if err != nil {
			t.Errorf("%s: %v", tc.format, err)
			continue
		}
		if p.Digest != want || !strings.Contains(p.Describe(), "manifest digest "+want) {
			t.Errorf("%s: pinned %+v, want the manifest digest %s compared", tc.format, p, want)
		}
		dst := filepath.Join(dir, "out-"+filepath.Base(tc.path))
		if err := extract(tc.path, p.Digest, dst); err != nil {
			t.Errorf("%s: extract by digest: %v", tc.format, err)
		}
		_, err = a.Pin(pinnedRepo + "@" + other)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), other) {
			t.Errorf("%s: a pin of another image: %v, want an error naming both %s and %s", tc.format, err, want, other)
		}
	}

	// The classic store's `docker save` keeps no registry manifest: it is
	// refused, saying what it holds (the image ID) and what is pinned.
	a, err := ReadArchive(dockerOnly)
	if err != nil {
		t.Fatal(err)
	}
	id, err := withPlugins.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Pin(pinnedRepo + "@" + want)
	if err == nil || !strings.Contains(err.Error(), "image ID "+id.String()) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "oci-archive") {
		t.Errorf("docker save without an OCI index: %v, want a refusal naming its image ID %s, the pin %s and what to give instead", err, id, want)
	}
	if _, err := a.Pin(pinnedRepo); err == nil || !strings.Contains(err.Error(), "by no digest") {
		t.Errorf("a pin by tag alone: %v", err)
	}
	if _, err := ReadArchive(filepath.Join(dir, "oci") + "/blobs"); err == nil {
		t.Error("a directory that is no layout was read as one")
	}
}

// A pinned multi-platform index is held only as the index itself; the
// image of this machine's platform is what runs.
func TestArchivePinsAnIndex(t *testing.T) {
	dir := t.TempDir()
	here := imagetest.Image(t, [2]string{"cni-plugins/", ""}, [2]string{"cni-plugins/bridge", "here"})
	there := imagetest.Image(t, [2]string{"cni-plugins/", ""}, [2]string{"cni-plugins/bridge", "there"})
	otherArch := "arm64"
	if runtime.GOARCH == otherArch {
		otherArch = "amd64"
	}
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: there, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: otherArch}}},
		mutate.IndexAddendum{Add: here, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: runtime.GOARCH}}},
	)
	idx = mutate.IndexMediaType(idx, types.OCIImageIndex)
	pin := imagetest.Digest(t, idx)
	p := imagetest.Layout(t, filepath.Join(dir, "oci"), func(lp layout.Path) error { return lp.AppendIndex(idx) })

	a, err := ReadArchive(p)
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := a.Pin(pinnedRepo + "@" + pin)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(pinned.Compared, "index digest "+pin) || !strings.Contains(pinned.Compared, imagetest.Digest(t, here)) {
		t.Errorf("compared %q, want the index digest and this platform's image", pinned.Compared)
	}
	dst := filepath.Join(dir, "out")
	if err := extract(p, pin, dst); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "bridge")); string(b) != "here" {
		t.Errorf("bridge reads %q: not the linux/%s image", b, runtime.GOARCH)
	}
	// A mirror of one platform's image does not hold the index.
	single := imagetest.Layout(t, filepath.Join(dir, "single"), func(lp layout.Path) error { return lp.AppendImage(here) })
	if a, err := ReadArchive(single); err != nil {
		t.Fatal(err)
	} else if _, err := a.Pin(pinnedRepo + "@" + pin); err == nil || !strings.Contains(err.Error(), "skopeo copy --all") {
		t.Errorf("one platform's image against a pinned index: %v", err)
	}
}

// An index that names a manifest its bytes do not hash to is corrupt.
func TestArchiveDigestIsComputed(t *testing.T) {
	img := imagetest.Image(t, [2]string{"cni-plugins/", ""})
	p := imagetest.Layout(t, filepath.Join(t.TempDir(), "oci"), func(lp layout.Path) error { return lp.AppendImage(img) })
	h, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	blob := filepath.Join(p, "blobs", h.Algorithm, h.Hex)
	raw, err := os.ReadFile(blob)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	m["annotations"] = map[string]string{"forged": "yes"}
	forged, _ := json.Marshal(m)
	if err := os.WriteFile(blob, forged, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadArchive(p); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("got %v, want a corrupt archive", err)
	}
}

// extract writes the /cni-plugins of the image digest names at p into dst.
func extract(p, digest, dst string) error {
	fs, err := FileSystem(p, digest)
	if err != nil {
		return err
	}
	defer fs.Close()
	found, err := CopyDir(fs, "cni-plugins", dst)
	if err == nil && !found {
		err = errors.New("no /cni-plugins")
	}
	return err
}

// mergeTars is one tarball of the entries of each.
func mergeTars(t *testing.T, tars ...[]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, b := range tars {
		tr := tar.NewReader(bytes.NewReader(b))
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := tw.WriteHeader(h); err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(tw, tr); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
