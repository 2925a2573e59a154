package kind

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// OwnerFile is where a cluster says who made it, in its first
// control-plane node: it lives and dies with the cluster, so no state on
// the host can disagree with it.
const OwnerFile = "/kind/vcf-owner"

// Owner is who made a cluster and whether it is meant to outlive its run.
// A run that makes a cluster deletes it at the end; killed, or with its
// delete failed, it leaves one behind. Found again, such a cluster is
// state no run vouches for (seen in CI: a leftover whose virt-api the API
// server never reached, every VM spec then unrun), so it is deleted and
// made afresh. Only a kept cluster (`make kind-up`, --keep-cluster) is
// reused.
type Owner struct {
	Kept  bool
	PID   int    // the run that made it
	Start string // that process's start time (field 22 of /proc/<pid>/stat): a reused pid is another process
	Boot  string // /proc/sys/kernel/random/boot_id when it was made
}

// ThisRun is the owner record of a cluster this process makes.
func ThisRun(kept bool) Owner {
	pid := os.Getpid()
	return Owner{Kept: kept, PID: pid, Start: procStart(pid), Boot: bootID()}
}

func (o Owner) String() string {
	kind := "run"
	if o.Kept {
		kind = "kept"
	}
	return fmt.Sprintf("%s pid=%d start=%s boot=%s\n", kind, o.PID, o.Start, o.Boot)
}

// ParseOwner reads an owner record; "" (no file) is a cluster the suite
// did not mark: made by hand, or by a version of the suite before marks.
func ParseOwner(s string) (Owner, bool) {
	f := strings.Fields(s)
	if len(f) != 4 || (f[0] != "run" && f[0] != "kept") {
		return Owner{}, false
	}
	o := Owner{Kept: f[0] == "kept"}
	for _, kv := range f[1:] {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "pid":
			o.PID, _ = strconv.Atoi(v)
		case "start":
			o.Start = v
		case "boot":
			o.Boot = v
		}
	}
	return o, o.PID > 0
}

// Alive reports whether the run that made the cluster is still running:
// same boot, same pid, same process start.
func (o Owner) Alive() bool {
	return o.Boot == bootID() && o.Start != "" && procStart(o.PID) == o.Start
}

// Found is what a run does with a cluster of its name that is there
// already: reuse it (kept), refuse (another live run owns it), or delete it
// and make it afresh (a leftover), with why in words.
type Found int

const (
	Reuse Found = iota
	Replace
	Busy
)

// Judge decides about a found cluster from its owner file's content.
func Judge(record string) (Found, string) {
	o, ok := ParseOwner(record)
	switch {
	case !ok:
		return Replace, fmt.Sprintf("it carries no owner mark (%s): not made by this suite's `make kind-up` or --keep-cluster, so a leftover no run vouches for", OwnerFile)
	case o.Kept:
		return Reuse, fmt.Sprintf("it was made to be kept (by pid %d: `make kind-up` or --keep-cluster)", o.PID)
	case o.Alive():
		return Busy, fmt.Sprintf("the run that made it (pid %d) is still running", o.PID)
	}
	return Replace, fmt.Sprintf("the run that made it (pid %d) is gone without deleting it (killed, or its delete failed): a leftover", o.PID)
}

func bootID() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b))
}

// procStart is a process's start time in clock ticks since boot, "" if it
// is not running.
func procStart(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// The command name (field 2) may hold spaces: fields count from its ")".
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return ""
	}
	return f[19] // field 22 overall
}
