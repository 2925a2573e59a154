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
