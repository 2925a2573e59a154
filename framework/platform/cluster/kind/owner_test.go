package kind

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// A found cluster is reused only when it was made to be kept; a run's
// cluster whose run is gone, or one without a mark, is a leftover; one a
// live run made is refused. The live and dead runs are real processes.
func TestJudge(t *testing.T) {
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer sleeper.Process.Kill()
	live := Owner{PID: sleeper.Process.Pid, Start: procStart(sleeper.Process.Pid), Boot: bootID()}
	if live.Start == "" {
		t.Fatal("no start time for a running process")
	}

	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	gone := Owner{PID: dead.Process.Pid, Start: "1", Boot: bootID()}
	reused := live // same pid, another process start: the pid was reused
	reused.Start = "1"
	otherBoot := live
	otherBoot.Boot = "another-boot"

	for _, tc := range []struct {
		name, record string
		want         Found
		says         string
	}{
		{"kind-up", ThisRun(true).String(), Reuse, "made to be kept"},
		{"live run", live.String(), Busy, "still running"},
		{"killed run", gone.String(), Replace, "a leftover"},
		{"reused pid", reused.String(), Replace, "a leftover"},
		{"before a reboot", otherBoot.String(), Replace, "a leftover"},
		{"no mark", "", Replace, "no owner mark"},
		{"garbage", "kept\n", Replace, "no owner mark"},
	} {
		got, why := Judge(tc.record)
		if got != tc.want || !strings.Contains(why, tc.says) {
			t.Errorf("%s (%q): got %d %q, want %d saying %q", tc.name, tc.record, got, why, tc.want, tc.says)
		}
	}
	if o, ok := ParseOwner(ThisRun(false).String()); !ok || o.Kept || o.PID != os.Getpid() || !o.Alive() {
		t.Errorf("this run's own record reads back as %+v %v", o, ok)
	}
}
