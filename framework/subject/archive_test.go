package subject_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/cozystack/vlan-conformance/framework/config/configtest"
	"github.com/cozystack/vlan-conformance/framework/image/imagetest"
	"github.com/cozystack/vlan-conformance/framework/stager"
)

// --image-archive is checked against the digest the release's rendered
// DaemonSet pins: the image it holds becomes the stager's, and one of
// another digest is bad input naming both.
func TestImageArchiveIsCheckedAgainstThePin(t *testing.T) {
	rel := configtest.Release(t, root)
	pinned, digest := configtest.PinnedArchive(t, rel, "pinned")
	other, otherDigest := imagetest.WriteImage(t, filepath.Join(t.TempDir(), "other.tar"), true, [2]string{"etc/hostname", "another image"})
	_, s, err := configtest.Lab(t, root, "--cozystack="+rel.Dir, "--image-archive="+pinned)
	if err != nil {
		t.Fatalf("the pinned image's archive: %v", err)
	}
	p := s.StagerPinned()
	if p == nil || p.Archive != pinned || !strings.HasSuffix(p.Ref, "@"+digest) {
		t.Fatalf("the stager's image: %+v, want the archive's, pinned at %s", p, digest)
	}
	if im, ok := s.StagerImageRef(); !ok || im.String() != "DaemonSet cozy-multus/cozy-multus initContainer "+stager.InitContainerName {
		t.Errorf("the install-cni-plugins container: %v, %v", im, ok)
	}

	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--cozystack=" + rel.Dir, "--image-archive=" + other}, []string{"--image-archive: ", other, "oci-archive", otherDigest, digest}},
		{[]string{"--image-archive=" + pinned}, []string{"--image-archive: ", "--cozystack"}},
		{[]string{"--cozystack=" + rel.Dir, "--image-archive=" + pinned, "--stager-image=" + pinned}, []string{"--image-archive and --stager-image"}},
		{[]string{"--cozystack=" + rel.Dir, "--image-archive=" + pinned, "--image-archive=" + pinned}, []string{"another archive already holds"}},
		{[]string{"--cozystack=" + rel.Dir, "--image-archive=" + filepath.Join(t.TempDir(), "none.tar")}, []string{"--image-archive: ", "none.tar"}},
		{[]string{"--cozystack=" + rel.Dir, "--image-archive=" + pinned, "--tier=cluster"}, []string{"--image-archive: the cluster tier"}},
	} {
		_, _, err := configtest.Lab(t, root, tc.args...)
		if err == nil {
			t.Errorf("%v: accepted", tc.args)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %v\nwant it to say %q", tc.args, err, w)
			}
		}
	}
}
