package main

import (
	"os"
	"strings"
	"testing"

	"github.com/cozystack/vlan-conformance/framework/claims"
	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/config/configtest"
	"github.com/cozystack/vlan-conformance/framework/cozystack"
	"github.com/cozystack/vlan-conformance/framework/report"
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
	cfg, err := configtest.Lab(t, root, "--cozystack="+rel.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range releaseVerdicts(cfg, ran()) {
		switch {
		case v.Claim.ID == "ARP-01":
			if v.Verdict != report.NotInGuide || !strings.Contains(v.Reason, cfg.Subject().Guide.SHA256) || !strings.Contains(v.Reason, "passed") {
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
	cfg, err := configtest.Lab(t, root, "--cozystack="+rel.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range releaseVerdicts(cfg, ran()) {
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
	cfg, err := configtest.Lab(t, root, "--cozystack="+rel.Dir)
	if err != nil {
		t.Fatalf("a release that disagrees with its guide is not bad input: %v", err)
	}
	for _, v := range releaseVerdicts(cfg, ran()) {
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
	cfg, err := configtest.Lab(t, root, "--cozystack="+rel.Dir)
	if err != nil {
		t.Fatal(err)
	}
	d := &driver{cfg: cfg}
	for _, c := range config.ControlsOn("lab") {
		if why := d.notRunReason(c); claims.Staging(c.Claim) != (why != "") {
			t.Errorf("%s: not run because %q", c.ID, why)
		}
	}
}
