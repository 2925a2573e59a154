// Package cozystack models the release under test: a checkout of
// cozystack/cozystack (--cozystack=DIR), read in place. Its charts are
// rendered with Helm's own engine (chart.go), its multus image is read off
// its Dockerfile (dockerfile.go), its guide's blocks are the specs' inputs
// (guide.go), and every change the suite makes to what it renders is
// written into a Ledger (ledger.go) that the report prints whole.
//
//	DIR/
//	├── docs/vm-external-vlan.md                 the guide as shipped, unless --guide names another (optional)
//	└── packages/
//	    ├── core/platform                         Package cozystack.multus [networking.stageCniPlugins]
//	    ├── system/multus                         the DaemonSet [init container install-cni-plugins]
//	    │   └── images/multus-cni/{Dockerfile,patches/}  [its plugin stage]
//	    ├── system/kubevirt, kubevirt-instancetypes
//	    └── apps/vm-instance (+ library/cozy-lib)
//
// The parts in brackets are plugin staging, which no release before it
// has (v1.6.x): such a release is read and rendered all the same.
package cozystack

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The paths of a checkout the suite reads. Required ones are checked by
// Open; a checkout without them is bad input. The guide is not one of
// them: it is leaving the repository for the website (--guide), and a
// release without one is still tested, its guide's claims unjudged.
const (
	GuidePath      = "docs/vm-external-vlan.md"
	PlatformChart  = "packages/core/platform"
	MultusChart    = "packages/system/multus"
	MultusImageDir = "packages/system/multus/images/multus-cni"
	KubeVirtChart  = "packages/system/kubevirt"
	InstanceTypes  = "packages/system/kubevirt-instancetypes"
	VMInstance     = "packages/apps/vm-instance"
)

var required = []string{PlatformChart + "/Chart.yaml", MultusChart + "/Chart.yaml", MultusImageDir + "/Dockerfile"}

// Release is one checkout of cozystack/cozystack.
type Release struct {
	Dir string // absolute
	// Commit is the checkout's commit; CommitFrom says how it was read
	// ("git rev-parse HEAD" or "SOURCE").
	Commit, CommitFrom string
}

// Open checks that dir is a Cozystack checkout the suite can read and
// names its commit. It reads only; nothing is written.
func Open(dir string) (*Release, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%s: not a directory (want a checkout of cozystack/cozystack: git clone --depth 1 --branch <tag> https://github.com/cozystack/cozystack)", dir)
	}
	var missing []string
	for _, p := range required {
		if _, err := os.Stat(filepath.Join(abs, p)); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s: not a Cozystack checkout the suite can test: missing %s", dir, strings.Join(missing, ", "))
	}
	r := &Release{Dir: abs}
	if r.Commit, r.CommitFrom, err = commitOf(abs); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return r, nil
}

// commitOf reads the commit from git, else from the SOURCE file of a
// verbatim subset ("commit: <sha>").
func commitOf(dir string) (commit, from string, err error) {
	if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
		out, err := exec.Command("git", "-C", dir, "rev-parse", "HEAD").Output()
		if err == nil {
			return strings.TrimSpace(string(out)), "git rev-parse HEAD", nil
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "SOURCE"))
	if err != nil {
		return "", "", fmt.Errorf("cannot tell its commit: no git repository and no SOURCE file")
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "commit:"); ok && strings.TrimSpace(v) != "" {
			return strings.TrimSpace(v), "SOURCE", nil
		}
	}
	return "", "", fmt.Errorf("cannot tell its commit: SOURCE has no \"commit:\" line")
}

// Path is a path of the checkout.
func (r *Release) Path(p string) string { return filepath.Join(r.Dir, p) }

// Short is the commit as the report's first lines give it.
func (r *Release) Short() string {
	if len(r.Commit) > 12 {
		return r.Commit[:12]
	}
	return r.Commit
}
