// Package configtest builds, for the tests of the cluster tier's packages,
// a validated and prepared configuration whose subject is the verbatim
// Cozystack subset beside the checkout (../shared/subjects/cozystack).
package configtest

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/cozystack/vlan-conformance/framework/config"
)

// LocalMultusImage is the --cni-plugins-image the release configs name.
const LocalMultusImage = "localhost/vcf/multus-cni:test"

// ClusterRelease is a cluster-tier config under the Cozystack subset, the
// stager staging from the suite's reference manifest; root is the
// checkout's root relative to the test's package, extra more flags. The
// test is skipped when the subset is not there.
func ClusterRelease(t *testing.T, root string, extra ...string) *config.Config {
	t.Helper()
	dir := filepath.Join(root, "..", "shared", "subjects", "cozystack")
	if _, err := os.Stat(dir); err != nil {
		t.Skip("no Cozystack subset at " + dir)
	}
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
