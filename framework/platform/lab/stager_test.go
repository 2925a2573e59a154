package lab

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/stager"
	release "github.com/cozystack/vlan-conformance/framework/subject"
)

// stagerLab is a lab of one node, node-a, without a fabric: what the
// Stager reaches (its /opt/cni/bin, as newNode makes it) needs no netns.
func stagerLab(t *testing.T) (*Lab, *node) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (the stager's mount namespace)")
	}
	repo := filepath.Join("..", "..", "..")
	cfg := &config.Config{
		StagerManifest: filepath.Join(repo, stager.DefaultManifest),
		PluginDir:      filepath.Join(repo, "bin", "cni", "v1.9.1"),
		OldPluginDir:   filepath.Join(repo, "bin", "cni", "v1.6.2"),
		WorkDir:        t.TempDir(),
	}
	for _, d := range []string{cfg.PluginDir, cfg.OldPluginDir} {
		if _, err := os.Stat(filepath.Join(d, "bridge")); err != nil {
			t.Skip("plugins not built (make plugins)")
		}
	}
	l := &Lab{cfg: cfg, work: cfg.WorkDir}
	n, err := newNode(l, &fabric.NodeNetns{Spec: fabric.NodeSpec{Name: "node-a"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.closeMultus(); err != nil {
			t.Error(err)
		}
	})
	return l, n
}

// The first Stager call stages the node: the 14 become the image's copies,
// every other plugin stays newNode's link, and the run reads as a Ready pod.
func TestLabStagesANodeWhenFirstNamed(t *testing.T) {
	l, n := stagerLab(t)
	ctx := context.Background()
	if l.multus.harness != nil {
		t.Fatal("a lab no spec asked to stage built a harness")
	}
	bin, err := l.CNIBin(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := l.Payload(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range stager.StagedPlugins {
		if f := bin[p]; f.Kind != "file" || f.Hash != payload[p].Hash || f.Perm != 0o755 {
			t.Errorf("%s after staging: %s %o %.12s, want the image's copy %.12s, mode 0755", p, f.Kind, f.Perm, f.Hash, payload[p].Hash)
		}
	}
	for _, p := range stager.LeftAlone {
		if bin[p].Kind != "symlink" {
			t.Errorf("%s after staging: %s, want newNode's link to --plugin-dir", p, bin[p].Kind)
		}
	}
	run, err := l.StagerRun(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	if run.Pod != "lab/node-a" || !run.Ready || !run.Terminated || run.ExitCode != 0 {
		t.Errorf("StagerRun = %+v, want lab/node-a Ready, terminated with exit 0", run)
	}
}

// STG-03 on a lab node: a hand-placed bridge is replaced on the next run,
// by rename; WithoutPlugin takes a staged copy and a link away and puts
// each back as it was.
func TestLabRestageReplacesAPlacedFile(t *testing.T) {
	l, n := stagerLab(t)
	ctx := context.Background()
	restore, err := l.PlaceCNIFile(ctx, n, "bridge", []byte("#!/bin/sh\necho hand-placed bridge\n"))
	if err != nil {
		t.Fatal(err)
	}
	before, err := l.CNIBin(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Restage(ctx, n); err != nil {
		t.Fatal(err)
	}
	after, err := l.CNIBin(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := l.Payload(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := after["bridge"], before["bridge"]; a.Hash != payload["bridge"].Hash || a.Ino == b.Ino {
		t.Errorf("bridge after the re-run: inode %d sha256 %.12s; before: inode %d; want the image's copy %.12s on a new inode", a.Ino, a.Hash, b.Ino, payload["bridge"].Hash)
	}
	if err := restore(); err != nil {
		t.Fatal(err)
	}

	for _, p := range []string{"bridge", "loopback"} {
		was, err := stager.Stat(filepath.Join(n.binDir, p))
		if err != nil {
			t.Fatal(err)
		}
		back, err := n.WithoutPlugin(ctx, p)
		if err != nil {
			t.Fatalf("WithoutPlugin(%s), a %s: %v", p, was.Kind, err)
		}
		if _, err := os.Lstat(filepath.Join(n.binDir, p)); !os.IsNotExist(err) {
			t.Errorf("%s still there without it: %v", p, err)
		}
		if err := back(); err != nil {
			t.Fatal(err)
		}
		if is, err := stager.Stat(filepath.Join(n.binDir, p)); err != nil || is.Kind != was.Kind || is.Ino != was.Ino || is.Hash != was.Hash {
			t.Errorf("%s restored as %+v (%v), want %+v", p, is, err, was)
		}
	}
}

// STG-11 on a lab node: a directory where vlan goes; the run exits 0, its
// termination message names vlan, and the pod reads Ready.
func TestLabRunOverADirectoryReportsItAndStaysReady(t *testing.T) {
	l, n := stagerLab(t)
	ctx := context.Background()
	restore, err := l.PlaceCNIDir(ctx, n, "vlan")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Restage(ctx, n); err != nil {
		t.Fatalf("Restage: %v, want the pod Ready", err)
	}
	run, err := l.StagerRun(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	if !run.Ready || run.ExitCode != 0 || !strings.HasPrefix(run.Message, stager.SummaryPrefix) || !stager.NamesPlugin(run.Message, "vlan") {
		t.Errorf("StagerRun = %+v, want Ready, exit 0 and a termination message beginning %q naming vlan", run, stager.SummaryPrefix)
	}
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	if f, err := stager.Stat(filepath.Join(n.binDir, "vlan")); err != nil || f.Kind != "file" {
		t.Errorf("vlan after restore: %+v %v, want the staged copy back", f, err)
	}
}

// STG-09 on a lab node: with staging off the template has no stager, a
// re-created pod runs none and the directory stays as it was; on again,
// it runs. The chart is a stand-in that drops the stager when off (the
// release's own, rendered by Helm, in TestRenderedInits).
func TestLabStagingOff(t *testing.T) {
	l, n := stagerLab(t)
	ctx := context.Background()
	l.multus.render = func(on bool) ([]string, error) {
		if on {
			return []string{"install-multus-binary", stager.InitContainerName}, nil
		}
		return []string{"install-multus-binary"}, nil
	}
	before, err := l.CNIBin(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	inits, err := l.SetStaging(ctx, false)
	if err != nil || slices.Contains(inits, stager.InitContainerName) {
		t.Fatalf("SetStaging(off) = %q, %v: want no %s", inits, err, stager.InitContainerName)
	}
	if err := l.Restage(ctx, n); err != nil {
		t.Fatal(err)
	}
	after, err := l.CNIBin(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range before {
		if a := after[name]; a.Ino != b.Ino || a.Hash != b.Hash || !a.MTime.Equal(b.MTime) {
			t.Errorf("%s changed with staging off", name)
		}
	}
	if _, err := l.StagerRun(ctx, n); err == nil {
		t.Error("StagerRun with staging off reports a run")
	}
	if inits, err = l.SetStaging(ctx, true); err != nil || !slices.Contains(inits, stager.InitContainerName) {
		t.Fatalf("SetStaging(on) = %q, %v: want %s", inits, err, stager.InitContainerName)
	}
	if run, err := l.StagerRun(ctx, n); err != nil || run.ExitCode != 0 {
		t.Errorf("StagerRun after staging on: %+v, %v", run, err)
	}
}

// The release's chart decides what staging off renders: Cozystack's drops
// the stager and keeps Multus's own init container; without a release
// there is no chart to ask.
func TestRenderedInits(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "..", "shared", "subjects", "cozystack")
	if _, err := os.Stat(dir); err != nil {
		t.Skip("no release subset beside the checkout (../shared/subjects/cozystack)")
	}
	subj, err := release.Open(release.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	on, err := renderedInits(subj, true)
	if err != nil || !slices.Contains(on, stager.InitContainerName) {
		t.Fatalf("staging on: %q, %v: want %s", on, err, stager.InitContainerName)
	}
	off, err := renderedInits(subj, false)
	if err != nil || slices.Contains(off, stager.InitContainerName) || len(off) != len(on)-1 {
		t.Fatalf("staging off: %q, %v: want %q without %s", off, err, on, stager.InitContainerName)
	}
	if _, err := renderedInits(nil, false); !errors.Is(err, evidence.ErrNotObservable) {
		t.Fatalf("no release: %v, want not observable", err)
	}
}
