// vcf-runc is a dockerd runtime that calls the real runc after removing, from
// the OCI spec it is given, every capability the kernel will not grant here:
// those missing from this process's bounding set (on this machine
// CAP_SYS_RESOURCE). Without it `docker run --privileged` (and so every kind
// node) fails with "unable to apply caps: operation not permitted", because
// runc cannot raise a capability outside the bounding set.
//
// It rewrites bundle/config.json for `create` and `run` (--bundle or the
// working directory) and the --process file of `exec`, then execs runc with
// the unchanged arguments. The real runc is $VCF_REAL_RUNC or the first
// "runc" on PATH that is not this program.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/cozystack/vlan-conformance/images/docker/runc-wrapper/internal/caps"
)

// runc's global flags that take a value (urfave/cli: "--flag value" or "--flag=value").
var globalValueFlags = map[string]bool{
	"--log": true, "--log-format": true, "--root": true, "--criu": true, "--rootless": true,
}

func main() {
	real, err := realRunc()
	if err != nil {
		fmt.Fprintln(os.Stderr, "vcf-runc:", err)
		os.Exit(1)
	}
	if missing := caps.Missing(); len(missing) > 0 {
		if err := patch(os.Args[1:], missing); err != nil {
			fmt.Fprintln(os.Stderr, "vcf-runc:", err)
			os.Exit(1)
		}
	}
	argv := append([]string{real}, os.Args[1:]...)
	err = syscall.Exec(real, argv, os.Environ())
	fmt.Fprintln(os.Stderr, "vcf-runc: exec", real+":", err)
	os.Exit(1)
}

func realRunc() (string, error) {
	if p := os.Getenv("VCF_REAL_RUNC"); p != "" {
		return p, nil
	}
	self, _ := os.Executable()
	selfInfo, _ := os.Stat(self)
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		p := filepath.Join(dir, "runc")
		fi, err := os.Stat(p)
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			continue
		}
		if selfInfo != nil && os.SameFile(fi, selfInfo) {
			continue
		}
		return p, nil
	}
	return "", fmt.Errorf("no runc on PATH (set VCF_REAL_RUNC)")
}

// patch finds the spec file the runc command line refers to and strips the
// missing capabilities from it.
func patch(args []string, missing map[string]bool) error {
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		name, _, hasValue := strings.Cut(args[i], "=")
		if globalValueFlags[name] && !hasValue {
			i++
		}
		i++
	}
	if i >= len(args) {
		return nil
	}
	cmd, rest := args[i], args[i+1:]
	switch cmd {
	case "create", "run":
		bundle := flagValue(rest, "--bundle", "-b")
		if bundle == "" {
			bundle = "."
		}
		return patchFile(filepath.Join(bundle, "config.json"), missing, "process", "capabilities")
	case "exec":
		if p := flagValue(rest, "--process", "-p"); p != "" {
			return patchFile(p, missing, "capabilities")
		}
	}
	return nil
}

// flagValue returns the value of a subcommand flag in any of its spellings.
func flagValue(args []string, names ...string) string {
	for i, a := range args {
		if a == "--" {
			break
		}
		for _, n := range names {
			for _, spelling := range []string{n, "-" + strings.TrimLeft(n, "-")} {
				if a == spelling && i+1 < len(args) {
					return args[i+1]
				}
				if v, ok := strings.CutPrefix(a, spelling+"="); ok {
					return v
				}
			}
		}
	}
	return ""
}

// patchFile rewrites the capability lists found under path (a chain of
// object keys) in the JSON file, keeping everything else as it was.
func patchFile(file string, missing map[string]bool, path ...string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // keep large integers (limits, ids) exact
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	node := doc
	for _, key := range path {
		m, ok := node.(map[string]any)
		if !ok {
			return nil
		}
		node = m[key]
	}
	caps, ok := node.(map[string]any)
	if !ok {
		return nil
	}
	changed := false
	for set, v := range caps {
		list, ok := v.([]any)
		if !ok {
			continue
		}
		kept := list[:0:0]
		for _, c := range list {
			if s, ok := c.(string); ok && missing[s] {
				changed = true
				continue
			}
			kept = append(kept, c)
		}
		caps[set] = kept
	}
	if !changed {
		return nil
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return err
	}
	fi, err := os.Stat(file)
	if err != nil {
		return err
	}
	return os.WriteFile(file, out.Bytes(), fi.Mode().Perm())
}
