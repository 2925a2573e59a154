package node

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/kube"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/wait"
)

// Set is the run's nodes, shared by every part: the guide's bridge nodes,
// the node provisioned as macvlan users do, and the PID of every kind node
// container (the way into its namespaces).
type Set struct {
	Bridge  []*Node
	Macvlan *Node // nil: none
	PIDs    map[string]int
}

// All are the cabled nodes, bridge nodes first.
func (s *Set) All() []*Node {
	out := append([]*Node{}, s.Bridge...)
	if s.Macvlan != nil {
		out = append(out, s.Macvlan)
	}
	return out
}

// ByName finds a node of the set (nil: not one the suite knows).
func (s *Set) ByName(name string) *Node {
	for _, n := range s.All() {
		if n.name == name {
			return n
		}
	}
	return nil
}

// Names are the bridge nodes' names.
func (s *Set) Names() []string {
	var out []string
	for _, n := range s.Bridge {
		out = append(out, n.name)
	}
	return out
}

// BridgeNodes are the guide's bridge nodes as specs see them.
func (s *Set) BridgeNodes() []platform.Node {
	var out []platform.Node
	for _, n := range s.Bridge {
		out = append(out, n)
	}
	return out
}

// FromAPI takes the schedulable workers of an existing cluster as its VLAN
// nodes, in name order; their addresses on the VLAN are unknown.
func FromAPI(ctx context.Context, kube kubernetes.Interface) ([]*Node, error) {
	list, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []*Node
	for _, n := range list.Items {
		if _, cp := n.Labels["node-role.kubernetes.io/control-plane"]; cp || n.Spec.Unschedulable {
			continue
		}
		out = append(out, Named(n.Name))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	if len(out) == 0 {
		return nil, fmt.Errorf("no schedulable worker node")
	}
	return out, nil
}

// ReadyStage waits until every node is Ready (k is read when it checks:
// the plan makes its stages before it connects).
func ReadyStage(k *kube.Clients, timeout time.Duration) wait.Stage {
	return wait.Stage{Name: "nodes", What: "every node Ready", Timeout: timeout, Check: func(ctx context.Context) (bool, string, error) {
		nodes, err := k.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "listing nodes: " + err.Error(), nil
		}
		if len(nodes.Items) == 0 {
			return false, "no nodes registered", nil
		}
		var notReady []string
		for _, n := range nodes.Items {
			if !ready(n) {
				notReady = append(notReady, n.Name)
			}
		}
		if len(notReady) > 0 {
			return false, fmt.Sprintf("%d/%d nodes Ready; not Ready: %s", len(nodes.Items)-len(notReady), len(nodes.Items), strings.Join(notReady, ", ")), nil
		}
		return true, fmt.Sprintf("%d/%d nodes Ready", len(nodes.Items), len(nodes.Items)), nil
	}}
}

func ready(n corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
