// Package configtest builds, for the tests of other packages, a validated
// configuration and its prepared subject (framework/subject): the
// verbatim Cozystack subset beside the checkout
// (../shared/subjects/cozystack), or a copy of it as a release before
// plugin staging ships it.
package configtest

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/cozystack"
	"github.com/cozystack/vlan-conformance/framework/image/imagetest"
	"github.com/cozystack/vlan-conformance/framework/subject"
)

// LocalMultusImage is the --cni-plugins-image the release configs name.
const LocalMultusImage = "localhost/vcf/multus-cni:test"

// ClusterRelease is a cluster-tier config under the Cozystack subset, and
// the subset opened and prepared, the stager staging from the suite's
// reference manifest; root is the checkout's root relative to the test's
// package, extra more flags. The test is skipped when the subset is not
// there.
func ClusterRelease(t *testing.T, root string, extra ...string) (*config.Config, *subject.Subject) {
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
	s, err := subject.Of(cfg)
	if err != nil {
		t.Fatalf("open the release: %v", err)
	}
	if err := s.Prepare(cfg); err != nil {
		t.Fatal(err)
	}
	return cfg, s
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

// LabWithoutGuide is a lab-tier config of a copy of the subset whose
// guide is removed, as a release that ships none, and that release: valid
// input, a test fails if it is refused.
func LabWithoutGuide(t *testing.T, root string) (*config.Config, *subject.Subject) {
	t.Helper()
	rel := Release(t, root)
	if err := os.Remove(rel.Path(cozystack.GuidePath)); err != nil {
		t.Fatal(err)
	}
	cfg, s, err := Lab(t, root, "--cozystack="+rel.Dir)
	if err != nil {
		t.Fatalf("a release without a guide is bad input: %v", err)
	}
	return cfg, s
}

// PinnedArchive is an OCI layout of a one-file image in a temporary
// directory, and the copy rel re-pinned to it: the release as it would
// ship that image.
func PinnedArchive(t *testing.T, rel *cozystack.Release, content string) (archive, digest string) {
	t.Helper()
	archive, digest = imagetest.WriteImage(t, filepath.Join(t.TempDir(), "oci"), false, [2]string{"usr/src/multus-cni/bin/multus-daemon", content})
	if err := rel.PinMultus(digest); err != nil {
		t.Fatal(err)
	}
	return archive, digest
}

// Lab is a lab-tier config of args, validated, and the release it names
// opened (subject.Of; nil without --cozystack) and, when valid, prepared.
// Its plugin directory and stager manifest default to the files of the
// checkout at root, as if from the command line's defaults, so that only
// the flags under test can be wrong. Validate's or Of's error is returned:
// bad input.
func Lab(t *testing.T, root string, args ...string) (*config.Config, *subject.Subject, error) {
	t.Helper()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	cfg := config.Register(fs)
	cfg.PluginDir = filepath.Join(root, "framework", "config", "testdata")
	cfg.StagerManifest = filepath.Join(root, "fixtures", "stager", "multus-daemonset.yaml")
	if err := fs.Parse(append([]string{"--report-dir=" + t.TempDir(), "--work-dir=" + t.TempDir()}, args...)); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		return cfg, nil, err
	}
	s, err := subject.Of(cfg)
	if err != nil {
		return cfg, nil, err
	}
	if err := s.Prepare(cfg); err != nil {
		t.Fatal(err)
	}
	return cfg, s, nil
}
