package evidence

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cozystack/vlan-conformance/framework/claims"
)

// Artifacts is a run's evidence tree, <report-dir>/artifacts/<claim>/: a
// value the suite's main makes from --report-dir and hands down.
type Artifacts struct {
	ReportDir string
}

// Path is the path of a named piece of evidence for a claim; its directory
// exists afterwards.
func (a Artifacts) Path(claim, name string) string {
	dir := filepath.Join(a.ReportDir, "artifacts", claim)
	os.MkdirAll(dir, 0o755)
	return filepath.Join(dir, name)
}

// ClaimOf extracts the claim ID from a spec text such as "[VLAN-03] ...".
func ClaimOf(text string) string {
	if ids := claims.IDs(text); len(ids) > 0 {
		return ids[0]
	}
	return "unclaimed"
}

// Note appends a line of evidence (an observation a spec judged) to the
// claim's evidence.txt, so a passing verdict shows what it rests on.
func (a Artifacts) Note(claim, format string, args ...any) {
	f, err := os.OpenFile(a.Path(claim, "evidence.txt"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, time.Now().UTC().Format("15:04:05.000")+" "+format+"\n", args...)
}
