// Package labels defines, once, the Ginkgo labels lanes select by: one per
// area, one per claim ID (the selftest runner focuses a control's claim with
// --ginkgo.label-filter=<ID>).
package labels

import (
	"slices"

	. "github.com/onsi/ginkgo/v2"
)

// NativeLabel marks specs that need root but no lab network: when the
// lab part runs in the lab VM, these run natively (cmd/conformance).
const NativeLabel = "native"

var (
	Datapath = Label("datapath")
	Stager   = Label("stager", NativeLabel)
	// Release: the release's charts rendered, no network at all (STG-10).
	Release = Label("release", NativeLabel)
	ARP     = Label("arp")
	Cluster = Label("cluster") // claims only a cluster can prove (VLAN-11, STG-12)
)

// Claim is the label of one claim, e.g. Claim("VLAN-03").
func Claim(id string) Labels { return Label(id) }

// withoutStaging leaves out every spec labelled with an STG claim.
const withoutStaging = "!/^STG-/"

// WithoutStaging is filter with the STG claims' specs left out: a release
// that cannot stage the CNI plugins makes none of those claims.
func WithoutStaging(filter string) string {
	if filter == "" {
		return withoutStaging
	}
	return "(" + filter + ") && " + withoutStaging
}

// Selected reports whether the run's label filter selects a spec that
// carries these labels (its containers' and its own): a container that
// prepares for its specs in BeforeAll prepares only for those that run.
func Selected(ls ...Labels) bool {
	var all Labels
	for _, l := range ls {
		all = append(all, l...)
	}
	return all.MatchesLabelFilter(GinkgoLabelFilter())
}

// SelectsAny reports whether the run selects a spec of any of these claims
// in a container labelled area: what a VM several specs share needs to
// know to boot ahead only for a run that takes it.
func SelectsAny(area Labels, claims ...string) bool {
	return slices.ContainsFunc(claims, func(c string) bool { return Selected(area, Claim(c)) })
}
