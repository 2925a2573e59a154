package evidence

import (
	"os"
	"path/filepath"
	"regexp"
)

// ReportDir is where artifacts go (<ReportDir>/artifacts/<claim>/); the
// suite's main sets it from --report-dir.
var ReportDir = "reports"

// ArtifactPath is the path of a named piece of evidence for a claim; its
// directory exists afterwards.
func ArtifactPath(claim, name string) string {
	dir := filepath.Join(ReportDir, "artifacts", claim)
	os.MkdirAll(dir, 0o755)
	return filepath.Join(dir, name)
}

var claimRE = regexp.MustCompile(`\[((?:VLAN|STG|ARP)-\d\d)\]`)

// ClaimOf extracts the claim ID from a spec text such as "[VLAN-03] ...".
func ClaimOf(text string) string {
	if m := claimRE.FindStringSubmatch(text); m != nil {
		return m[1]
	}
	return "unclaimed"
}
