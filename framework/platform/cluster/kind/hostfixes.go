package kind

import (
	"os/exec"

	"sigs.k8s.io/yaml"
)

// restrictOOMScoreAdj tells containerd in the nodes not to lower
// oom_score_adj below the node's own: without CAP_SYS_RESOURCE runc dies
// creating every pod sandbox ("can't get final child's PID from pipe").
const restrictOOMScoreAdj = `[plugins."io.containerd.grpc.v1.cri"]
  restrict_oom_score_adj = true`

// OOMScoreAdjRestricted probes whether a process here may lower its
// oom_score_adj (kind nodes' runc does so for every container).
func OOMScoreAdjRestricted() bool {
	return exec.Command("/bin/sh", "-c", "echo -999 > /proc/self/oom_score_adj").Run() != nil
}

// HostFixes adapts a kind config to this host, by probing, never by
// assumption: it returns the config and the fixes applied.
func HostFixes(raw []byte) ([]byte, []string, error) {
	if !OOMScoreAdjRestricted() {
		return raw, nil, nil
	}
	c, err := ParseConfig(raw)
	if err != nil {
		return nil, nil, err
	}
	c.ContainerdConfigPatches = append(c.ContainerdConfigPatches, restrictOOMScoreAdj)
	out, err := yaml.Marshal(c)
	if err != nil {
		return nil, nil, err
	}
	return out, []string{"oom_score_adj cannot be lowered here: containerd in the nodes gets restrict_oom_score_adj = true"}, nil
}
