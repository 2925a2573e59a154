package labels

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
)

// with is a spec's labels: its container's and its claim's.
func with(container Labels, claim string) Labels {
	return append(append(Labels{}, container...), Claim(claim)...)
}

// A release without staging leaves out the STG specs, wherever they live
// (stager, release, cluster), and only them, under the user's filter too.
func TestWithoutStagingLeavesOutOnlyTheSTGSpecs(t *testing.T) {
	for _, tc := range []struct {
		user   string
		labels Labels
		want   bool
	}{
		{"", with(Stager, "STG-01"), false},
		{"", with(Release, "STG-10"), false},
		{"", with(Cluster, "STG-12"), false},
		{"", with(Stager, "VLAN-15"), true},
		{"", with(Datapath, "VLAN-01"), true},
		{"", with(ARP, "ARP-03"), true},
		{NativeLabel, with(Stager, "STG-02"), false},
		{"!" + NativeLabel, with(Datapath, "VLAN-03"), true},
		{"VLAN-01 || STG-01", with(Stager, "STG-01"), false},
		{"VLAN-01 || STG-01", with(Datapath, "VLAN-01"), true},
	} {
		f := WithoutStaging(tc.user)
		if got := tc.labels.MatchesLabelFilter(f); got != tc.want {
			t.Errorf("%v under %q: selected %v, want %v", tc.labels, f, got, tc.want)
		}
	}
}
