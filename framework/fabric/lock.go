package fabric

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// LockFile serializes the suite's runs on one machine. Every run names its
// namespaces and host links with the one Prefix, and sweeps what carries it
// (what a killed run left), so a second run at the same time would take the
// first one's gateway away mid-spec. The kernel drops the lock when its
// holder dies, so a killed run never blocks the next.
const LockFile = "/run/vcf-conformance.lock"

// lockHeldEnv tells a descendant (the suite binary the driver starts) which
// process holds the lock for it.
const lockHeldEnv = "VCF_RUN_LOCK_HELD"

// Exclusive takes the machine's run lock for as long as the returned file
// stays open (the life of the process, normally), waiting, with a word on
// progress, while another run holds it. Children started afterwards run
// under it.
func Exclusive(progress io.Writer) (io.Closer, error) { return exclusiveAt(LockFile, progress) }

func exclusiveAt(path string, progress io.Writer) (io.Closer, error) {
	if holder, err := strconv.Atoi(os.Getenv(lockHeldEnv)); err == nil && isAncestor(holder) {
		return io.NopCloser(nil), nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("run lock: %w", err)
	}
	fd := int(f.Fd())
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("run lock %s: %w", path, err)
		}
		holder, _ := os.ReadFile(path)
		fmt.Fprintf(progress, "waiting for the suite's run that holds %s (pid %s) to end: runs share the %s* namespaces\n", path, strings.TrimSpace(string(holder)), Prefix)
		if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
			f.Close()
			return nil, fmt.Errorf("run lock %s: %w", path, err)
		}
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	os.Setenv(lockHeldEnv, strconv.Itoa(os.Getpid()))
	return f, nil
}

// isAncestor reports whether pid is this process's parent, or its parent's,
// and so on (read from /proc).
func isAncestor(pid int) bool {
	for p := os.Getppid(); p > 1; {
		if p == pid {
			return true
		}
		b, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/stat")
		if err != nil {
			return false
		}
		// pid (comm) state ppid ...: comm may hold spaces, so cut after ')'.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) < 2 {
			return false
		}
		if p, err = strconv.Atoi(f[1]); err != nil {
			return false
		}
	}
	return false
}
