package stager

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
)

// A cluster node's /opt/cni/bin reads as the harness's does, less provenance:
// a plugin's kind, mode and content hash, a directory placed at a plugin's
// name as a directory, a symlink not followed.
func TestListingReadsANodesDirectoryAsTheHarnessDoes(t *testing.T) {
	dir := t.TempDir()
	content := []byte("#!/bin/sh\necho bridge\n")
	if err := os.WriteFile(filepath.Join(dir, "bridge"), content, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "bridge"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "vlan"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("bridge", filepath.Join(dir, "macvlan")); err != nil {
		t.Fatal(err)
	}
	got, err := Listing(dir)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(content)
	if b := got["bridge"]; b.Kind != "file" || b.Perm != 0o755 || b.Hash != hex.EncodeToString(sum[:]) || b.Size != int64(len(content)) || b.Ino == 0 || b.MTime.IsZero() || b.Version != "" {
		t.Errorf("bridge: %+v", b)
	}
	if v := got["vlan"]; v.Kind != "dir" || v.Perm != 0o700 {
		t.Errorf("vlan: %+v", v)
	}
	if m := got["macvlan"]; m.Kind != "symlink" || m.Hash == got["bridge"].Hash {
		t.Errorf("macvlan: %+v", m)
	}
	if len(got) != 3 {
		t.Errorf("%d entries, want 3: %v", len(got), got)
	}
}
