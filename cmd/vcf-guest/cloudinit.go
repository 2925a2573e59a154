package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
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

// hostnameFor is set_hostname's choice: hostname:, fqdn:'s first label,
// the datasource's local-hostname.
func hostnameFor(cc cloudinit.CloudConfig, meta map[string]any) string {
	switch {
	case cc.Hostname != "":
		h, _, _ := strings.Cut(cc.Hostname, ".")
		return h
	case cc.FQDN != "":
		h, _, _ := strings.Cut(cc.FQDN, ".")
		return h
	}
	if h, ok := meta["local-hostname"].(string); ok && h != "" {
		h, _, _ = strings.Cut(h, ".")
		return h
	}
	return "localhost"
}

func setHostname(h string) error {
	if err := unix.Sethostname([]byte(h)); err != nil {
		return err
	}
	if err := os.WriteFile("/etc/hostname", []byte(h+"\n"), 0o644); err != nil {
		return err
	}
	// sudo resolves the host name; give it an answer without DNS.
	hosts := "127.0.0.1\tlocalhost\n127.0.1.1\t" + h + "\n::1\tlocalhost ip6-localhost ip6-loopback\n"
	return os.WriteFile("/etc/hosts", []byte(hosts), 0o644)
}

// writeNetworkConfig writes network-config (netplan v2) or, without one,
// cloud-init's fallback: DHCP on the first NIC, matched by MAC.
func writeNetworkConfig(networkConfig string) error {
	var np cloudinit.Netplan
	if strings.TrimSpace(networkConfig) != "" {
		var err error
		if np, err = cloudinit.ParseNetplan([]byte(networkConfig)); err != nil {
			// network-config may also be the bare `version: 2 ...` mapping.
			indented := "network:\n  " + strings.ReplaceAll(strings.TrimRight(networkConfig, "\n"), "\n", "\n  ") + "\n"
			var err2 error
			if np, err2 = cloudinit.ParseNetplan([]byte(indented)); err2 != nil {
				return fmt.Errorf("network-config: %w", err)
			}
		}
	} else {
		links, err := nics()
		if err != nil {
			return err
		}
		if len(links) == 0 {
			return nil
		}
		first := links[0].Attrs()
		np.Network.Version = 2
		np.Network.Ethernets = map[string]cloudinit.Ethernet{first.Name: {
			DHCP4: true, Match: &cloudinit.Match{MACAddress: first.HardwareAddr.String()}, SetName: first.Name,
		}}
	}
	b, err := yaml.Marshal(np)
	if err != nil {
		return err
	}
	os.MkdirAll(filepath.Dir(fallbackFile), 0o755)
	return os.WriteFile(fallbackFile, append([]byte("# written by cloud-init (vcf-guest)\n"), b...), 0o600)
}

// writeFiles is write_files (deferred=false) or write_files_deferred.
func writeFiles(cc cloudinit.CloudConfig, deferred bool) error {
	var errs []error
	for _, f := range cc.WriteFiles {
		if f.Defer != deferred {
			continue
		}
		errs = append(errs, writeFile(f))
	}
	return errors.Join(errs...)
}

func writeFile(f cloudinit.WriteFile) error {
	if !filepath.IsAbs(f.Path) {
		return fmt.Errorf("%s: path must be absolute", f.Path)
	}
	data, err := f.Data()
	if err != nil {
		return err
	}
	mode, err := f.Mode()
	if err != nil {
		return err
	}
	uid, gid, err := owner(f.Owner)
	if err != nil {
		return fmt.Errorf("%s: %w", f.Path, err)
	}
	if err := os.MkdirAll(filepath.Dir(f.Path), 0o755); err != nil {
		return err
	}
	flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if f.Append {
		flags = os.O_CREATE | os.O_WRONLY | os.O_APPEND
	}
	fh, err := os.OpenFile(f.Path, flags, mode)
	if err != nil {
		return err
	}
	_, err = fh.Write(data)
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Chmod(f.Path, mode); err != nil {
		return err
	}
	return os.Chown(f.Path, uid, gid)
}

// owner resolves "user[:group]" (root:root when empty).
func owner(s string) (int, int, error) {
	if s == "" {
		return 0, 0, nil
	}
	un, gn, hasGroup := strings.Cut(s, ":")
	u, err := user.Lookup(un)
	if err != nil {
		return 0, 0, err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if hasGroup {
		g, err := user.LookupGroup(gn)
		if err != nil {
			return 0, 0, err
		}
		gid, _ = strconv.Atoi(g.Gid)
	}
	return uid, gid, nil
}

// runcmd writes runcmd as cloud-init's script and runs it (scripts-user),
// its output appended to cloud-init-output.log.
func runcmd(cc cloudinit.CloudConfig, r *bootRun) error {
	script, err := cc.RuncmdScript()
	if err != nil || script == "" {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(runcmdScript), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(runcmdScript, []byte(script), 0o700); err != nil {
		return err
	}
	out, err := os.OpenFile(ciOutputLog, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	defer out.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, runcmdScript)
	cmd.Stdout, cmd.Stderr, cmd.Dir = out, out, "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	start := time.Now()
	err = cmd.Run()
	r.logf("runcmd: %s after %.2fs", cmd.ProcessState, time.Since(start).Seconds())
	if err != nil {
		return fmt.Errorf("%s: %w (output in %s)", runcmdScript, err, ciOutputLog)
	}
	return nil
}

// dhcpAsync is `netplan apply`'s DHCPFunc outside boot: like networkd, it
// does not hold the command up; a NIC without a lease gets a background
// client (netplan dhcp IFACE), reparented to init.
func dhcpAsync(h *netlink.Handle, l netlink.Link) error {
	if leased, err := hasGlobalIPv4(h, l); err != nil || leased {
		return err
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"vcf-guest", "netplan", "dhcp", l.Attrs().Name}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	return cmd.Process.Release()
}
