// Package caps tells which capabilities this machine's kernel knows but
// the current bounding set lacks (no container started from here can hold
// them, --privileged or not).
package caps

import (
	"os"
	"sort"
	"strconv"
	"strings"
)

// Names maps capability numbers to their OCI names (linux/capability.h).
var Names = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER",
	"CAP_FSETID", "CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP",
	"CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST",
	"CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER",
	"CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE",
	"CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE",
	"CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD",
	"CAP_LEASE", "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP",
	"CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM",
	"CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF",
	"CAP_CHECKPOINT_RESTORE",
}

// Missing returns the set of capability names (up to the kernel's
// cap_last_cap) absent from this process's CapBnd; empty when it cannot tell.
func Missing() map[string]bool {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil
	}
	var bnd uint64
	found := false
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "CapBnd:"); ok {
			bnd, err = strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			found = err == nil
		}
	}
	if !found {
		return nil
	}
	last := len(Names) - 1
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n < last {
			last = n
		}
	}
	missing := map[string]bool{}
	for i := 0; i <= last; i++ {
		if bnd&(1<<uint(i)) == 0 {
			missing[Names[i]] = true
		}
	}
	return missing
}

// Sorted lists a set of names in order.
func Sorted(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
