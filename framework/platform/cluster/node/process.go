package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ProcessOf returns the PID (as the host sees it) of a process whose
// cgroup path contains one of keys: a pod UID or a container ID. Kind
// nodes' containers are processes of this host, in cgroups named after
// them.
func ProcessOf(keys []string) (string, error) {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return "", err
	}
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cgroup"))
		if err != nil {
			continue
		}
		for _, k := range keys {
			if strings.Contains(string(b), k) {
				return p.Name(), nil
			}
		}
	}
	return "", fmt.Errorf("no process in a cgroup named after %v", keys)
}
