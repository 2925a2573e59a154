package cloudinit

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// CloudConfig is the part of #cloud-config the guest acts on. Other keys
// are ignored, as cloud-init ignores keys no module of it consumes.
type CloudConfig struct {
	Hostname   string      `json:"hostname"`
	FQDN       string      `json:"fqdn"`
	WriteFiles []WriteFile `json:"write_files"`
	// Runcmd entries are strings (a shell line) or lists (argv).
	Runcmd []any `json:"runcmd"`
	// Users is "default", a comma-separated string, or a list of names
	// and user maps (see UserList).
	Users any `json:"users"`
	// Password is the default user's password (set-passwords module).
	Password string    `json:"password"`
	Chpasswd *Chpasswd `json:"chpasswd"`
}

// WriteFile is one write_files entry.
type WriteFile struct {
	Path    string `json:"path"`
	Content string `json:"content"`
	// Permissions is an octal string ("0600") or, when YAML read an
	// unquoted 0600 as a number, the mode itself.
	Permissions any    `json:"permissions"`
	Encoding    string `json:"encoding"`
	Owner       string `json:"owner"`
	Append      bool   `json:"append"`
	// Defer writes the file in the final stage, after users exist.
	Defer bool `json:"defer"`
}

// Chpasswd is the set-passwords module's chpasswd key.
type Chpasswd struct {
	// Expire defaults to true: the password must be changed at first login.
	Expire *bool `json:"expire"`
	Users  []struct {
		Name     string `json:"name"`
		Password string `json:"password"`
		Type     string `json:"type"` // text (default) or hash
	} `json:"users"`
	// List is the deprecated "user:password" form (a string of lines or a list).
	List any `json:"list"`
}

// ParseCloudConfig reads userData, which must be #cloud-config.
func ParseCloudConfig(userData string) (CloudConfig, error) {
	var cc CloudConfig
	if !strings.HasPrefix(strings.TrimSpace(userData), "#cloud-config") {
		return cc, errors.New("userData is not #cloud-config")
	}
	if err := yaml.Unmarshal([]byte(userData), &cc); err != nil {
		return cc, fmt.Errorf("userData: %w", err)
	}
	return cc, nil
}

// RunsNetplanApply reports whether runcmd runs `netplan apply`: only then
// do netplan files written by write_files take effect before a reboot.
func (c CloudConfig) RunsNetplanApply() bool {
	for _, cmd := range c.Runcmd {
		if strings.Contains(fmt.Sprint(cmd), "netplan apply") {
			return true
		}
	}
	return false
}

// RuncmdScript is runcmd as cloud-init runs it: one /bin/sh script, a
// string entry verbatim, a list entry as single-quoted words. Like
// cloud-init's, the script does not stop at a failing line; its exit
// status is the last line's.
func (c CloudConfig) RuncmdScript() (string, error) {
	if len(c.Runcmd) == 0 {
		return "", nil
	}
	var b strings.Builder
	b.WriteString("#!/bin/sh\n")
	for i, cmd := range c.Runcmd {
		switch v := cmd.(type) {
		case string:
			b.WriteString(v)
		case []any:
			for j, w := range v {
				if j > 0 {
					b.WriteByte(' ')
				}
				b.WriteString("'" + strings.ReplaceAll(fmt.Sprint(w), "'", `'\''`) + "'")
			}
		default:
			return "", fmt.Errorf("runcmd[%d]: want a string or a list, got %T", i, cmd)
		}
		b.WriteByte('\n')
	}
	return b.String(), nil
}

// ExpirePassword reports whether set passwords must be changed at first
// login (cloud-init's default, unless chpasswd.expire is false).
func (c CloudConfig) ExpirePassword() bool {
	return c.Chpasswd == nil || c.Chpasswd.Expire == nil || *c.Chpasswd.Expire
}

// Passwords returns user -> password (plain text, or a crypt hash when
// hashed) from password (for defaultUser), chpasswd.users and
// chpasswd.list, in that order of precedence from lowest to highest.
func (c CloudConfig) Passwords(defaultUser string) (map[string]Password, error) {
	out := map[string]Password{}
	if c.Password != "" && defaultUser != "" {
		out[defaultUser] = Password{Value: c.Password}
	}
	if c.Chpasswd == nil {
		return out, nil
	}
	var lines []string
	switch l := c.Chpasswd.List.(type) {
	case nil:
	case string:
		lines = strings.Split(l, "\n")
	case []any:
		for _, e := range l {
			lines = append(lines, fmt.Sprint(e))
		}
	default:
		return nil, fmt.Errorf("chpasswd.list: want a string or a list, got %T", l)
	}
	for _, l := range lines {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		u, p, ok := strings.Cut(l, ":")
		if !ok {
			return nil, fmt.Errorf("chpasswd.list: %q is not user:password", l)
		}
		out[u] = Password{Value: p, Hashed: strings.HasPrefix(p, "$")}
	}
	for _, u := range c.Chpasswd.Users {
		switch u.Type {
		case "", "text":
			out[u.Name] = Password{Value: u.Password}
		case "hash":
			out[u.Name] = Password{Value: u.Password, Hashed: true}
		default:
			return nil, fmt.Errorf("chpasswd.users: %s: password type %q is not supported", u.Name, u.Type)
		}
	}
	return out, nil
}

// Password is a password to set: plain text, or a crypt(3) hash.
type Password struct {
	Value  string
	Hashed bool
}

// User is a user the users-groups module creates.
type User struct {
	Name       string
	Gecos      string
	Shell      string
	Groups     []string
	Sudo       []string // sudoers rules, e.g. "ALL=(ALL) NOPASSWD:ALL"
	LockPasswd bool     // lock the password (the default); password: still sets one
	Passwd     string   // crypt(3) hash
	PlainText  string   // plain_text_passwd
}

// UserList resolves users: into the users to create, with "default"
// standing for def. No users: key means the default user alone.
func (c CloudConfig) UserList(def User) ([]User, error) {
	var entries []any
	switch u := c.Users.(type) {
	case nil:
		return []User{def}, nil
	case string:
		for _, n := range strings.Split(u, ",") {
			entries = append(entries, strings.TrimSpace(n))
		}
	case []any:
		entries = u
	default:
		return nil, fmt.Errorf("users: want a string or a list, got %T", u)
	}
	var out []User
	for i, e := range entries {
		switch v := e.(type) {
		case string:
			if v == "default" {
				out = append(out, def)
			} else if v != "" {
				out = append(out, User{Name: v, Shell: "/bin/sh", LockPasswd: true})
			}
		case map[string]any:
			u, err := ParseUser(v)
			if err != nil {
				return nil, fmt.Errorf("users[%d]: %w", i, err)
			}
			out = append(out, u)
		default:
			return nil, fmt.Errorf("users[%d]: want a name or a map, got %T", i, e)
		}
	}
	return out, nil
}

// ParseUser reads a users: entry (or cloud.cfg's default_user) map:
// name, gecos, shell, groups, sudo, lock_passwd, passwd, plain_text_passwd.
func ParseUser(m map[string]any) (User, error) {
	u := User{LockPasswd: true}
	str := func(k string) string {
		if v, ok := m[k].(string); ok {
			return v
		}
		return ""
	}
	u.Name, u.Gecos, u.Shell = str("name"), str("gecos"), str("shell")
	u.Passwd, u.PlainText = str("passwd"), str("plain_text_passwd")
	if u.Name == "" {
		return u, errors.New("a user needs a name")
	}
	if u.Shell == "" {
		u.Shell = "/bin/sh"
	}
	if v, ok := m["lock_passwd"].(bool); ok {
		u.LockPasswd = v
	}
	list := func(k string) ([]string, error) {
		switch v := m[k].(type) {
		case nil, bool: // sudo: false means none
			return nil, nil
		case string:
			if k == "sudo" {
				return []string{v}, nil
			}
			var out []string
			for _, s := range strings.Split(v, ",") {
				if s = strings.TrimSpace(s); s != "" {
					out = append(out, s)
				}
			}
			return out, nil
		case []any:
			var out []string
			for _, s := range v {
				out = append(out, fmt.Sprint(s))
			}
			return out, nil
		default:
			return nil, fmt.Errorf("%s: want a string or a list, got %T", k, v)
		}
	}
	var err error
	if u.Groups, err = list("groups"); err != nil {
		return u, err
	}
	if u.Sudo, err = list("sudo"); err != nil {
		return u, err
	}
	return u, nil
}

// Mode is the file mode write_files gives the file (0644 unless set).
func (f WriteFile) Mode() (os.FileMode, error) {
	switch p := f.Permissions.(type) {
	case nil:
		return 0o644, nil
	case string:
		m, err := strconv.ParseUint(strings.TrimSpace(p), 8, 32)
		if err != nil {
			return 0, fmt.Errorf("%s: permissions %q: %w", f.Path, p, err)
		}
		return os.FileMode(m) & os.ModePerm, nil
	case float64: // YAML read an unquoted 0600 as the number 384
		return os.FileMode(int(p)) & os.ModePerm, nil
	default:
		return 0, fmt.Errorf("%s: permissions: want an octal string, got %T", f.Path, p)
	}
}

// Data is the file's content, decoded as encoding says.
func (f WriteFile) Data() ([]byte, error) {
	b64 := func(s string) ([]byte, error) {
		return base64.StdEncoding.DecodeString(strings.Join(strings.Fields(s), ""))
	}
	gunzip := func(b []byte) ([]byte, error) {
		r, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		return io.ReadAll(r)
	}
	var out []byte
	var err error
	switch strings.ToLower(f.Encoding) {
	case "", "text/plain":
		out = []byte(f.Content)
	case "b64", "base64":
		out, err = b64(f.Content)
	case "gz", "gzip":
		out, err = gunzip([]byte(f.Content))
	case "gz+b64", "gz+base64", "gzip+b64", "gzip+base64":
		if out, err = b64(f.Content); err == nil {
			out, err = gunzip(out)
		}
	default:
		return nil, fmt.Errorf("%s: encoding %q is not supported", f.Path, f.Encoding)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %s content: %w", f.Path, f.Encoding, err)
	}
	return out, nil
}
