// Package imagetest builds the small images tests read: layers of a few
// named files, written as an OCI layout, an oci-archive or a file system
// tarball. Layers are uncompressed: gzip would cost seconds and prove
// nothing here.
package imagetest

import (
	"archive/tar"
	"bytes"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Tar is a file system tarball of entries (path, content; a path ending
// in / is a directory), mode 0755, at the epoch.
func Tar(t testing.TB, entries ...[2]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e[0], Mode: 0o755, Typeflag: tar.TypeReg, Size: int64(len(e[1])), ModTime: time.Unix(0, 0)}
		if strings.HasSuffix(e[0], "/") {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Image is an OCI image of one layer holding entries (Tar's form).
func Image(t testing.TB, entries ...[2]string) v1.Image {
	t.Helper()
	return Layers(t, entries)
}

// Layers is an OCI image of one layer per list of entries, in order (a
// later layer's ".wh.NAME" deletes NAME of an earlier one).
func Layers(t testing.TB, layers ...[][2]string) v1.Image {
	t.Helper()
	var ls []v1.Layer
	for _, entries := range layers {
		ls = append(ls, static.NewLayer(Tar(t, entries...), types.OCIUncompressedLayer))
	}
	img, err := mutate.AppendLayers(empty.Image, ls...)
	if err != nil {
		t.Fatal(err)
	}
	return mutate.MediaType(img, types.OCIManifestSchema1)
}

// Digest is the digest of an image or an index.
func Digest(t testing.TB, d interface{ Digest() (v1.Hash, error) }) string {
	t.Helper()
	h, err := d.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return h.String()
}

// Layout writes an OCI layout at dir, as skopeo or crane write a mirror's
// copy, holding what add appends to it.
func Layout(t testing.TB, dir string, add func(layout.Path) error) string {
	t.Helper()
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := add(lp); err != nil {
		t.Fatal(err)
	}
	return dir
}

// WriteImage writes an image of one layer of entries at p: an OCI layout
// directory, or with archive an oci-archive tarball of one. It returns p
// and the manifest digest.
func WriteImage(t testing.TB, p string, archive bool, entries ...[2]string) (string, string) {
	t.Helper()
	img := Image(t, entries...)
	dir := p
	if archive {
		dir = t.TempDir()
	}
	Layout(t, dir, func(lp layout.Path) error { return lp.AppendImage(img) })
	if archive {
		WriteTarDir(t, dir, p)
	}
	return p, Digest(t, img)
}

// WriteTarDir writes the tree under dir as the tarball p (an oci-archive
// of a layout).
func WriteTarDir(t testing.TB, dir, p string) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(f)
	if err := tw.AddFS(os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// PinnedRepo is the repository the release pins its multus image in, and
// the tag its pin carries.
const PinnedRepo, PinnedTag = "cozystack/cozystack/multus-cni", "v1.6.0"

// Registry is an in-process registry (go-containerregistry's) on a
// loopback port, for the life of the test: a mirror of ghcr.io needing no
// network. It returns its host:port and a function that stops it.
func Registry(t testing.TB) (host string, stop func()) {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), srv.Close
}

// Push puts img (an image or an index) on the registry at host as
// PinnedRepo:PinnedTag, where a mirror of the release's pin keeps it.
func Push(t testing.TB, host string, img remote.Taggable) {
	t.Helper()
	ref, err := name.NewTag(host + "/" + PinnedRepo + ":" + PinnedTag)
	if err != nil {
		t.Fatal(err)
	}
	switch v := img.(type) {
	case v1.ImageIndex:
		err = remote.WriteIndex(ref, v)
	case v1.Image:
		err = remote.Write(ref, v)
	}
	if err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
}
