package evidence

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// dumpCommands are what a person debugging a failed spec runs first.
var dumpCommands = [][]string{
	{"ip", "-d", "address"},
	{"ip", "-d", "link"},
	{"ip", "route", "show", "table", "all"},
	{"ip", "neigh"},
	{"bridge", "fdb"},
	{"bridge", "link"},
}

// DumpNamespaces writes, for each named netns, one file with the output of
// `ip a/link/route/neigh` and `bridge fdb/link` into dir.
func DumpNamespaces(ctx context.Context, dir string, names []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, ns := range names {
		var b strings.Builder
		for _, c := range dumpCommands {
			args := append([]string{c[0], "-n", ns}, c[1:]...)
			out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
			fmt.Fprintf(&b, "### %s\n%s", strings.Join(args, " "), out)
			if err != nil {
				fmt.Fprintf(&b, "(exit: %v)\n", err)
			}
			b.WriteString("\n")
		}
		if err := os.WriteFile(filepath.Join(dir, ns+".txt"), []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}
