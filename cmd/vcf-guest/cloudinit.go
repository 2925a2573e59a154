package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/vlan-conformance/framework/cloudinit"
)

// The guest's cloud-init: `cloud-init boot` (started by init) runs the
// stages in Ubuntu's order - network config (the fallback: DHCP on the
// first NIC), networking up, write_files, users, passwords; then logins
// are allowed; then runcmd and deferred write_files. `cloud-init status
// [--wait] [--long]` reports it as Ubuntu's does: "status: done" (exit 0)
// or "status: error" (exit 1) once finished.

const (
	statusFile   = "/run/cloud-init/status.json"
	ciLog        = "/var/log/cloud-init.log"
	ciOutputLog  = "/var/log/cloud-init-output.log"
	runcmdScript = "/var/lib/cloud/instance/scripts/runcmd"
	fallbackFile = "/etc/netplan/50-cloud-init.yaml"
)

type ciStatus struct {
	Status     string   `json:"status"` // running, done, error
	Stage      string   `json:"stage,omitempty"`
	Datasource string   `json:"datasource,omitempty"`
	Errors     []string `json:"errors"`
	Warnings   []string `json:"warnings,omitempty"`
	Uptime     float64  `json:"uptime,omitempty"` // seconds since boot when finished
}

func cloudInitMain(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: cloud-init status [--wait] [--long]")
		return 2
	}
	switch args[0] {
	case "boot":
		return boot()
	case "status":
		return status(args[1:])
	}
	fmt.Fprintf(os.Stderr, "cloud-init: %q is not supported here (status, boot)\n", args[0])
	return 2
}

func status(args []string) int {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	wait := fs.Bool("wait", false, "wait until cloud-init has finished")
	fs.BoolVar(wait, "w", false, "same as --wait")
	long := fs.Bool("long", false, "also print the detail and errors")
	fs.BoolVar(long, "l", false, "same as --long")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	dots := false
	var st ciStatus
	for {
		st = readStatus()
		if !*wait || st.Status == "done" || st.Status == "error" {
			break
		}
		fmt.Print(".")
		dots = true
		time.Sleep(250 * time.Millisecond)
	}
	if dots {
		fmt.Println()
	}
	fmt.Printf("status: %s\n", st.Status)
	if *long {
		fmt.Printf("stage: %s\ndetail: %s\nerrors:\n", st.Stage, st.Datasource)
		for _, e := range st.Errors {
			fmt.Printf("  - %s\n", e)
		}
		for _, w := range st.Warnings {
			fmt.Printf("warning: %s\n", w)
		}
	}
	if st.Status == "error" {
		return 1
	}
	return 0
}

func readStatus() ciStatus {
	b, err := os.ReadFile(statusFile)
	if err != nil {
		return ciStatus{Status: "not started"}
	}
	var st ciStatus
	if json.Unmarshal(b, &st) != nil {
		return ciStatus{Status: "running"} // mid-write
	}
	return st
}

// bootRun holds one boot's progress, written to statusFile at each stage.
type bootRun struct {
	st  ciStatus
	log io.Writer
}

func (r *bootRun) stage(s string) {
	r.st.Stage = s
	r.logf("stage %s", s)
	r.save()
}

func (r *bootRun) logf(format string, args ...any) {
	fmt.Fprintf(r.log, "%s %s\n", time.Now().UTC().Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
}

func (r *bootRun) fail(what string, err error) {
	if err != nil {
		r.st.Errors = append(r.st.Errors, what+": "+err.Error())
		r.logf("ERROR %s: %v", what, err)
	}
}

func (r *bootRun) warn(what string, err error) {
	if err != nil {
		r.st.Warnings = append(r.st.Warnings, what+": "+err.Error())
		r.logf("WARNING %s: %v", what, err)
	}
}

func (r *bootRun) save() {
	b, _ := json.Marshal(r.st)
	os.MkdirAll(filepath.Dir(statusFile), 0o755)
	tmp := statusFile + ".tmp"
	if os.WriteFile(tmp, b, 0o644) == nil {
		os.Rename(tmp, statusFile)
	}
}

func boot() int {
	// fd 3 (from init): closing it lets init start the getty.
	ready := os.NewFile(3, "logins")
	allowLogins := func() {
		if ready != nil {
			ready.Close()
			ready = nil
		}
	}
	defer allowLogins()
	os.MkdirAll(filepath.Dir(ciLog), 0o755)
	logf, err := os.OpenFile(ciLog, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o640)
	if err != nil {
		logf = os.Stderr
	}
	r := &bootRun{st: ciStatus{Status: "running", Errors: []string{}}, log: logf}
	r.stage("local")

	sd, err := readSeed(10 * time.Second)
	r.fail("datasource", err)
	if sd.dev != "" {
		r.st.Datasource = "DataSourceNoCloud [seed=" + sd.dev + "]"
	}
	var cc cloudinit.CloudConfig
	if strings.TrimSpace(sd.userData) != "" {
		cc, err = cloudinit.ParseCloudConfig(sd.userData)
		r.fail("user-data", err)
	}
	meta := map[string]any{}
	if sd.metaData != "" {
		r.fail("meta-data", yaml.Unmarshal([]byte(sd.metaData), &meta))
	}
	r.fail("hostname", setHostname(hostnameFor(cc, meta)))

	// Network config is written before write_files runs, so a netplan file
	// from userData takes effect only through runcmd's `netplan apply`, as
	// on Ubuntu (networkd started with cloud-init's config alone).
	r.stage("network")
	r.fail("network-config", writeNetworkConfig(sd.networkConfig))
	if np, _, err := cloudinit.LoadNetplan("/"); err != nil {
		r.fail("netplan", err)
	} else {
		// A NIC without a lease is not cloud-init's failure (networkd's).
		r.warn("network", netplanApply(np, dhcpIfNeeded))
	}

	r.stage("config")
	r.fail("write_files", writeFiles(cc, false))
	def, err := defaultUser()
	r.fail("default user", err)
	users, err := cc.UserList(def)
	r.fail("users", err)
	for _, u := range users {
		r.fail("users: "+u.Name, ensureUser(u))
	}
	hasDefault := false
	for _, u := range users {
		hasDefault = hasDefault || u.Name == def.Name
	}
	defName := ""
	if hasDefault {
		defName = def.Name
	}
	pw, err := cc.Passwords(defName)
	r.fail("set-passwords", err)
	for name, p := range pw {
		r.fail("set-passwords", setPassword(name, p, cc.ExpirePassword()))
	}
	// What went wrong so far goes to the console too, before the login
	// prompt: the serial log is all a failed VM leaves behind.
	for _, e := range r.st.Errors {
		fmt.Fprintf(os.Stderr, "cloud-init: ERROR %s\n", e)
	}
	allowLogins()

	r.stage("final")
	r.fail("runcmd", runcmd(cc, r))
	r.fail("write_files (deferred)", writeFiles(cc, true))

	r.st.Status = "done"
	if len(r.st.Errors) > 0 {
		r.st.Status = "error"
	}
	r.st.Uptime = uptime()
	r.stage("")
	r.logf("finished: %s after %.1fs of uptime", r.st.Status, r.st.Uptime)
	return 0
}

func uptime() float64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts)
	return float64(ts.Nano()) / 1e9
}
