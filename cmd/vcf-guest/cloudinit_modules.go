package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/vlan-conformance/framework/cloudinit"
)

// The cloud-config modules boot runs, one function each (hostname,
// network config, write_files, runcmd); boot, in cloudinit.go, only
// orders them and records their errors.

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
