package nodeagent

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/cozystack/vlan-conformance/framework/platform/cluster/kube"
)

// The agent runs in each node's own network namespace with nothing it
// does not need (docs/cluster-tier.md lists the same): its captures and
// pings need NET_RAW, deleting a bridge a spec caused NET_ADMIN; the
// observations (netlink dumps, ETHTOOL_GDRVINFO) need none.
func TestTheAgentRunsInTheNodesNamespaceWithNoPrivilege(t *testing.T) {
	ns, ds := Render("localhost/vcf/conformance:abc")
	if ns.Labels[kube.OwnedLabel] != "true" || ds.Labels[kube.OwnedLabel] != "true" {
		t.Errorf("namespace %v, DaemonSet %v: the suite's own objects carry %s (the sweep finds them)", ns.Labels, ds.Labels, kube.OwnedLabel)
	}
	if ns.Labels["pod-security.kubernetes.io/enforce"] != "privileged" {
		t.Error("a hostNetwork pod is refused in a namespace under the baseline pod security profile")
	}
	pod := ds.Spec.Template.Spec
	if !pod.HostNetwork {
		t.Error("the agent must run in the node's network namespace")
	}
	if len(pod.Tolerations) != 1 || pod.Tolerations[0].Operator != corev1.TolerationOpExists {
		t.Errorf("tolerations %v: the agent must run on every node, tainted or not", pod.Tolerations)
	}
	c := pod.Containers[0]
	sc := c.SecurityContext
	if c.Image != "localhost/vcf/conformance:abc" || c.Command[0] != binary {
		t.Errorf("container %s %v", c.Image, c.Command)
	}
	if sc.Capabilities == nil || fmt.Sprint(sc.Capabilities.Add) != "[NET_RAW NET_ADMIN]" || fmt.Sprint(sc.Capabilities.Drop) != "[ALL]" {
		t.Errorf("capabilities %+v: want every one dropped but NET_RAW and NET_ADMIN", sc.Capabilities)
	}
	if sc.Privileged != nil || *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("security context %+v", sc)
	}
	if *pod.AutomountServiceAccountToken {
		t.Error("the agent never calls the API: it gets no token")
	}
}
