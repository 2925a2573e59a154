package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// An interrupted child gets one SIGINT and the time to clean up (here, a
// second), in a process group of its own so that a signal to the driver's
// group does not reach it twice.
func TestAnInterruptedChildGetsOneSIGINTAndTimeToCleanUp(t *testing.T) {
	log := filepath.Join(t.TempDir(), "log")
	script := `trap 'echo INT >>` + log + `; sleep 1; echo cleaned >>` + log + `; exit 130' INT
trap 'echo TERM >>` + log + `' TERM
echo started >>` + log + `
while :; do sleep 0.1; done`
	ctx, cancel := context.WithCancel(context.Background())
	cmd := child(ctx, "sh", "-c", script)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		if b, _ := os.ReadFile(log); strings.Contains(string(b), "started") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	pgid, err := syscall.Getpgid(cmd.Process.Pid)
	if err != nil || pgid != cmd.Process.Pid || pgid == syscall.Getpgrp() {
		t.Errorf("the child's process group is %d (%v): want its own, %d", pgid, err, cmd.Process.Pid)
	}
	cancel()
	cmd.Wait()
	b, _ := os.ReadFile(log)
	if got := strings.Fields(string(b)); strings.Join(got, " ") != "started INT cleaned" {
		t.Fatalf("the child saw %q: want one INT and its cleanup done", got)
	}
}
