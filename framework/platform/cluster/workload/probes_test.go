package workload

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/kube"
)

// STG-12's probes: both pinned to the node, the hostNetwork one first and
// with no network asked of Multus, the other on the NAD as a workload pod
// asks for it; one roll's pair is deleted by its suffix, another's stays.
func TestProbesOnANode(t *testing.T) {
	k := kubefake.NewSimpleClientset()
	w := New(&config.Config{}, nil, map[string]time.Duration{"vmi": time.Second}, t.TempDir(), &kube.Clients{Kube: k}, nil, nil, nil, nil)
	ctx := context.Background()
	pods, err := w.CreateProbes(ctx, "tenant-roll", "vlan100", "worker", "1")
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 2 {
		t.Fatalf("%d probes, want 2", len(pods))
	}
	host, nad := pods[0], pods[1]
	if !host.Spec.HostNetwork || host.Spec.NodeName != "worker" || host.Annotations["k8s.v1.cni.cncf.io/networks"] != "" {
		t.Errorf("the first probe: hostNetwork %v on %q, networks %q; want the host network on worker, no NAD", host.Spec.HostNetwork, host.Spec.NodeName, host.Annotations["k8s.v1.cni.cncf.io/networks"])
	}
	var sel []struct{ Name string }
	if nad.Spec.HostNetwork || nad.Spec.NodeName != "worker" || json.Unmarshal([]byte(nad.Annotations["k8s.v1.cni.cncf.io/networks"]), &sel) != nil || len(sel) != 1 || sel[0].Name != "vlan100" {
		t.Errorf("the second probe: hostNetwork %v on %q, networks %q; want the pod network on worker, the NAD vlan100", nad.Spec.HostNetwork, nad.Spec.NodeName, nad.Annotations["k8s.v1.cni.cncf.io/networks"])
	}
	if _, err := w.CreateProbes(ctx, "tenant-roll", "vlan100", "worker", "2"); err != nil {
		t.Fatal(err)
	}
	if err := w.DeleteProbes(ctx, "tenant-roll", "1"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{host.Name, nad.Name} {
		if _, err := k.CoreV1().Pods("tenant-roll").Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s is still there (%v)", name, err)
		}
	}
	if list, _ := k.CoreV1().Pods("tenant-roll").List(ctx, metav1.ListOptions{}); len(list.Items) != 2 {
		t.Errorf("%d pods left, want the second roll's 2", len(list.Items))
	}
	if err := w.DeleteProbes(ctx, "tenant-roll", "1"); err != nil {
		t.Errorf("deleting probes already gone: %v", err)
	}
}
