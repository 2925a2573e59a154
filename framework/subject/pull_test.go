package subject_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/config/configtest"
	"github.com/cozystack/vlan-conformance/framework/image/imagetest"
	"github.com/cozystack/vlan-conformance/framework/stager"
)

// pullCase is a release copy pinned to an image that an in-process
// registry serves as the pin's mirror: no network, no root.
type pullCase struct {
	dir, digest, host, mirror string
	img                       v1.Image
}

func newPullCase(t *testing.T, content string) pullCase {
	t.Helper()
	// What --pull-pinned keeps goes in the test's own cache.
	t.Setenv("VCF_CACHE", t.TempDir())
	img := imagetest.Image(t, [2]string{"usr/src/multus-cni/bin/multus-daemon", content}, [2]string{"cni-plugins/", ""},
		[2]string{"cni-plugins/bridge", "#!/bin/sh\n# " + content + "\n"})
	h, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	rel := configtest.Release(t, root)
	if err := rel.PinMultus(h.String()); err != nil {
		t.Fatal(err)
	}
	host, _ := imagetest.Registry(t)
	return pullCase{dir: rel.Dir, digest: h.String(), host: host, mirror: "ghcr.io=" + host, img: img}
}

// --pull-pinned pulls the stager's pinned image by digest from the
// --registry-mirror of its registry and hands it to the stager specs
// exactly as an --image-archive is handed: a Pinned whose layout the
// stager reads. A second run reuses it with the registry gone.
func TestPullPinnedFromAMirror(t *testing.T) {
	pc := newPullCase(t, "pulled")
	imagetest.Push(t, pc.host, pc.img)
	args := []string{"--cozystack=" + pc.dir, "--pull-pinned", "--registry-mirror=" + pc.mirror}
	_, s, err := configtest.Lab(t, root, args...)
	if err != nil {
		t.Fatalf("pulling the pinned image from the mirror: %v", err)
	}
	p := s.StagerPinned()
	if p == nil || !strings.HasSuffix(p.Ref, "@"+pc.digest) || p.Digest != pc.digest {
		t.Fatalf("the stager's image: %+v, want the pulled one, pinned at %s", p, pc.digest)
	}
	wantFrom := pc.host + "/" + imagetest.PinnedRepo + "@" + pc.digest + " (--registry-mirror " + pc.mirror + ")"
	if p.Pulled != wantFrom || p.Flag() != "--pull-pinned" || !strings.HasPrefix(p.Archive, config.PulledCache()) || p.Format != "OCI layout" {
		t.Errorf("the pulled image: %+v\nwant pulled from %s, kept as an OCI layout under %s", p, wantFrom, config.PulledCache())
	}
	if !strings.HasPrefix(p.Source(), "--pull-pinned: pulled from "+wantFrom+", kept as the OCI layout "+p.Archive) {
		t.Errorf("its source, as the report names it: %s", p.Source())
	}
	// The stager reads it through the same code as an archive.
	info, err := stager.ImageListing(stager.Options{Pinned: p})
	if err != nil || !info.Offers("bridge") {
		t.Errorf("the stager's listing of the pulled image: %v, %v", info, err)
	}

	// The registry gone, the layout kept by digest serves the next run.
	_, stop := imagetest.Registry(t)
	stop()
	_, s, err = configtest.Lab(t, root, args...)
	if err != nil {
		t.Fatalf("the pulled image, reused offline: %v", err)
	}
	if q := s.StagerPinned(); q == nil || q.Archive != p.Archive || q.Pulled != p.Pulled {
		t.Errorf("reused: %+v, want %+v", q, p)
	}
}

// A mirror that holds another build under the pin's tag, or that cannot
// be reached, is bad input (exit 2): one error naming the reference, the
// mirror and, for another build, both digests.
func TestPullPinnedFailuresAreBadInput(t *testing.T) {
	pc := newPullCase(t, "pinned")
	other := imagetest.Image(t, [2]string{"usr/src/multus-cni/bin/multus-daemon", "another build"})
	otherDigest, err := other.Digest()
	if err != nil {
		t.Fatal(err)
	}
	imagetest.Push(t, pc.host, other)
	down, stop := imagetest.Registry(t)
	stop()
	ref := "ghcr.io/" + imagetest.PinnedRepo + ":" + imagetest.PinnedTag + "@" + pc.digest

	for _, tc := range []struct {
		what string
		args []string
		want []string
	}{
		{"another build", []string{"--registry-mirror=" + pc.mirror},
			[]string{"--pull-pinned: pulling " + ref, pc.host + "/" + imagetest.PinnedRepo + "@" + pc.digest, "--registry-mirror " + pc.mirror, "MANIFEST_UNKNOWN", "tag " + imagetest.PinnedTag + " names " + otherDigest.String()}},
		{"unreachable", []string{"--registry-mirror=ghcr.io=" + down},
			[]string{"--pull-pinned: pulling " + ref, down + "/" + imagetest.PinnedRepo, "--registry-mirror ghcr.io=" + down, "connection refused"}},
	} {
		_, _, err := configtest.Lab(t, root, append([]string{"--cozystack=" + pc.dir, "--pull-pinned"}, tc.args...)...)
		if err == nil {
			t.Errorf("%s: accepted", tc.what)
			continue
		}
		t.Logf("%s: %v", tc.what, err)
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v\nwant it to say %q", tc.what, err, w)
			}
		}
	}
	if ents, _ := os.ReadDir(config.PulledCache()); len(ents) != 0 {
		t.Errorf("a failed pull left %v in %s", ents, config.PulledCache())
	}

	// An archive that holds the pin is used as it is: nothing is pulled.
	archive, _ := imagetest.WriteImage(t, filepath.Join(t.TempDir(), "oci"), false,
		[2]string{"usr/src/multus-cni/bin/multus-daemon", "pinned"}, [2]string{"cni-plugins/", ""}, [2]string{"cni-plugins/bridge", "#!/bin/sh\n# pinned\n"})
	_, s, err := configtest.Lab(t, root, "--cozystack="+pc.dir, "--image-archive="+archive, "--pull-pinned", "--registry-mirror=ghcr.io="+down)
	if err != nil {
		t.Fatalf("--pull-pinned beside an archive of the pin: %v", err)
	}
	if p := s.StagerPinned(); p == nil || p.Archive != archive || p.Pulled != "" {
		t.Errorf("the stager's image: %+v, want the archive's", p)
	}
}

// A pin of a multi-platform index: the index and this machine's image are
// pulled, as a one-platform mirror keeps them, and the image run is that
// platform's.
func TestPullPinnedIndex(t *testing.T) {
	pc := newPullCase(t, "unused")
	here := imagetest.Image(t, [2]string{"cni-plugins/bridge", "this platform"})
	there := imagetest.Image(t, [2]string{"cni-plugins/bridge", "another platform"})
	other := "arm64"
	if runtime.GOARCH == other {
		other = "amd64"
	}
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: here, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: runtime.GOARCH}}},
		mutate.IndexAddendum{Add: there, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: other}}})
	h, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	hereDigest, _ := here.Digest()
	imagetest.Push(t, pc.host, idx)
	rel := configtest.Release(t, root)
	if err := rel.PinMultus(h.String()); err != nil {
		t.Fatal(err)
	}
	_, s, err := configtest.Lab(t, root, "--cozystack="+rel.Dir, "--pull-pinned", "--registry-mirror="+pc.mirror)
	if err != nil {
		t.Fatal(err)
	}
	p := s.StagerPinned()
	if p == nil || !strings.Contains(p.Compared, "index digest "+h.String()) || !strings.Contains(p.Compared, hereDigest.String()) {
		t.Fatalf("the pulled index: %+v, want index %s running %s", p, h, hereDigest)
	}
	info, err := stager.ImageListing(stager.Options{Pinned: p})
	if err != nil || !info.Offers("bridge") {
		t.Errorf("this platform's image: %v, %v", info, err)
	}
}

// The flags' own mistakes are bad input before anything is pulled.
func TestPullPinnedFlags(t *testing.T) {
	pc := newPullCase(t, "flags")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--pull-pinned"}, "--pull-pinned: the image is checked against the digest a release pins: pass --cozystack"},
		{[]string{"--cozystack=" + pc.dir, "--registry-mirror=" + pc.mirror}, "--registry-mirror: mirrors are where --pull-pinned pulls from"},
		{[]string{"--cozystack=" + pc.dir, "--pull-pinned", "--registry-mirror=ghcr.io"}, "want HOST=MIRROR"},
		{[]string{"--cozystack=" + pc.dir, "--pull-pinned", "--registry-mirror=ghcr.io=https://" + pc.host}, "http://host"},
		{[]string{"--cozystack=" + pc.dir, "--pull-pinned", "--registry-mirror=" + pc.mirror, "--registry-mirror=" + pc.mirror}, "another mirror is already given for ghcr.io"},
		{[]string{"--cozystack=" + pc.dir, "--pull-pinned", "--registry-mirror=quay.io=" + pc.host}, "pins no image on quay.io (it pins on ghcr.io)"},
		{[]string{"--cozystack=" + pc.dir, "--pull-pinned", "--tier=cluster"}, "--pull-pinned: the cluster tier"},
		{[]string{"--cozystack=" + pc.dir, "--pull-pinned", "--stager-image=" + pc.dir}, "--pull-pinned and --stager-image"},
	} {
		_, _, err := configtest.Lab(t, root, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v\nwant it to say %q", tc.args, err, tc.want)
		}
	}
}
