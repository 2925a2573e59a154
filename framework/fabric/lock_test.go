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
	if os.Getenv("VCF_LOCK_CHILD") == "1" {
		l, err := Exclusive(os.Stdout)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		os.Stdout.WriteString("child got the lock\n")
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("the lock lives in /run")
	}
	os.Unsetenv(lockHeldEnv)
	l, err := Exclusive(os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command(os.Args[0], "-test.run", "^TestExclusiveSerializesRuns$")
	child.Env = append(os.Environ(), "VCF_LOCK_CHILD=1", lockHeldEnv+"=")
	out := &strings.Builder{}
	child.Stdout, child.Stderr = out, out
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if strings.Contains(out.String(), "child got the lock") {
		t.Fatalf("a second run got the lock while the first held it:\n%s", out)
	}
	if !strings.Contains(out.String(), "waiting for the suite's run that holds "+LockFile+" (pid "+strconv.Itoa(os.Getpid())+")") {
		t.Errorf("the waiting run should say whom it waits for:\n%s", out)
	}
	l.Close()
	if err := child.Wait(); err != nil || !strings.Contains(out.String(), "child got the lock") {
		t.Fatalf("the second run should get the lock once the first is gone (%v):\n%s", err, out)
	}
}
