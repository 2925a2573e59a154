package report

import (
	"fmt"
	"strings"

	"github.com/cozystack/vlan-conformance/framework/claims"
)

// What a release under test (--cozystack) does not make gets no verdict:
// any published release is a valid subject, and an older one says less.
const (
	// NotInGuide: the release's guide does not carry the claim's words.
	NotInGuide = "not in this release's guide"
	// NotMade: an STG claim of a release that cannot stage the plugins.
	NotMade = "not made by this release"
	// NoGuide: no guide to read the claim's words in (no --guide, and the
	// release ships none). The suite's copy of the guide never stands in.
	NoGuide = "no guide was given"
)

// Guide is the guide the release's claims are judged by, as the report
// names it: Name says which file and where it came from (the release, or
// --guide).
type Guide struct {
	Name, SHA256, Text string
}

// String is the guide as the report's rows and reasons give it.
func (g *Guide) String() string { return fmt.Sprintf("%s, sha256 %s", g.Name, g.SHA256) }

func (g *Guide) says(quote string) bool {
	return claims.Says(g.Text, quote)
}

// ForRelease is what the release makes of each claim. g is its guide, nil
// when there is none; noStaging lists the parts of plugin staging the
// release lacks (none: it stages). A claim its guide does not carry is
// NotInGuide, NoGuide without a guide; an STG claim of a release that
// cannot stage is NotMade, or FAILED where its guide promises it: the
// release and its guide disagree, and both are quoted. Any other claim
// keeps its specs' verdict; a replaced verdict keeps their outcome in the
// reason.
func ForRelease(vs []Verdict, g *Guide, noStaging []string) []Verdict {
	for i, v := range vs {
		q := v.Claim.Quote
		said := q != "" && g != nil && g.says(q)
		switch {
		case claims.Staging(v.Claim.ID) && len(noStaging) > 0 && said:
			vs[i].Verdict = "FAILED"
			vs[i].Reason = fmt.Sprintf("its guide says %q (%s), but the release cannot stage the CNI plugins: %s", q, g, strings.Join(noStaging, "; "))
		case claims.Staging(v.Claim.ID) && len(noStaging) > 0:
			vs[i].Verdict = NotMade
			vs[i].Reason = "it does not stage the CNI plugins: " + strings.Join(noStaging, "; ")
			if q != "" && g != nil {
				vs[i].Reason += fmt.Sprintf("; nor does its guide say %q", q)
			}
		case q != "" && g == nil:
			vs[i].Verdict = NoGuide
			vs[i].Reason = fmt.Sprintf("no guide to read %q in (its specs: %s)", q, strings.TrimSpace(v.Verdict+" "+v.Reason))
		case q != "" && !said:
			vs[i].Verdict = NotInGuide
			vs[i].Reason = fmt.Sprintf("%q is not in %s (its specs: %s)", q, g, strings.TrimSpace(v.Verdict+" "+v.Reason))
		}
	}
	return vs
}
