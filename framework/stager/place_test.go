package stager

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// executing copies a real executable to dir/name and runs it there until
// the test ends, as a node's bridge runs during a CNI call.
func executing(t *testing.T, dir, name string) *exec.Cmd {
	t.Helper()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep(1) to execute")
	}
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(p, "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// The race CI met (issue 20): a plugin executing from /opt/cni/bin while
// the suite places a file of the same name. Writing in place fails with
// ETXTBSY; PlaceFile goes aside and renames, so it succeeds, and the
// running plugin keeps its own inode.
func TestPlaceFileOverAnExecutingPlugin(t *testing.T) {
	dir := t.TempDir()
	cmd := executing(t, dir, "bridge")
	path := filepath.Join(dir, "bridge")
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	// The hazard is real on this kernel: the write the spec used to make.
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"), 0o755); !errors.Is(err, syscall.ETXTBSY) {
		t.Fatalf("writing into an executing binary: got %v, want ETXTBSY (the race is not reproduced)", err)
	}

	placed := []byte("#!/bin/sh\necho hand-placed bridge\n")
	restore, err := PlaceFile(dir, "bridge", placed, 0o755)
	if err != nil {
		t.Fatalf("PlaceFile over an executing bridge: %v", err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, placed) {
		t.Fatalf("bridge holds %q after PlaceFile, want the placed content", got)
	}
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the executing bridge was disturbed: %v", err)
	}
	exe, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "exe"))
	if err != nil || !strings.HasSuffix(exe, "(deleted)") {
		t.Fatalf("the running bridge's executable is %q (%v), want its old, now unlinked inode", exe, err)
	}

	// The restore runs while the old binary still executes: by rename too.
	if err := restore(); err != nil {
		t.Fatalf("restore over an executing bridge: %v", err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, before) {
		t.Fatal("restore did not put the earlier bridge back")
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o755 {
		t.Fatalf("restored bridge has mode %o, want 0755", fi.Mode().Perm())
	}
	noTemporaries(t, dir)
}

func TestPlaceFileWhereNoneWasIsRemovedByRestore(t *testing.T) {
	dir := t.TempDir()
	restore, err := PlaceFile(dir, "vcf-foreign-plugin", []byte("x"), 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "vcf-foreign-plugin")); !os.IsNotExist(err) {
		t.Fatalf("the placed file is still there after restore: %v", err)
	}
	noTemporaries(t, dir)
}

func noTemporaries(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".vcf-") {
			t.Errorf("temporary %s left in %s", e.Name(), dir)
		}
	}
}

// STG-11's fault: a directory where a plugin was. The plugin goes aside by
// rename (its inode kept) and comes back the same way; where there was no
// plugin, restore leaves nothing.
func TestPlaceDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bin")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "vlan")
	if err := os.WriteFile(path, []byte("the image's vlan"), 0o755); err != nil {
		t.Fatal(err)
	}
	inode := func(p string) uint64 {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	was := inode(path)

	restore, err := PlaceDir(dir, "vlan")
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(path); err != nil || !fi.IsDir() {
		t.Fatalf("after PlaceDir, %s: %v %v, want a directory", path, fi, err)
	}
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "the image's vlan" || inode(path) != was {
		t.Fatalf("restored %s: %q %v, inode %d want %d", path, b, err, inode(path), was)
	}
	if es, _ := os.ReadDir(filepath.Dir(dir)); len(es) != 1 {
		t.Errorf("restore left %v beside %s", es, dir)
	}

	restore, err = PlaceDir(dir, "ipvlan")
	if err != nil {
		t.Fatal(err)
	}
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "ipvlan")); !os.IsNotExist(err) {
		t.Errorf("restore where there was nothing left %v", err)
	}
}
