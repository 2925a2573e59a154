package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cozystack/vlan-conformance/framework/cozystack"
	"github.com/cozystack/vlan-conformance/framework/image/imagetest"
	"github.com/cozystack/vlan-conformance/framework/report"
)

// The release's pinned multus image, offline (issue 35; `make
// pinned-image-check`). Two images as the release's Dockerfile builds
// them, made here from bin/cni: one without the plugin stage (as v1.6.x
// builds it) and one with it, each written as a mirror holds it; a copy
// of the release re-pinned to each by digest; the stager specs run on it:
//
//	bin/cni/<CNI_PLUGINS_VERSION>/ ──the Dockerfile's names──▶ /cni-plugins ─▶ OCI layout ─┐
//	multus-daemon stand-in only (v1.6.x: no plugin stage)  ─────────────────▶ oci-archive ─┤
//	the release, copied to a temporary directory, its DaemonSet pinned @digest ◀────────────┘
//	bin/conformance run --tier=lab --lab-vm=never --cozystack=COPY --image-archive=ARCHIVE
//	    -- --ginkgo.label-filter=stager
//
// The image without /cni-plugins must fail STG-01 with the guide's own log
// line and the pinned reference; the one with them must pass; an archive
// of another digest is bad input (exit 2). The image with them is also
// served by an in-process registry on a loopback port, as a mirror of
// ghcr.io, and pulled with --pull-pinned --registry-mirror: it must pass
// the same, and a pin the mirror lacks must exit 2.
func TestPinnedImage(t *testing.T) {
	driver := pinnedPrereqs(t)
	rel, err := cozystack.Open(releaseDir())
	if err != nil {
		t.Fatal(err)
	}
	img, err := rel.MultusImage()
	if err != nil {
		t.Fatal(err)
	}
	if !img.Stages() {
		t.Fatalf("%s has no plugin stage: the image with plugins is built from its names", img.Dockerfile)
	}
	dir := t.TempDir()
	daemon := [2]string{"usr/src/multus-cni/bin/multus-daemon", "#!/bin/sh\n# stand-in for Multus\n"}
	entries := [][2]string{daemon, {"cni-plugins/", ""}}
	for _, p := range img.Plugins {
		b, err := os.ReadFile(filepath.Join(root, "bin", "cni", img.PluginsVersion, p))
		if err != nil {
			t.Fatalf("the plugins of %s (make plugins PLUGINS_VERSION=%s): %v", img.Dockerfile, img.PluginsVersion, err)
		}
		entries = append(entries, [2]string{"cni-plugins/" + p, string(b)})
	}
	withPlugins, withDigest := imagetest.WriteImage(t, filepath.Join(dir, "with-plugins"), false, entries...)
	without, withoutDigest := imagetest.WriteImage(t, filepath.Join(dir, "without-plugins.tar"), true, daemon)
	mirror, _ := imagetest.Registry(t)
	imagetest.Push(t, mirror, imagetest.Image(t, entries...))

	pinnedTo := func(digest string) (*cozystack.Release, string) {
		c, err := rel.CopyTo(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if err := c.PinMultus(digest); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(c.Path(cozystack.MultusChart + "/templates/multus-daemonset-thick.yml"))
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`image:\s*(\S+@` + digest + `)`).FindSubmatch(b)
		if m == nil {
			t.Fatalf("the copy pins no image at %s", digest)
		}
		return c, string(m[1])
	}

	t.Run("without /cni-plugins: STG-01 fails with the guide's line", func(t *testing.T) {
		c, ref := pinnedTo(withoutDigest)
		res := runPinned(t, driver, c.Dir, "--image-archive="+without)
		if res.code != 1 {
			t.Fatalf("exit %d, want 1 (a failed claim)\n%s", res.code, res.stderr)
		}
		v := res.verdict(t, "STG-01")
		t.Logf("STG-01: %s: %s (%s)", v.Verdict, v.Reason, res.took(t))
		if v.Verdict != "FAILED" || !strings.Contains(v.Reason, "no /cni-plugins in this image; skipping staging") || !strings.Contains(v.Reason, ref) {
			t.Errorf("STG-01: %s: %s\nwant FAILED with the line `no /cni-plugins in this image; skipping staging` and %s", v.Verdict, v.Reason, ref)
		}
		res.reportSays(t, report.ImagesHeading, "the pinned image itself, unchanged, from --image-archive "+without, "none, the image has no such directory")
	})

	t.Run("with /cni-plugins: the stager specs pass", func(t *testing.T) {
		c, ref := pinnedTo(withDigest)
		res := runPinned(t, driver, c.Dir, "--image-archive="+withPlugins)
		v := res.verdict(t, "STG-01")
		t.Logf("STG-01: %s (%s)", v.Verdict, res.took(t))
		// The cluster tier's STG-01 spec is left out by the label filter.
		if res.code != 0 || !strings.HasPrefix(v.Verdict, "passed") || v.Failed > 0 {
			t.Fatalf("exit %d, STG-01 %s: %s, want 0 and passed\n%s", res.code, v.Verdict, v.Reason, res.stderr)
		}
		res.reportSays(t, "the pinned image itself, unchanged, from --image-archive "+withPlugins, "`"+ref+"`", "manifest digest "+withDigest)
	})

	t.Run("another digest: bad input, exit 2", func(t *testing.T) {
		c, ref := pinnedTo(withoutDigest)
		res := runPinned(t, driver, c.Dir, "--image-archive="+withPlugins)
		t.Logf("exit %d: %s", res.code, res.stderr)
		if res.code != 2 || !strings.Contains(res.stderr, withDigest) || !strings.Contains(res.stderr, ref) {
			t.Fatalf("exit %d, want 2 and an error naming the archive's %s and the pin %s:\n%s", res.code, withDigest, ref, res.stderr)
		}
		if _, err := os.Stat(filepath.Join(res.reportDir, "conformance.md")); err == nil {
			t.Error("bad input wrote a report")
		}
	})

	t.Run("pulled from a mirror: the stager specs pass", func(t *testing.T) {
		t.Setenv("VCF_CACHE", t.TempDir())
		c, ref := pinnedTo(withDigest)
		res := runPinned(t, driver, c.Dir, "--pull-pinned", "--registry-mirror=ghcr.io="+mirror)
		v := res.verdict(t, "STG-01")
		t.Logf("STG-01: %s (%s)", v.Verdict, res.took(t))
		if res.code != 0 || !strings.HasPrefix(v.Verdict, "passed") || v.Failed > 0 {
			t.Fatalf("exit %d, STG-01 %s: %s, want 0 and passed\n%s", res.code, v.Verdict, v.Reason, res.stderr)
		}
		res.reportSays(t, "the pinned image itself, unchanged, from --pull-pinned: pulled from "+mirror+"/"+imagetest.PinnedRepo+"@"+withDigest, "`"+ref+"`", "manifest digest "+withDigest)
	})

	t.Run("a pin the mirror lacks: bad input, exit 2", func(t *testing.T) {
		t.Setenv("VCF_CACHE", t.TempDir())
		c, ref := pinnedTo(withoutDigest)
		res := runPinned(t, driver, c.Dir, "--pull-pinned", "--registry-mirror=ghcr.io="+mirror)
		t.Logf("exit %d: %s", res.code, res.stderr)
		for _, w := range []string{ref, "--registry-mirror ghcr.io=" + mirror, withDigest} {
			if res.code != 2 || !strings.Contains(res.stderr, w) {
				t.Errorf("exit %d, want 2 and an error naming %s:\n%s", res.code, w, res.stderr)
			}
		}
		if _, err := os.Stat(filepath.Join(res.reportDir, "conformance.md")); err == nil {
			t.Error("bad input wrote a report")
		}
	})
}

// pinnedPrereqs is the driver to run, or a skip: the test runs the stager
// specs (root), from the binaries `make build` makes, where
// VCF_PINNED_IMAGE is set (`make pinned-image-check`); there anything
// missing is a failure.
func pinnedPrereqs(t *testing.T) string {
	t.Helper()
	if os.Getenv("VCF_PINNED_IMAGE") == "" {
		t.Skip("VCF_PINNED_IMAGE unset: run `make pinned-image-check` (builds the driver, the suite and the plugins)")
	}
	if os.Geteuid() != 0 {
		t.Fatal("the stager specs need root (mount namespaces, chroot)")
	}
	for _, p := range []string{"bin/conformance", "bin/suites.test"} {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Fatalf("%v (make build)", err)
		}
	}
	if _, err := os.Stat(releaseDir()); err != nil {
		t.Fatalf("no release to copy: %v (COZYSTACK=DIR)", err)
	}
	driver, err := filepath.Abs(filepath.Join(root, "bin", "conformance"))
	if err != nil {
		t.Fatal(err)
	}
	return driver
}

// releaseDir is the release the images are pinned into copies of:
// VCF_COZYSTACK (make: $(COZYSTACK), relative to the checkout's root),
// else the subset beside the checkout.
func releaseDir() string {
	d := os.Getenv("VCF_COZYSTACK")
	if d == "" {
		d = filepath.Join("..", "shared", "subjects", "cozystack")
	}
	if !filepath.IsAbs(d) {
		d = filepath.Join(root, d)
	}
	abs, _ := filepath.Abs(d)
	return abs
}

type pinnedRun struct {
	code              int
	stderr, reportDir string
	seconds           float64
}

// runPinned runs the stager specs of release with the flags that give the
// pinned image, as a user would, from the checkout's root (the flags'
// defaults are paths in it).
func runPinned(t *testing.T, driver, release string, pinned ...string) pinnedRun {
	t.Helper()
	r := pinnedRun{reportDir: t.TempDir()}
	// Bounded, with room to wait for the machine's run lock as any run does
	// (fabric.LockFile); the specs themselves take seconds.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	args := append([]string{"run", "--tier=lab", "--lab-vm=never", "--cozystack=" + release}, pinned...)
	cmd := exec.CommandContext(ctx, driver, append(args, "--report-dir="+r.reportDir, "--work-dir="+t.TempDir(), "--", "--ginkgo.label-filter=stager")...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	r.seconds, r.stderr = time.Since(start).Seconds(), stderr.String()
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

// verdict is the claim's verdict in the run's JUnit, as the report gives it.
func (r pinnedRun) verdict(t *testing.T, id string) report.Verdict {
	t.Helper()
	cases, err := report.ReadJUnit(filepath.Join(r.reportDir, "junit.xml"))
	if err != nil {
		t.Fatalf("%v\n%s", err, r.stderr)
	}
	for _, v := range report.Verdicts(cases, r.reportDir) {
		if v.Claim.ID == id {
			return v
		}
	}
	t.Fatalf("no claim %s", id)
	return report.Verdict{}
}

// took is the run's wall time and its specs' (the run may first have
// waited for the machine's run lock).
func (r pinnedRun) took(t *testing.T) string {
	t.Helper()
	cases, err := report.ReadJUnit(filepath.Join(r.reportDir, "junit.xml"))
	if err != nil {
		t.Fatal(err)
	}
	var specs float64
	for _, c := range cases {
		specs += c.Time
	}
	return fmt.Sprintf("run %.1f s, its specs %.1f s", r.seconds, specs)
}

// reportSays checks that conformance.md says each of want.
func (r pinnedRun) reportSays(t *testing.T, want ...string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.reportDir, "conformance.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		if !strings.Contains(string(b), w) {
			t.Errorf("conformance.md does not say %q:\n%s", w, b)
		}
	}
}
