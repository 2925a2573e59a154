package node

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/cozystack/vlan-conformance/framework/platform"
)

// WriteAside writes a file next to its place, then renames it over, so a
// CNI runtime never executes half a plugin.
func WriteAside(path string, r io.Reader, mode os.FileMode) error {
	tmp := filepath.Join(filepath.Dir(path), ".vcf-"+filepath.Base(path)+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// SnapshotDir reads a directory's regular files: content hash, mode, mtime.
func SnapshotDir(dir string) (map[string]platform.FileState, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]platform.FileState{}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		fi, err := os.Lstat(p)
		if err != nil {
			return nil, err
		}
		st := platform.FileState{Mode: uint32(fi.Mode()), MTime: fi.ModTime(), Size: fi.Size()}
		if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
			st.Inode = sys.Ino
		}
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, err
			}
			sum := sha256.Sum256(b)
			st.SHA256 = hex.EncodeToString(sum[:])
		}
		out[e.Name()] = st
	}
	return out, nil
}

// ProcessOf returns the PID (as the host sees it) of a process whose
// cgroup path contains one of keys: a pod UID or a container ID. Kind
// nodes' containers are processes of this host, in cgroups named after
// them.
func ProcessOf(keys []string) (string, error) {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return "", err
	}
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cgroup"))
		if err != nil {
			continue
		}
		for _, k := range keys {
			if strings.Contains(string(b), k) {
				return p.Name(), nil
			}
		}
	}
	return "", fmt.Errorf("no process in a cgroup named after %v", keys)
}
