package stager

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cozystack/vlan-conformance/framework/atomicfile"
)

// What an administrator or another package does to a node's /opt/cni/bin
// while the stager owns it (STG-03, STG-11): any platform whose node
// directory the suite reaches places files there with these.

// PlaceFile puts content at dir/name as an administrator's install(1)
// would (atomicfile.Write), and returns restore, which puts back what was there
// before, again by rename, or removes the file where there was none.
func PlaceFile(dir, name string, content []byte, mode os.FileMode) (restore func() error, err error) {
	path := filepath.Join(dir, name)
	old, err := os.ReadFile(path)
	had := err == nil
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	var oldMode os.FileMode
	if had {
		fi, err := os.Stat(path)
		if err != nil {
			return nil, err
		}
		oldMode = fi.Mode().Perm()
	}
	if err := atomicfile.Write(path, bytes.NewReader(content), mode); err != nil {
		return nil, err
	}
	return func() error {
		if !had {
			if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
				return err
			}
			return nil
		}
		return atomicfile.Write(path, bytes.NewReader(old), oldMode)
	}, nil
}

// PlaceDir puts an empty directory at dir/name, a destination that no
// rename over it can replace. What was there is moved beside dir (same
// file system, so by rename) and restore puts it back.
func PlaceDir(dir, name string) (restore func() error, err error) {
	path := filepath.Join(dir, name)
	saved := filepath.Join(filepath.Dir(dir), ".vcf-saved-"+filepath.Base(dir)+"-"+name)
	_, err = os.Lstat(path)
	had := err == nil
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	if had {
		if err := os.Rename(path, saved); err != nil {
			return nil, err
		}
	}
	if err := os.Mkdir(path, 0o755); err != nil {
		if had {
			return nil, errors.Join(err, os.Rename(saved, path))
		}
		return nil, err
	}
	return func() error {
		// A stager that wrote into the directory has left it non-empty:
		// that is evidence of its own, not for restore to hide.
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("removing the directory placed at %s: %w", path, err)
		}
		if had {
			return os.Rename(saved, path)
		}
		return nil
	}, nil
}
