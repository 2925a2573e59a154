// Package configtest builds, for the tests of other packages, a validated
// and prepared configuration whose subject is the verbatim Cozystack
// subset beside the checkout (../shared/subjects/cozystack), or a copy of
// it as a release before plugin staging ships it.
package configtest

import (
	"archive/tar"
	"bytes"
	"flag"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
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

	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/cozystack"
)

// LocalMultusImage is the --cni-plugins-image the release configs name.
const LocalMultusImage = "localhost/vcf/multus-cni:test"

// ClusterRelease is a cluster-tier config under the Cozystack subset, the
// stager staging from the suite's reference manifest; root is the
// checkout's root relative to the test's package, extra more flags. The
// test is skipped when the subset is not there.
func ClusterRelease(t *testing.T, root string, extra ...string) *config.Config {
	t.Helper()
	dir := subset(t, root)
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	cfg := config.Register(fs)
	args := append([]string{"--tier=cluster", "--cozystack=" + dir, "--cni-staging=stager",
		"--stager-manifest=" + filepath.Join(root, "fixtures", "stager", "multus-daemonset.yaml"),
		"--cni-plugins-image=" + LocalMultusImage, "--report-dir=" + t.TempDir(), "--work-dir=" + t.TempDir()}, extra...)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("validate: %v", err)
	}
	if err := cfg.Prepare(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// subset is the Cozystack subset beside the checkout at root; the test is
// skipped when it is not there.
func subset(t *testing.T, root string) string {
	t.Helper()
	dir := filepath.Join(root, "..", "shared", "subjects", "cozystack")
	if _, err := os.Stat(dir); err != nil {
		t.Skip("no Cozystack subset at " + dir)
	}
	return dir
}

// Release is a copy of the subset in a temporary directory, for a test to
// edit.
func Release(t *testing.T, root string) *cozystack.Release {
	t.Helper()
	rel, err := cozystack.Open(subset(t, root))
	if err != nil {
		t.Fatal(err)
	}
	c, err := rel.CopyTo(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ReleaseWithoutStaging is a copy of the subset with plugin staging
// dropped from its charts and its Dockerfile, as the releases before
// staging (v1.6.x) ship them. Its guide is the subset's until the test
// edits it (DropGuideSection).
func ReleaseWithoutStaging(t *testing.T, root string) *cozystack.Release {
	t.Helper()
	c := Release(t, root)
	if err := c.DropStaging(); err != nil {
		t.Fatal(err)
	}
	return c
}

// PinnedArchive is an OCI layout of a one-file image in a temporary
// directory, and the copy rel re-pinned to it: the release as it would
// ship that image.
func PinnedArchive(t *testing.T, rel *cozystack.Release, content string) (archive, digest string) {
	t.Helper()
	archive, digest = WriteImage(t, filepath.Join(t.TempDir(), "oci"), false, [2]string{"usr/src/multus-cni/bin/multus-daemon", content})
	if err := rel.PinMultus(digest); err != nil {
		t.Fatal(err)
	}
	return archive, digest
}

// Lab is a lab-tier config of args, validated and, when valid, prepared.
// Its plugin directory and stager manifest default to the files of the
// checkout at root, as if from the command line's defaults, so that only
// the flags under test can be wrong. Validate's error is returned.
func Lab(t *testing.T, root string, args ...string) (*config.Config, error) {
	t.Helper()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	cfg := config.Register(fs)
	cfg.PluginDir = filepath.Join(root, "framework", "config", "testdata")
	cfg.StagerManifest = filepath.Join(root, "fixtures", "stager", "multus-daemonset.yaml")
	if err := fs.Parse(append([]string{"--report-dir=" + t.TempDir(), "--work-dir=" + t.TempDir()}, args...)); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	if err := cfg.Prepare(); err != nil {
		t.Fatal(err)
	}
	return cfg, nil
}

// WriteImage writes an image of one layer of entries (path, content; a
// path ending in / a directory) at p: an OCI layout directory, or an
// oci-archive tarball of one. It returns p and the manifest digest.
func WriteImage(t *testing.T, p string, archive bool, entries ...[2]string) (string, string) {
	t.Helper()
	img := Image(t, entries...)
	h, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	dir := p
	if archive {
		dir = t.TempDir()
	}
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	if archive {
		tarDir(t, dir, p)
	}
	return p, h.String()
}

// Image is an OCI image of one layer of entries (path, content; a path
// ending in / a directory), built the same way on every call.
func Image(t *testing.T, entries ...[2]string) v1.Image {
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
	// Uncompressed: gzip would cost seconds and prove nothing here.
	img, err := mutate.AppendLayers(empty.Image, static.NewLayer(buf.Bytes(), types.OCIUncompressedLayer))
	if err != nil {
		t.Fatal(err)
	}
	return mutate.MediaType(img, types.OCIManifestSchema1)
}

// PinnedRepo is the repository the release pins its multus image in, and
// the tag its pin carries.
const PinnedRepo, PinnedTag = "cozystack/cozystack/multus-cni", "v1.6.0"

// Registry is an in-process registry (go-containerregistry's) on a
// loopback port, for the life of the test: a mirror of ghcr.io needing no
// network. It returns its host:port and a function that stops it.
func Registry(t *testing.T) (host string, stop func()) {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), srv.Close
}

// Push puts img (an image or an index) on the registry at host as
// PinnedRepo:PinnedTag, where a mirror of the release's pin keeps it.
func Push(t *testing.T, host string, img remote.Taggable) {
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

// tarDir writes the tree under dir as the tarball p (an oci-archive).
func tarDir(t *testing.T, dir, p string) {
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
