package node

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// IPCommands are what a person debugging a failed spec runs first, on every
// node, the gateway and each launcher pod.
var IPCommands = []string{"ip a", "ip link", "ip route show table all", "ip neigh", "bridge fdb", "bridge -j vlan show"}

// WriteCommands runs IPCommands in a network namespace into one file.
func WriteCommands(ctx context.Context, path, netnsPath string) error {
	var b strings.Builder
	for _, c := range IPCommands {
		args := append([]string{"nsenter", "--net=" + netnsPath}, strings.Fields(c)...)
		out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
		fmt.Fprintf(&b, "### %s\n%s", c, out)
		if err != nil {
			fmt.Fprintf(&b, "(exit: %v)\n", err)
		}
		b.WriteString("\n")
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
