package labvm

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
)

var envKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// runScript is what the guest's chroot shell runs: environment, cwd, command.
func runScript(cfg Config) (string, error) {
	var b strings.Builder
	b.WriteString("cd " + shQuote(filepath.Clean(cfg.WorkDir)) + " || exit 126\n")
	env := append([]string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/root", "LANG=C.UTF-8",
	}, cfg.Env...)
	for _, kv := range append(env, "LABVM=1") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !envKey.MatchString(k) {
			return "", fmt.Errorf("labvm: bad Env entry %q", kv)
		}
		b.WriteString("export " + k + "=" + shQuote(v) + "\n")
	}
	b.WriteString("exec")
	for _, a := range cfg.Command {
		b.WriteString(" " + shQuote(a))
	}
	b.WriteString("\n")
	return b.String(), nil
}

// shQuote quotes s for the guest's sh.
func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// shareConfig is /ctl/config, sourced by the init script: the work dir and
// the extra shares, mounted in this order (a parent before its children).
func shareConfig(cfg Config) string {
	var b strings.Builder
	b.WriteString("WORKDIR=" + shQuote(filepath.Clean(cfg.WorkDir)) + "\n")
	fmt.Fprintf(&b, "NSHARES=%d\n", len(cfg.Shares))
	for i, d := range cfg.Shares {
		fmt.Fprintf(&b, "SHARE%d=%s\n", i, shQuote(filepath.Clean(d)))
	}
	return b.String()
}
