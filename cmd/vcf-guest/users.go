package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/cozystack/vlan-conformance/framework/cloudinit"
)

// cloudCfg holds the image's defaults, as Ubuntu's /etc/cloud/cloud.cfg
// does: system_info.default_user is the user `password:` applies to.
const cloudCfg = "/etc/cloud/cloud.cfg"

const sudoersFile = "/etc/sudoers.d/90-cloud-init-users"

func defaultUser() (cloudinit.User, error) {
	def := cloudinit.User{Name: "ubuntu", Shell: "/bin/bash", LockPasswd: true,
		Groups: []string{"adm", "sudo"}, Sudo: []string{"ALL=(ALL) NOPASSWD:ALL"}}
	b, err := os.ReadFile(cloudCfg)
	if os.IsNotExist(err) {
		return def, nil
	}
	if err != nil {
		return def, err
	}
	var cfg struct {
		SystemInfo struct {
			DefaultUser map[string]any `json:"default_user"`
		} `json:"system_info"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		return def, fmt.Errorf("%s: %w", cloudCfg, err)
	}
	if cfg.SystemInfo.DefaultUser == nil {
		return def, nil
	}
	return cloudinit.ParseUser(cfg.SystemInfo.DefaultUser)
}

func run(stdin string, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ensureUser is the users-groups module for one user.
func ensureUser(u cloudinit.User) error {
	for _, g := range u.Groups {
		if _, err := user.LookupGroup(g); err != nil {
			if err := run("", "groupadd", g); err != nil {
				return err
			}
		}
	}
	created := false
	if _, err := user.Lookup(u.Name); err != nil {
		created = true
		args := []string{"-m", "-U", "-s", u.Shell}
		if u.Gecos != "" {
			args = append(args, "-c", u.Gecos)
		}
		if len(u.Groups) > 0 {
			args = append(args, "-G", strings.Join(u.Groups, ","))
		}
		if err := run("", "useradd", append(args, u.Name)...); err != nil {
			return err
		}
	} else if len(u.Groups) > 0 {
		if err := run("", "usermod", "-aG", strings.Join(u.Groups, ","), u.Name); err != nil {
			return err
		}
	}
	if u.Passwd != "" {
		if err := run("", "usermod", "-p", u.Passwd, u.Name); err != nil {
			return err
		}
	}
	if u.PlainText != "" {
		if err := run(u.Name+":"+u.PlainText+"\n", "chpasswd"); err != nil {
			return err
		}
	}
	// useradd leaves a new user's password locked already.
	if u.LockPasswd && !(created && u.Passwd == "" && u.PlainText == "") {
		if err := run("", "passwd", "-l", u.Name); err != nil {
			return err
		}
	}
	if len(u.Sudo) > 0 {
		f, err := os.OpenFile(sudoersFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o440)
		if err != nil {
			return err
		}
		fmt.Fprintf(f, "\n# User rules for %s\n", u.Name)
		for _, r := range u.Sudo {
			fmt.Fprintf(f, "%s %s\n", u.Name, r)
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}

// setPassword is the set-passwords module for one user.
func setPassword(name string, p cloudinit.Password, expire bool) error {
	args := []string{}
	if p.Hashed {
		args = append(args, "-e")
	}
	if err := run(name+":"+p.Value+"\n", "chpasswd", args...); err != nil {
		return fmt.Errorf("password for %s: %w", name, err)
	}
	if expire {
		return run("", "passwd", "--expire", name)
	}
	return nil
}
