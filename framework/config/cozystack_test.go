package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cozystack/vlan-conformance/framework/config/configtest"
	"github.com/cozystack/vlan-conformance/framework/cozystack"
)

const root = "../.."

// A release without staging, as v1.6.x ships it, is a valid subject: it
// is rendered as it is, and it says which parts of staging it lacks. The
// stager's subject stays the suite's reference, which no STG verdict of
// the release rests on.
func TestReleaseWithoutStagingIsAccepted(t *testing.T) {
	rel := configtest.ReleaseWithoutStaging(t, root)
	if err := rel.DropGuideSection("Staging the reference CNI plugins"); err != nil {
		t.Fatal(err)
	}
	cfg, err := configtest.Lab(t, root, "--cozystack="+rel.Dir)
	if err != nil {
		t.Fatalf("a release without staging is bad input: %v", err)
	}
	s := cfg.Subject()
	if s.Stages() {
		t.Fatal("the release without staging is said to stage")
	}
	for i, part := range []string{cozystack.MultusChart + " ", cozystack.PlatformChart + " ", cozystack.MultusImageDir + "/Dockerfile "} {
		if len(s.NoStaging) != 3 || !strings.HasPrefix(s.NoStaging[i], part) {
			t.Errorf("what it lacks: %q, want three entries, #%d naming %s", s.NoStaging, i+1, part)
		}
	}
	if cfg.StagerManifest == s.Manifest {
		t.Errorf("the stager's subject is the release's render, which has no %s", "install-cni-plugins")
	}
	if _, err := os.Stat(s.Manifest); err != nil {
		t.Errorf("the release's multus render is not written for the run: %v", err)
	}
}

// The subset as shipped stages: nothing is said to be missing.
func TestReleaseWithStagingStages(t *testing.T) {
	subset := filepath.Join(root, "..", "shared", "subjects", "cozystack")
	if _, err := os.Stat(subset); err != nil {
		t.Skip("no Cozystack subset beside this checkout")
	}
	cfg, err := configtest.Lab(t, root, "--cozystack="+subset)
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.Subject(); !s.Stages() || cfg.StagerManifest != s.Manifest {
		t.Errorf("the subset stages the plugins: lacks %q, stager manifest %s", s.NoStaging, cfg.StagerManifest)
	}
}

// Bad input stays bad input: a directory that is not a Cozystack
// checkout, charts that do not render. One error names the file and why.
func TestBadReleaseIsBadInput(t *testing.T) {
	notCheckout := t.TempDir()
	os.WriteFile(filepath.Join(notCheckout, "README.md"), []byte("# not Cozystack\n"), 0o644)

	broken := func(chart, template string) string {
		rel := configtest.ReleaseWithoutStaging(t, root)
		p := rel.Path(chart + "/templates/" + template)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(p, append(b, []byte("\n{{ .Values.vcfNoSuchValue.deeper }}\n")...), 0o644)
		return rel.Dir
	}
	for _, tc := range []struct {
		dir  string
		want []string
	}{
		{notCheckout, []string{"--cozystack: " + notCheckout, "not a Cozystack checkout", cozystack.GuidePath, cozystack.MultusImageDir + "/Dockerfile"}},
		{broken(cozystack.MultusChart, "multus-daemonset-thick.yml"), []string{"--cozystack: ", "chart " + cozystack.MultusChart, "multus-daemonset-thick.yml", "vcfNoSuchValue"}},
		{broken(cozystack.PlatformChart, "bundles/system.yaml"), []string{"--cozystack: ", "chart " + cozystack.PlatformChart, "bundles/system.yaml", "vcfNoSuchValue"}},
	} {
		_, err := configtest.Lab(t, root, "--cozystack="+tc.dir)
		if err == nil {
			t.Errorf("%s: accepted", tc.dir)
			continue
		}
		if strings.Count(err.Error(), "\n") > 0 {
			t.Errorf("%s: more than the release's error: %v", tc.dir, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v\nwant it to say %q", tc.dir, err, w)
			}
		}
	}
}
