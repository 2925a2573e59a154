package subject_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cozystack/vlan-conformance/fixtures"
	"github.com/cozystack/vlan-conformance/framework/config/configtest"
	"github.com/cozystack/vlan-conformance/framework/cozystack"
	"github.com/cozystack/vlan-conformance/framework/subject"
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
	cfg, s, err := configtest.Lab(t, root, "--cozystack="+rel.Dir)
	if err != nil {
		t.Fatalf("a release without staging is bad input: %v", err)
	}
	if s.Stages() {
		t.Fatal("the release without staging is said to stage")
	}
	for i, part := range []string{cozystack.MultusChart + " ", cozystack.PlatformChart + " ", cozystack.MultusImageDir + "/Dockerfile "} {
		if len(s.NoStaging) != 3 || !strings.HasPrefix(s.NoStaging[i], part) {
			t.Errorf("what it lacks: %q, want three entries, #%d naming %s", s.NoStaging, i+1, part)
		}
	}
	if s.StagerManifest(cfg) == s.Manifest {
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
	cfg, s, err := configtest.Lab(t, root, "--cozystack="+subset)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Stages() || s.StagerManifest(cfg) != s.Manifest {
		t.Errorf("the subset stages the plugins: lacks %q, stager manifest %s", s.NoStaging, s.StagerManifest(cfg))
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
		{notCheckout, []string{"--cozystack: " + notCheckout, "not a Cozystack checkout", cozystack.PlatformChart, cozystack.MultusImageDir + "/Dockerfile"}},
		{broken(cozystack.MultusChart, "multus-daemonset-thick.yml"), []string{"--cozystack: ", "chart " + cozystack.MultusChart, "multus-daemonset-thick.yml", "vcfNoSuchValue"}},
		{broken(cozystack.PlatformChart, "bundles/system.yaml"), []string{"--cozystack: ", "chart " + cozystack.PlatformChart, "bundles/system.yaml", "vcfNoSuchValue"}},
	} {
		_, _, err := configtest.Lab(t, root, "--cozystack="+tc.dir)
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

// asWebsite is the release's guide as the website ships it: Hugo front
// matter on top and steps numbered "2." (made from the release's own
// guide at test time; no copy of either is kept here). Its NAD says
// cniVersion 0.4.0, so that a spec's input tells which guide it came from.
func asWebsite(t *testing.T, rel *cozystack.Release, dir string) string {
	t.Helper()
	b, err := os.ReadFile(rel.Path(cozystack.GuidePath))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.NewReplacer("## Step 1 — ", "## 1. ", "## Step 2 — ", "## 2. ", "## Step 3 — ", "## 3. ", `"cniVersion": "0.3.1"`, `"cniVersion": "0.4.0"`).Replace(string(b))
	if !strings.Contains(text, "## 2. ") || !strings.Contains(text, "0.4.0") {
		t.Fatal("the release's guide has no step 2 NAD to edit")
	}
	p := filepath.Join(dir, cozystack.GuideFile)
	os.MkdirAll(dir, 0o755)
	if err := os.WriteFile(p, []byte("---\ntitle: \"The website's page\"\nweight: 35\n---\n\n"+text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// --guide replaces the release's guide: the specs take their NAD from it,
// and the subject says where it came from.
func TestGuideFlagReplacesTheReleasesGuide(t *testing.T) {
	rel := configtest.Release(t, root)
	page := asWebsite(t, rel, filepath.Join(t.TempDir(), "content", "en", "docs", "next", "networking"))
	for _, arg := range []string{page, filepath.Dir(filepath.Dir(page))} {
		_, s, err := configtest.Lab(t, root, "--cozystack="+rel.Dir, "--guide="+arg)
		if err != nil {
			t.Fatalf("--guide=%s: %v", arg, err)
		}
		g := s.Guide
		if g.Path != page || g.Source != cozystack.FromFlag || g.Title != "The website's page" || !strings.Contains(g.Origin(), page+", given by --guide") {
			t.Errorf("--guide=%s: the guide read: %s %q %q", arg, g.Path, g.Source, g.Title)
		}
		if nad := s.NADConfig(subject.GuideNADFixture); !strings.Contains(nad, "0.4.0") {
			t.Errorf("--guide=%s: the NAD is not the given guide's: %s", arg, nad)
		}
	}
}

// A bad --guide is bad input: one error naming the path and why, before
// anything is created.
func TestBadGuideIsBadInput(t *testing.T) {
	rel := configtest.Release(t, root)
	site := t.TempDir()
	next := asWebsite(t, rel, filepath.Join(site, "next"))
	v16 := asWebsite(t, rel, filepath.Join(site, "v1.6"))
	notMD := filepath.Join(t.TempDir(), "guide.txt")
	os.WriteFile(notMD, []byte("# a guide\n"), 0o644)
	empty := filepath.Join(t.TempDir(), "empty.md")
	os.WriteFile(empty, []byte("---\ntitle: x\n---\n"), 0o644)
	noNAD := filepath.Join(t.TempDir(), "no-nad.md")
	os.WriteFile(noNAD, []byte("# A guide without its steps\n"), 0o644)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--guide=/nonexistent/guide.md"}, []string{"/nonexistent/guide.md: no such file or directory"}},
		{[]string{"--guide=" + t.TempDir()}, []string{"no " + cozystack.GuideFile}},
		{[]string{"--guide=" + site}, []string{"2 guides, pass one of them", next, v16}},
		{[]string{"--guide=" + notMD}, []string{notMD, "not a markdown file"}},
		{[]string{"--guide=" + empty}, []string{empty, "empty"}},
		{[]string{"--guide=" + noNAD}, []string{noNAD, "no NetworkAttachmentDefinition block"}},
	} {
		_, _, err := configtest.Lab(t, root, append([]string{"--cozystack=" + rel.Dir}, tc.args...)...)
		if err == nil {
			t.Errorf("%v: accepted", tc.args)
			continue
		}
		if strings.Count(err.Error(), "\n") > 0 || !strings.HasPrefix(err.Error(), "--guide: ") {
			t.Errorf("%v: want one error about --guide: %v", tc.args, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %v\nwant it to say %q", tc.args, err, w)
			}
		}
	}
	if _, _, err := configtest.Lab(t, root, "--guide="+next); err == nil || !strings.Contains(err.Error(), "--guide: ") || !strings.Contains(err.Error(), "--cozystack") {
		t.Errorf("--guide without a release: %v", err)
	}
}

// A release that ships no guide, and no --guide: not bad input. The
// guide is nil, never the seed's text; the specs apply the suite's own
// objects, and the ledger says so.
func TestReleaseWithoutAGuideRuns(t *testing.T) {
	_, s := configtest.LabWithoutGuide(t, root)
	if s.Guide != nil {
		t.Fatalf("a guide was read: %+v", s.Guide)
	}
	if s.NADConfig(subject.GuideNADFixture) != fixtures.NAD(subject.GuideNADFixture) || s.VLANNIC() != fixtures.VLANNIC || s.UserData("203.0.113.10/24") != fixtures.CloudInit("203.0.113.10/24") {
		t.Error("without a guide the specs must apply the suite's own objects")
	}
	var rows int
	for _, c := range s.Ledger.Changes() {
		if strings.Contains(c.Why, subject.NoGuide) && strings.HasPrefix(c.What, "the suite's own fixtures/") {
			rows++
		}
	}
	if rows != 2 {
		t.Errorf("the ledger must say the NAD and the userData are the suite's own: %+v", s.Ledger.Changes())
	}
}
