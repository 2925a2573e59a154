package fabric

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A second process waits while the first holds the lock, and gets it once
// the first is gone (as a killed run's lock goes with it).
func TestExclusiveSerializesRuns(t *testing.T) {
	lockPath := os.Getenv("VCF_LOCK_PATH")
	if os.Getenv("VCF_LOCK_CHILD") == "1" {
		l, err := exclusiveAt(lockPath, os.Stdout)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		os.Stdout.WriteString("child got the lock\n")
		return
	}
	// A lock of its own: a real run on this machine holds LockFile meanwhile.
	lockPath = t.TempDir() + "/run.lock"
	t.Setenv(lockHeldEnv, "")
	l, err := exclusiveAt(lockPath, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command(os.Args[0], "-test.run", "^TestExclusiveSerializesRuns$")
	child.Env = append(os.Environ(), "VCF_LOCK_CHILD=1", "VCF_LOCK_PATH="+lockPath, lockHeldEnv+"=")
	out := &strings.Builder{}
	child.Stdout, child.Stderr = out, out
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if strings.Contains(out.String(), "child got the lock") {
		t.Fatalf("a second run got the lock while the first held it:\n%s", out)
	}
	if !strings.Contains(out.String(), "waiting for the suite's run that holds "+lockPath+" (pid "+strconv.Itoa(os.Getpid())+")") {
		t.Errorf("the waiting run should say whom it waits for:\n%s", out)
	}
	l.Close()
	if err := child.Wait(); err != nil || !strings.Contains(out.String(), "child got the lock") {
		t.Fatalf("the second run should get the lock once the first is gone (%v):\n%s", err, out)
	}
}
