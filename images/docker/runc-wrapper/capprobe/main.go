// capprobe probes the two walls engine.sh cares about, on the host and as
// the payload of the engine's self-test container: capabilities missing from
// the bounding set, and whether oom_score_adj may go below 0.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/cozystack/vlan-conformance/images/docker/runc-wrapper/internal/caps"
)

func main() {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		fmt.Println("capprobe:", err)
		os.Exit(1)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "Cap") {
			fmt.Println(line)
		}
	}
	fmt.Println("bounding-missing:", strings.Join(caps.Sorted(caps.Missing()), ","))
	// A write of -1 needs CAP_SYS_RESOURCE (or the score being already <= -1).
	if err := os.WriteFile("/proc/self/oom_score_adj", []byte("-1"), 0); err != nil {
		fmt.Println("oom_score_adj=-1: refused:", err)
	} else {
		fmt.Println("oom_score_adj=-1: ok")
	}
}
