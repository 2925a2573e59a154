package report

import (
	"strings"
	"testing"

	"github.com/cozystack/vlan-conformance/framework/claims"
)

func claim(t *testing.T, id string) claims.Claim {
	t.Helper()
	for _, c := range claims.All {
		if c.ID == id {
			return c
		}
	}
	t.Fatalf("no claim %s", id)
	return claims.Claim{}
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
	old := Guide{Path: "docs/vm-external-vlan.md", SHA256: "0123abcd", Text: "Attach the VLAN sub-interface to a bridge and point a `bridge`-type NAD at it. Then wait for the ARP entry to age out."}
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
	promising := old
	promising.Text += "\n" + stg01.Quote + "."
	vs = ForRelease(verdicts(), promising, noStaging)
	if v := vs[0]; v.Verdict != "FAILED" || !strings.Contains(v.Reason, stg01.Quote) || !strings.Contains(v.Reason, noStaging[0]) || !strings.Contains(v.Reason, "sha256 0123abcd") {
		t.Errorf("STG-01 promised by the guide, not staged by the release: %q: %s", v.Verdict, v.Reason)
	}
	if vs[1].Verdict != NotMade {
		t.Errorf("STG-08, which the guide does not word: %q", vs[1].Verdict)
	}

	// A release that stages: only the guide's words decide.
	vs = ForRelease(verdicts(), promising, nil)
	if vs[0].Verdict != "skipped" || vs[1].Verdict != "skipped" || vs[3].Verdict != NotInGuide {
		t.Errorf("a release that stages: STG-01 %q, STG-08 %q, VLAN-15 %q", vs[0].Verdict, vs[1].Verdict, vs[3].Verdict)
	}
}
