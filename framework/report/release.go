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
)

// Guide is the release's guide as the report names it.
type Guide struct {
	Path, SHA256, Text string
}

func (g Guide) says(quote string) bool {
	return strings.Contains(claims.Normalize(g.Text), claims.Normalize(quote))
}

// ForRelease is what the release makes of each claim. noStaging lists the
// parts of plugin staging the release lacks (none: it stages). A claim its
// guide does not carry is NotInGuide; an STG claim of a release that
// cannot stage is NotMade, or FAILED where its guide promises it: the
// release and its guide disagree, and both are quoted. Any other claim
// keeps its specs' verdict; a replaced verdict keeps their outcome in the
// reason.
func ForRelease(vs []Verdict, g Guide, noStaging []string) []Verdict {
	guide := fmt.Sprintf("%s, sha256 %s", g.Path, g.SHA256)
	for i, v := range vs {
		q := v.Claim.Quote
		said := q != "" && g.says(q)
		switch {
		case claims.Staging(v.Claim.ID) && len(noStaging) > 0 && said:
			vs[i].Verdict = "FAILED"
			vs[i].Reason = fmt.Sprintf("its guide says %q (%s), but the release cannot stage the CNI plugins: %s", q, guide, strings.Join(noStaging, "; "))
		case claims.Staging(v.Claim.ID) && len(noStaging) > 0:
			vs[i].Verdict = NotMade
			vs[i].Reason = "it does not stage the CNI plugins: " + strings.Join(noStaging, "; ")
			if q != "" {
				vs[i].Reason += fmt.Sprintf("; nor does its guide say %q", q)
			}
		case q != "" && !said:
			vs[i].Verdict = NotInGuide
			vs[i].Reason = fmt.Sprintf("%q is not in %s (its specs: %s)", q, guide, strings.TrimSpace(v.Verdict+" "+v.Reason))
		}
	}
	return vs
}
