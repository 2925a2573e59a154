package fabric

import (
	"os"
	"path/filepath"
	"testing"
)

// A run killed between creating a namespace's file and bind-mounting the
// namespace onto it leaves a plain file: the next sweep must remove it
// rather than fail on the unmount (seen in CI as the cleanup-check rerun
// failing, with `ip netns list` printing "Peer netns reference is invalid").
func TestDeleteRemovesAnUnmountedNamespaceFile(t *testing.T) {
	dir := t.TempDir()
	name := Prefix + "half-made"
	if err := os.WriteFile(filepath.Join(dir, name), nil, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := deleteNamedAt(dir, name); err != nil {
		t.Fatalf("deleting a half-made namespace: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
		t.Fatalf("the half-made namespace's file is still there (stat: %v)", err)
	}
}

func TestDeleteOfAMissingNamespaceIsNotAnError(t *testing.T) {
	if err := deleteNamedAt(t.TempDir(), Prefix+"never-made"); err != nil {
		t.Fatalf("deleting a namespace that does not exist: %v", err)
	}
}
