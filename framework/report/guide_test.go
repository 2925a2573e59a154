package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cozystack/vlan-conformance/framework/claims"
)

func claim(t *testing.T, id string) claims.Claim {
	t.Helper()
	c, ok := claims.ByID(id)
	if !ok {
		t.Fatalf("no claim %s", id)
	}
	return c
}

// What a release makes of each claim: its guide's words, and whether it
// stages. A claim it does not make gets no verdict; a staging its guide
// promises and its charts cannot do fails, quoting both.
func TestForRelease(t *testing.T) {
	stg01, vlan01, vlan15, arp03 := claim(t, "STG-01"), claim(t, "VLAN-01"), claim(t, "VLAN-15"), claim(t, "ARP-03")
	verdicts := func() []Verdict {
		return []Verdict{
			{Claim: stg01, Verdict: "skipped", Reason: "left out"},
			{Claim: claim(t, "STG-08"), Verdict: "skipped"}, // no quote: the suite's own words
			{Claim: vlan01, Verdict: "passed"},
			{Claim: vlan15, Verdict: "passed"},
			{Claim: arp03, Verdict: "FAILED", Reason: "the entry did not age out"},
		}
	}
	// A guide as v1.6.x ships it: the recipe, no staging section.
	old := &Guide{Name: "docs/vm-external-vlan.md as the release ships it", SHA256: "0123abcd", Text: "Attach the VLAN sub-interface to a bridge and point a `bridge`-type NAD at it. Then wait for the ARP entry to age out."}
	noStaging := []string{"packages/system/multus renders no init container install-cni-plugins", "packages/core/platform has no networking.stageCniPlugins"}

	vs := ForRelease(verdicts(), old, noStaging)
	for _, v := range vs[:2] {
		if v.Verdict != NotMade || !strings.Contains(v.Reason, noStaging[0]) || !strings.Contains(v.Reason, noStaging[1]) {
			t.Errorf("%s of a release without staging: %q: %s", v.Claim.ID, v.Verdict, v.Reason)
		}
	}
	if vs[2].Verdict != "passed" || vs[4].Verdict != "FAILED" {
		t.Errorf("the recipe's claims must keep their specs' verdicts: VLAN-01 %q, ARP-03 %q", vs[2].Verdict, vs[4].Verdict)
	}
	if v := vs[3]; v.Verdict != NotInGuide || !strings.Contains(v.Reason, "sha256 0123abcd") || !strings.Contains(v.Reason, vlan15.Quote) || !strings.Contains(v.Reason, "passed") {
		t.Errorf("VLAN-15, whose words the guide lacks: %q: %s", v.Verdict, v.Reason)
	}

	// The same charts under a guide that promises staging: they disagree.
	promising := *old
	promising.Text += "\n" + stg01.Quote + "."
	vs = ForRelease(verdicts(), &promising, noStaging)
	if v := vs[0]; v.Verdict != "FAILED" || !strings.Contains(v.Reason, stg01.Quote) || !strings.Contains(v.Reason, noStaging[0]) || !strings.Contains(v.Reason, "sha256 0123abcd") {
		t.Errorf("STG-01 promised by the guide, not staged by the release: %q: %s", v.Verdict, v.Reason)
	}
	if vs[1].Verdict != NotMade {
		t.Errorf("STG-08, which the guide does not word: %q", vs[1].Verdict)
	}

	// A release that stages: only the guide's words decide.
	vs = ForRelease(verdicts(), &promising, nil)
	if vs[0].Verdict != "skipped" || vs[1].Verdict != "skipped" || vs[3].Verdict != NotInGuide {
		t.Errorf("a release that stages: STG-01 %q, STG-08 %q, VLAN-15 %q", vs[0].Verdict, vs[1].Verdict, vs[3].Verdict)
	}
}

// No guide at all (no --guide, none in the release): every claim that
// rests on the guide's words has no verdict, and says so; the others keep
// their specs'; an STG claim of a release without staging is still not
// made by it. The report opens with the claims left unjudged.
func TestForReleaseWithoutAGuide(t *testing.T) {
	vs := ForRelease([]Verdict{
		{Claim: claim(t, "VLAN-01"), Verdict: "passed"},
		{Claim: claim(t, "VLAN-08"), Verdict: "passed"}, // no quote: the suite's own words
		{Claim: claim(t, "ARP-03"), Verdict: "FAILED", Reason: "the entry did not age out"},
	}, nil, nil)
	for _, v := range []Verdict{vs[0], vs[2]} {
		if v.Verdict != NoGuide || !strings.Contains(v.Reason, v.Claim.Quote) {
			t.Errorf("%s without a guide: %q: %s", v.Claim.ID, v.Verdict, v.Reason)
		}
	}
	if !strings.Contains(vs[2].Reason, "FAILED the entry did not age out") {
		t.Errorf("ARP-03 lost its specs' outcome: %s", vs[2].Reason)
	}
	if vs[1].Verdict != "passed" {
		t.Errorf("VLAN-08, which rests on no guide's words, lost its verdict: %q", vs[1].Verdict)
	}
	if v := ForRelease([]Verdict{{Claim: claim(t, "STG-01"), Verdict: "skipped"}}, nil, []string{"no init container"})[0]; v.Verdict != NotMade || strings.Contains(v.Reason, "guide") {
		t.Errorf("STG-01 of a release without staging or guide: %q: %s", v.Verdict, v.Reason)
	}

	path := filepath.Join(t.TempDir(), "conformance.md")
	if err := WriteConformance(path, Environment{Release: "abc", Guide: "none", NoGuide: "no guide was given"}, vs, nil); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	lines := strings.SplitN(string(b), "\n", 4)
	if want := "**No guide: no guide was given. The claims that rest on the guide's words therefore have no verdict: VLAN-01, ARP-03.**"; lines[2] != want {
		t.Errorf("the report's first lines:\n%s\nwant line 3:\n%s", strings.Join(lines[:3], "\n"), want)
	}
}
