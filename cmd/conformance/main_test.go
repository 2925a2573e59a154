package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cozystack/vlan-conformance/framework/fabric"
)

func suiteNamespaces(t *testing.T) []string {
	entries, _ := os.ReadDir(fabric.NetnsDir)
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), fabric.Prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// Bad input: one clear error, exit 2, nothing created.
func TestBadInputExitsTwoAndCreatesNothing(t *testing.T) {
	before := suiteNamespaces(t)
	t.Setenv("VCF_CACHE", t.TempDir())
	release := filepath.Join(root, "..", "shared", "subjects", "cozystack")
	site := t.TempDir() // a website checkout: one page per version
	for _, v := range []string{"next", "v1.6"} {
		os.MkdirAll(filepath.Join(site, v), 0o755)
		os.WriteFile(filepath.Join(site, v, "vm-external-vlan.md"), []byte("---\ntitle: x\n---\n# guide\n"), 0o644)
	}
	for _, args := range [][]string{
		{"run", "--vlan=5000"},
		{"run", "--subnet=203.0.113.0/99"},
		{"run", "--gateway=198.51.100.1"},
		{"run", "--uplink=vcf-missing0"},
		{"run", "--plugin-dir=/nonexistent"},
		{"selftest", "--lab-vm=sometimes"},
		// The controls' claims judged by a later run: only where a cluster
		// is shared with the runs after the controls.
		{"selftest", "--afterwards=never"},
		{"selftest", "--afterwards=later"},
		{"run", "--tier=cluster", "--dry-run", "--afterwards=later"},
		{"selftest", "--time-budget=30m"},
		{"selftest", "--tier=cluster", "--dry-run", "--time-budget=-1m"},
		// Not a Cozystack checkout (TestBadReleaseIsBadInput: the message).
		{"run", "--cozystack=" + t.TempDir()},
		{"run", "--tier=cluster", "--dry-run", "--cozystack=" + t.TempDir()},
		// A --guide that is no one guide (TestBadGuideIsBadInput: the messages).
		{"run", "--tier=cluster", "--dry-run", "--cozystack=" + release, "--guide=/nonexistent"},
		{"run", "--tier=cluster", "--dry-run", "--cozystack=" + release, "--guide=" + site},
		{"run", "--tier=cluster", "--dry-run", "--cozystack=" + release, "--guide=" + t.TempDir()},
		{"run", "--tier=cluster", "--dry-run", "--guide=" + filepath.Join(site, "next")},
		// No control exists in the cluster lane: applying one there would
		// change nothing and look uncaught.
		{"run", "--tier=cluster", "--dry-run", "--control=VLAN-01/no-vlan-subinterface"},
		// A pinned image the mirror cannot give (TestPullPinnedFailuresAreBadInput: the messages).
		{"run", "--cozystack=" + release, "--pull-pinned", "--registry-mirror=ghcr.io=127.0.0.1:1"},
		{"frobnicate"},
	} {
		os.Args = append([]string{"conformance"}, args...)
		if code := mainCode(); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	if after := suiteNamespaces(t); len(after) != len(before) {
		t.Fatalf("bad input created namespaces: %v", after)
	}
}

// A repeatable flag reaches the suite binary once per value, as given.
func TestRepeatedFlagsReachTheSuite(t *testing.T) {
	d := &driver{sub: "run", rawArgs: []string{"--image-archive=/a.tar", "--image-archive=/b,c.tar", "--pull-pinned", "--registry-mirror=ghcr.io=a:5000", "--registry-mirror=quay.io=b"}}
	_ = d.parse() // no --cozystack: bad input, but the arguments are parsed first
	if got := strings.Join(d.suiteArgs, " "); got != "--image-archive=/a.tar --image-archive=/b,c.tar --pull-pinned=true --registry-mirror=ghcr.io=a:5000 --registry-mirror=quay.io=b" {
		t.Fatalf("the suite's arguments: %q", got)
	}
}

// An interrupted suite gets the driver's grace, not Ginkgo's 30 s, for its
// cleanup; one the user gave is kept.
func TestSuiteGetsTheDriversGrace(t *testing.T) {
	got := withGracePeriod([]string{"--tier=cluster"})
	if want := "--ginkgo.grace-period=" + (interruptGrace - 30*time.Second).String(); len(got) != 2 || got[1] != want {
		t.Errorf("got %v, want --tier=cluster %s", got, want)
	}
	mine := []string{"--tier=cluster", "-ginkgo.grace-period=5s"}
	if got := withGracePeriod(mine); len(got) != 2 {
		t.Errorf("a given grace period must be kept alone: %v", got)
	}
}
