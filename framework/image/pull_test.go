package image

import (
	"strings"
	"testing"
)

// A mirror takes the pin's repository path and digest; only the registry
// changes, to the first mirror of the pin's registry.
func TestPullRefThroughMirrors(t *testing.T) {
	const pin = "ghcr.io/cozystack/cozystack/multus-cni:v1.6.0@sha256:0a92e861ead179dd6b46f475fd8878d44b3cfa40ce4d7a8ff92f790d54250d25"
	const digest = "@sha256:0a92e861ead179dd6b46f475fd8878d44b3cfa40ce4d7a8ff92f790d54250d25"
	for _, tc := range []struct {
		ref     string
		mirrors []string
		want    string
		scheme  string
	}{
		{pin, nil, pin, "https"},
		{pin, []string{"quay.io=mirror.lan", "ghcr.io=localhost:5000"}, "localhost:5000/cozystack/cozystack/multus-cni" + digest, "http"},
		{pin, []string{"ghcr.io=mirror.lan:5000/ghcr/"}, "mirror.lan:5000/ghcr/cozystack/cozystack/multus-cni" + digest, "https"},
		{pin, []string{"ghcr.io=http://mirror.lan:5000"}, "mirror.lan:5000/cozystack/cozystack/multus-cni" + digest, "http"},
		{"docker.io/library/busybox:1" + digest, []string{"docker.io=mirror.lan"}, "mirror.lan/library/busybox" + digest, "https"},
	} {
		var ms []Mirror
		for _, s := range tc.mirrors {
			m, err := ParseMirror(s)
			if err != nil {
				t.Fatal(err)
			}
			ms = append(ms, m)
		}
		d, m, err := PullRef(tc.ref, ms)
		if err != nil || d.String() != tc.want || d.Scheme() != tc.scheme || (m == nil) != (len(tc.mirrors) == 0) {
			t.Errorf("%s via %v: %v %s (%s), mirror %v; want %s (%s)", tc.ref, tc.mirrors, err, d, d.Scheme(), m, tc.want, tc.scheme)
		}
	}
	for _, bad := range []string{"ghcr.io", "=localhost:5000", "ghcr.io=", "ghcr.io=https://mirror.lan", "ghcr.io=Mirror_Lan:x"} {
		if _, err := ParseMirror(bad); err == nil {
			t.Errorf("--registry-mirror=%s accepted", bad)
		}
	}
	if _, _, err := PullRef("ghcr.io/cozystack/cozystack/multus-cni:v1.6.0", nil); err == nil || !strings.Contains(err.Error(), "by no digest") {
		t.Errorf("a pin by tag only: %v", err)
	}
}
