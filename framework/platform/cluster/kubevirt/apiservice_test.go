package kubevirt

import (
	"strings"
	"testing"
)

// The condition as the API server wrote it in the cold CI run where every
// console got 503, and as it reads once virt-api is reachable.
func TestAPIServiceAvailable(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want bool
		says string
	}{
		{`{"status":{"conditions":[{"type":"Available","status":"False","reason":"FailedDiscoveryCheck","message":"failing or missing response from https://10.96.10.43:443/apis/subresources.kubevirt.io/v1: bad status from https://10.96.10.43:443/apis/subresources.kubevirt.io/v1: 404"}]}}`, false, "FailedDiscoveryCheck"},
		{`{"status":{"conditions":[{"type":"Available","status":"True","reason":"Passed","message":"all checks passed"}]}}`, true, "Available=True"},
		{`{"status":{}}`, false, "no Available condition"},
	} {
		got, says, err := apiServiceAvailable([]byte(tc.raw))
		if err != nil || got != tc.want || !strings.Contains(says, tc.says) {
			t.Errorf("%s: got %v %q %v, want %v and %q", tc.raw, got, says, err, tc.want, tc.says)
		}
	}
	if _, _, err := apiServiceAvailable([]byte("<html>")); err == nil {
		t.Error("a body that is not an APIService must be an error")
	}
}
