package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cozystack/vlan-conformance/framework/claims"
	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/config/configtest"
	"github.com/cozystack/vlan-conformance/framework/controls"
	"github.com/cozystack/vlan-conformance/framework/cozystack"
	"github.com/cozystack/vlan-conformance/framework/image/imagetest"
	"github.com/cozystack/vlan-conformance/framework/report"
	"github.com/cozystack/vlan-conformance/framework/subject"
)

const root = "../.."

// stagingSection is the guide's section releases before staging lack.
const stagingSection = "Staging the reference CNI plugins"

// ran is a run in which every spec of the catalogue passed, the STG ones
// left out by the label filter (a release without staging).
func ran() []report.Verdict {
	var vs []report.Verdict
	for _, c := range claims.All {
		v := report.Verdict{Claim: c, Verdict: "passed", Passed: 1}
		if claims.Staging(c.ID) {
			v = report.Verdict{Claim: c, Verdict: "skipped", Skipped: 1, Reason: "not run: left out by the label filter"}
		}
		vs = append(vs, v)
	}
	return vs
}

// A release whose guide dropped a claim's sentence gets no verdict on it:
// "not in this release's guide", with the guide's sha256.
func TestGuideThatDroppedASentenceGetsNoVerdict(t *testing.T) {
	rel := configtest.Release(t, root)
	g := rel.Path(cozystack.GuidePath)
	b, _ := os.ReadFile(g)
	edited := strings.ReplaceAll(string(b), "generates a fresh guest MAC", "keeps the guest MAC")
	if edited == string(b) {
		t.Fatal("the guide has no ARP-01 sentence to drop")
	}
	os.WriteFile(g, []byte(edited), 0o644)
	_, s, err := configtest.Lab(t, root, "--cozystack="+rel.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range releaseVerdicts(s, ran()) {
		switch {
		case v.Claim.ID == "ARP-01":
			if v.Verdict != report.NotInGuide || !strings.Contains(v.Reason, s.Guide.SHA256) || !strings.Contains(v.Reason, "passed") {
				t.Errorf("ARP-01: %q (%s)", v.Verdict, v.Reason)
			}
		case v.Claim.ID == "VLAN-01" && v.Verdict != "passed":
			t.Errorf("VLAN-01 lost its verdict: %q", v.Verdict)
		}
	}
}

// A release without staging, guide included (v1.6.x): its STG claims are
// not made by it, and say which parts it lacks; the recipe's claims keep
// their specs' verdicts; a claim of the dropped section is not in its
// guide.
func TestReleaseWithoutStagingMakesNoSTGClaim(t *testing.T) {
	rel := configtest.ReleaseWithoutStaging(t, root)
	if err := rel.DropGuideSection(stagingSection); err != nil {
		t.Fatal(err)
	}
	_, s, err := configtest.Lab(t, root, "--cozystack="+rel.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range releaseVerdicts(s, ran()) {
		switch id := v.Claim.ID; {
		case claims.Staging(id):
			if v.Verdict != report.NotMade || !strings.Contains(v.Reason, "install-cni-plugins") || !strings.Contains(v.Reason, "stageCniPlugins") || !strings.Contains(v.Reason, "Dockerfile has no plugin stage") {
				t.Errorf("%s: %q (%s)", id, v.Verdict, v.Reason)
			}
		case id == "VLAN-15": // "so a NAD naming macvlan, ipvlan or vlan fails there too": the staging section's
			if v.Verdict != report.NotInGuide {
				t.Errorf("%s: %q (%s)", id, v.Verdict, v.Reason)
			}
		case v.Verdict != "passed":
			t.Errorf("%s, a claim of the guide's recipe, must be judged by its specs: %q (%s)", id, v.Verdict, v.Reason)
		}
	}
}

// Charts that cannot stage under a guide that says they do: the release
// and its guide disagree, and the claim fails quoting both.
func TestGuidePromisingStagingTheChartsCannotDoFails(t *testing.T) {
	rel := configtest.ReleaseWithoutStaging(t, root)
	_, s, err := configtest.Lab(t, root, "--cozystack="+rel.Dir)
	if err != nil {
		t.Fatalf("a release that disagrees with its guide is not bad input: %v", err)
	}
	for _, v := range releaseVerdicts(s, ran()) {
		if v.Claim.ID != "STG-01" {
			continue
		}
		if v.Verdict != "FAILED" || !strings.Contains(v.Reason, v.Claim.Quote) || !strings.Contains(v.Reason, "renders no init container install-cni-plugins") {
			t.Errorf("STG-01: %q (%s)", v.Verdict, v.Reason)
		}
	}
}

// A release without staging runs no STG control: its specs are left out,
// so a control there could only look uncaught. The others run.
func TestSelftestRunsNoSTGControlOfAReleaseWithoutStaging(t *testing.T) {
	rel := configtest.ReleaseWithoutStaging(t, root)
	cfg, s, err := configtest.Lab(t, root, "--cozystack="+rel.Dir)
	if err != nil {
		t.Fatal(err)
	}
	d := &driver{cfg: cfg, subj: s}
	for _, c := range controls.On("lab") {
		if why := d.notRunReason(c); claims.Staging(c.Claim) != (why != "") {
			t.Errorf("%s: not run because %q", c.ID, why)
		}
	}
}

// A release that ships no guide, run without --guide: the run proceeds;
// every claim resting on the guide's words has no verdict, the report's
// first lines say so and name them, and the others keep their specs'.
func TestReleaseWithoutAGuideJudgesNoClaimOfIt(t *testing.T) {
	cfg, s := configtest.LabWithoutGuide(t, root)
	vs := releaseVerdicts(s, ran())
	var unjudged []string
	for _, v := range vs {
		switch {
		case v.Claim.Quote != "":
			if v.Verdict != report.NoGuide || !strings.Contains(v.Reason, "no guide to read") || !strings.Contains(v.Reason, "its specs: ") {
				t.Errorf("%s: %q (%s)", v.Claim.ID, v.Verdict, v.Reason)
			}
			unjudged = append(unjudged, v.Claim.ID)
		case v.Verdict != "passed" && !claims.Staging(v.Claim.ID):
			t.Errorf("%s rests on no guide's words, yet lost its verdict: %q", v.Claim.ID, v.Verdict)
		}
	}
	var env report.Environment
	describeRelease(cfg, s, &env)
	if env.NoGuide == "" || !strings.HasPrefix(env.Guide, "none: ") {
		t.Fatalf("the report's guide rows: %q, %q", env.Guide, env.NoGuide)
	}
	out := filepath.Join(t.TempDir(), "conformance.md")
	if err := report.WriteConformance(out, env, vs, nil); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(out)
	first := strings.SplitN(string(b), "\n", 4)[2]
	if !strings.Contains(first, subject.NoGuide) || !strings.HasSuffix(first, strings.Join(unjudged, ", ")+".**") {
		t.Errorf("the report's first lines must say no guide was given and name %v:\n%s", unjudged, first)
	}
	if !strings.Contains(string(b), "the suite's own fixtures/nad/") {
		t.Error("the report's changes must say the specs applied the suite's own NAD")
	}
}

// With --guide the report names that file, where it came from and its
// sha256, and a dry run says which claims its words leave unjudged.
func TestGuideFlagIsNamedInTheReport(t *testing.T) {
	rel := configtest.Release(t, root)
	b, _ := os.ReadFile(rel.Path(cozystack.GuidePath))
	// The page without its ARP gotcha: ARP-01's words are gone.
	edited := strings.ReplaceAll(string(b), "generates a fresh guest MAC", "keeps the guest MAC")
	page := filepath.Join(t.TempDir(), cozystack.GuideFile)
	os.WriteFile(page, []byte("---\ntitle: \"From the website\"\n---\n"+edited), 0o644)
	cfg, s, err := configtest.Lab(t, root, "--cozystack="+rel.Dir, "--guide="+filepath.Dir(page))
	if err != nil {
		t.Fatal(err)
	}
	var env report.Environment
	describeRelease(cfg, s, &env)
	if g := s.Guide; !strings.Contains(env.Guide, page+", given by --guide") || !strings.Contains(env.Guide, g.SHA256) || env.NoGuide != "" {
		t.Errorf("the report's guide row: %q", env.Guide)
	}
	for _, v := range releaseVerdicts(s, ran()) {
		if v.Claim.ID == "ARP-01" && (v.Verdict != report.NotInGuide || !strings.Contains(v.Reason, page)) {
			t.Errorf("ARP-01: %q (%s)", v.Verdict, v.Reason)
		}
	}
	lines := guideLines(s)
	if !strings.HasPrefix(lines, "# the guide: "+env.Guide+"\n") || !strings.Contains(lines, "# "+report.NotInGuide+", whatever the specs find: ARP-01\n") {
		t.Errorf("the dry run's lines on the guide:\n%s", lines)
	}
}

// The report names every image the release pins and what the run used
// for it: the suite's build of the stager's image, or with --image-archive
// the pinned image itself; the ledger's row says the same, in the form of
// the cluster tier's image rewrites.
func TestReportNamesThePinnedImages(t *testing.T) {
	rel := configtest.Release(t, root)
	archive, digest := configtest.PinnedArchive(t, rel, "pinned")
	for _, tc := range []struct {
		args      []string
		stager    string // what the install-cni-plugins row says was used
		ledgerRow string
		passedOn  string // what the STG verdicts say they hold for
	}{
		{nil, "an image built from the checkout: the suite's build of its /cni-plugins", " → the suite's build of its /cni-plugins", "an image built from the checkout, not the pinned "},
		{[]string{"--image-archive=" + archive}, "the pinned image itself, unchanged, from --image-archive " + archive, ", unchanged: its /cni-plugins read from --image-archive " + archive, ""},
	} {
		cfg, s, err := configtest.Lab(t, root, append([]string{"--cozystack=" + rel.Dir}, tc.args...)...)
		if err != nil {
			t.Fatal(err)
		}
		var env report.Environment
		describeRelease(cfg, s, &env)
		if len(s.Images) != 3 {
			t.Fatalf("the multus render's images: %v, want its three containers", s.Images)
		}
		for _, im := range s.Images {
			if !strings.HasSuffix(im.Ref, "@"+digest) {
				t.Errorf("%s pins %s, not the copy's digest", im, im.Ref)
			}
			want := "none: the lab starts no Multus daemon"
			if im.Name == "install-cni-plugins" {
				want = tc.stager
			}
			if row := fmt.Sprintf("| %s | `%s` | %s", im, im.Ref, want); !strings.Contains(env.Images, row) {
				t.Errorf("%v: the report's images do not say %q:\n%s", tc.args, row, env.Images)
			}
		}
		im, _ := s.StagerImageRef()
		if !strings.Contains(env.Changes, "| image | "+im.String()+" | "+im.Ref+tc.ledgerRow) {
			t.Errorf("%v: no ledger row for %s:\n%s", tc.args, im, env.Changes)
		}
		if want := tc.passedOn; (want == "") != (env.StagerImage == "") || !strings.HasPrefix(env.StagerImage, want) {
			t.Errorf("%v: the STG verdicts are said to hold for %q, want %q", tc.args, env.StagerImage, want)
		}
	}
}

// With --pull-pinned the stager's row names the pull (the reference and
// the mirror it came from, the layout it is kept in); without any pinned
// image the report names each pinned reference the suite did not inspect.
func TestReportNamesPulledAndUninspectedImages(t *testing.T) {
	t.Setenv("VCF_CACHE", t.TempDir())
	rel := configtest.Release(t, root)
	img := imagetest.Image(t, [2]string{"cni-plugins/bridge", "pulled"})
	h, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if err := rel.PinMultus(h.String()); err != nil {
		t.Fatal(err)
	}
	host, _ := imagetest.Registry(t)
	imagetest.Push(t, host, img)
	ref := "ghcr.io/" + imagetest.PinnedRepo + ":" + imagetest.PinnedTag + "@" + h.String()
	from := host + "/" + imagetest.PinnedRepo + "@" + h.String() + " (--registry-mirror ghcr.io=" + host + ")"
	for _, tc := range []struct {
		args []string
		want []string
		not  string
	}{
		{[]string{"--pull-pinned", "--registry-mirror=ghcr.io=" + host}, []string{
			"| the pinned image itself, unchanged, from --pull-pinned: pulled from " + from + ", kept as the OCI layout " + config.PulledCache(),
			"`--pull-pinned`: `" + ref + "`, pulled from " + from}, "Not inspected"},
		{nil, []string{"Not inspected by the suite: `" + ref + "` (no --image-archive held it; --pull-pinned did not pull it)",
			"not the pinned image: the STG verdicts hold for that build (--image-archive or --pull-pinned gives the pinned one)"}, "pulled from"},
	} {
		cfg, s, err := configtest.Lab(t, root, append([]string{"--cozystack=" + rel.Dir}, tc.args...)...)
		if err != nil {
			t.Fatal(err)
		}
		var env report.Environment
		describeRelease(cfg, s, &env)
		for _, w := range tc.want {
			if !strings.Contains(env.Images, w) {
				t.Errorf("%v: the report's images do not say %q:\n%s", tc.args, w, env.Images)
			}
		}
		if strings.Contains(env.Images, tc.not) {
			t.Errorf("%v: the report's images say %q:\n%s", tc.args, tc.not, env.Images)
		}
	}
}
