package stager

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ownerFile holds the pid of the process a harness directory belongs to.
const ownerFile = "owner.pid"

// sweep removes what harnesses of dead processes left under base (a suite killed
// with SIGKILL skips its cleanup): node tmpfs mounts, immutable flags,
// directories. Harnesses of live processes are left alone.
func sweep(base string) error {
	dirs, err := filepath.Glob(filepath.Join(base, "stager-cni-*"))
	if err != nil {
		return err
	}
	var errs []error
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, ownerFile))
		if err != nil {
			continue // not (yet) a harness's: leave it
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err != nil || unix.Kill(pid, 0) != unix.ESRCH {
			continue // alive, or unreadable: not ours to judge
		}
		if err := unmountUnder(d); err != nil {
			errs = append(errs, err)
			continue
		}
		liftImmutable(d)
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, fmt.Errorf("sweep a dead run's %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// unmountUnder detaches every mount at or below dir in this mount namespace.
func unmountUnder(dir string) error {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	var errs []error
	for _, line := range strings.Split(string(mi), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := strings.ReplaceAll(f[4], "\\040", " ")
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
				errs = append(errs, fmt.Errorf("unmount %s: %w", mp, err))
			}
		}
	}
	return errors.Join(errs...)
}

// liftImmutable clears the immutable flag of every regular file under dir.
func liftImmutable(dir string) {
	_ = filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			_ = setImmutable(p, false)
		}
		return nil
	})
}
