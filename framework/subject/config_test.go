package subject_test

import (
	"slices"
	"testing"

	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/cozystack"
	"github.com/cozystack/vlan-conformance/framework/subject"
)

// The stager image carries what the release's Dockerfile extracts (nil
// without a release: the 14), as the selected control makes it.
func TestStagerImagePlugins(t *testing.T) {
	release := []string{"bridge", "macvlan", "loopback"}
	for _, tc := range []struct {
		control       string
		carried, want []string
	}{
		{"", nil, nil},
		{"", release, release},
		{"VLAN-15/image-without-macvlan", release, []string{"bridge", "loopback"}},
	} {
		cfg := &config.Config{Control: tc.control}
		var s *subject.Subject
		if tc.carried != nil {
			s = &subject.Subject{Image: &cozystack.MultusImage{Plugins: slices.Clone(tc.carried)}}
		}
		if got := s.StagerImagePlugins(cfg); !slices.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("--control=%q, the release's image carrying %v: got %v, want %v", tc.control, tc.carried, got, tc.want)
		}
	}
}
