// Command imgtool writes and inspects docker-archive image tarballs without a
// container daemon, so the offline lane can produce every image it needs from
// binaries and Debian root filesystems alone.
//
//	imgtool build -o OUT.tar --tag REF [--tag REF ...] [--base ROOTFS.tar]
//	        [--add SRC:DEST[:MODE]]... [--entrypoint JSON] [--cmd JSON]
//	        [--env K=V]... [--user U] [--workdir D] [--stop-signal SIG]
//	        [--label K=V]... [--volume PATH]...
//	imgtool inspect [--files] IN.tar
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

const usage = `usage:
  imgtool build -o OUT.tar --tag REF [--tag REF ...] [--base ROOTFS.tar]
          [--add SRC:DEST[:MODE]]... [--entrypoint JSON-array] [--cmd JSON-array]
          [--env K=V]... [--user U] [--workdir D] [--stop-signal SIG]
          [--label K=V]... [--volume PATH]...
  imgtool inspect [--files] IN.tar
`

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "imgtool:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	switch args[0] {
	case "build":
		opts, err := parseBuild(args[1:])
		if err != nil {
			return err
		}
		return Build(opts)
	case "inspect":
		fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
		files := fs.Bool("files", false, "also list the files of the flattened filesystem")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return errors.New(usage)
		}
		return Inspect(fs.Arg(0), *files, stdout)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	return fmt.Errorf("unknown command %q\n%s", args[0], usage)
}

// list is a repeatable string flag.
type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

// jsonArray is a flag holding an exec-form JSON array, as in a Dockerfile.
type jsonArray struct {
	set bool
	v   []string
}

func (j *jsonArray) String() string { return strings.Join(j.v, " ") }
func (j *jsonArray) Set(s string) error {
	if err := json.Unmarshal([]byte(s), &j.v); err != nil {
		return fmt.Errorf("want a JSON array of strings: %w", err)
	}
	j.set = true
	return nil
}

func parseBuild(args []string) (BuildOptions, error) {
	var o BuildOptions
	var tags, adds, env, labels, volumes list
	var entrypoint, cmd jsonArray
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	fs.StringVar(&o.Output, "o", "", "output docker-archive tarball")
	fs.Var(&tags, "tag", "image reference (repeatable: one image, several names)")
	fs.StringVar(&o.Base, "base", "", "rootfs tarball used as the first layer")
	fs.Var(&adds, "add", "SRC:DEST[:MODE], one layer each (repeatable)")
	fs.Var(&entrypoint, "entrypoint", "entrypoint as a JSON array")
	fs.Var(&cmd, "cmd", "cmd as a JSON array")
	fs.Var(&env, "env", "K=V (repeatable)")
	fs.StringVar(&o.User, "user", "", "user[:group]")
	fs.StringVar(&o.Workdir, "workdir", "", "working directory")
	fs.StringVar(&o.StopSignal, "stop-signal", "", "stop signal, e.g. SIGRTMIN+3")
	fs.Var(&labels, "label", "K=V (repeatable)")
	fs.Var(&volumes, "volume", "volume path (repeatable)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() != 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.Output == "" || len(tags) == 0 {
		return o, errors.New("build needs -o and at least one --tag")
	}
	o.Tags, o.Env, o.Volumes = tags, env, volumes
	if entrypoint.set {
		o.Entrypoint = entrypoint.v
	}
	if cmd.set {
		o.Cmd = cmd.v
	}
	for _, l := range labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			return o, fmt.Errorf("--label %q: want K=V", l)
		}
		if o.Labels == nil {
			o.Labels = map[string]string{}
		}
		o.Labels[k] = v
	}
	for _, e := range env {
		if !strings.Contains(e, "=") {
			return o, fmt.Errorf("--env %q: want K=V", e)
		}
	}
	for _, a := range adds {
		add, err := parseAdd(a)
		if err != nil {
			return o, err
		}
		o.Adds = append(o.Adds, add)
	}
	return o, nil
}

// parseAdd reads SRC:DEST[:MODE]; MODE is octal.
func parseAdd(s string) (Add, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return Add{}, fmt.Errorf("--add %q: want SRC:DEST[:MODE]", s)
	}
	a := Add{Src: parts[0], Dest: parts[1]}
	if len(parts) == 3 {
		m, err := strconv.ParseUint(parts[2], 8, 32)
		if err != nil || m > 0o7777 {
			return Add{}, fmt.Errorf("--add %q: MODE must be octal, e.g. 0755", s)
		}
		mode := int64(m)
		a.Mode = &mode
	}
	return a, nil
}
