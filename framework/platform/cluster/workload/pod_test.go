package workload

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/cozystack/vlan-conformance/fixtures"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/kube"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/node"
)

// The pod workload asks Multus for the NAD by name only (resolved in the
// pod's own namespace, VLAN-11) and names the interface as the guide's
// netplan expects.
func TestRenderPod(t *testing.T) {
	spec := platform.VMSpec{Name: "vm-a", Namespace: "tenant-example", Networks: []string{"vlan100"}, CloudInit: fixtures.CloudInit("203.0.113.10/24"), MAC: "02:00:00:00:00:0a"}
	p, err := renderPod(spec, "vcf-worker")
	if err != nil {
		t.Fatal(err)
	}
	var sel []map[string]string
	if err := json.Unmarshal([]byte(p.Annotations["k8s.v1.cni.cncf.io/networks"]), &sel); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"name": "vlan100", "interface": "enp2s0", "mac": "02:00:00:00:00:0a"}
	if len(sel) != 1 || len(sel[0]) != len(want) {
		t.Fatalf("selection %v, want [%v]", sel, want)
	}
	for k, v := range want {
		if sel[0][k] != v {
			t.Fatalf("selection %v, want [%v]", sel, want)
		}
	}
	if p.Name != "pod-vm-a" || p.Spec.NodeName != "vcf-worker" || p.Labels[kube.OwnedLabel] != "true" || p.Spec.Containers[0].Image != PodImage {
		t.Fatalf("pod %+v", p)
	}
	none, _ := renderPod(platform.VMSpec{Name: "x", Namespace: "n"}, "")
	if _, ok := none.Annotations["k8s.v1.cni.cncf.io/networks"]; ok {
		t.Fatal("a pod without networks asks Multus for none")
	}
}

// processOf finds a process by a string of its cgroup path: this test's
// own cgroup finds some process in it; a made-up pod UID finds none.
func TestProcessOf(t *testing.T) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Skip(err)
	}
	line := strings.TrimSpace(strings.Split(string(b), "\n")[0])
	path := line[strings.LastIndex(line, ":")+1:]
	if path == "/" {
		t.Skip("in the root cgroup: nothing distinctive to look for")
	}
	if _, err := node.ProcessOf([]string{path}); err != nil {
		t.Fatalf("own cgroup %q: %v", path, err)
	}
	if _, err := podNetns("00000000-0000-0000-0000-000000000000"); err == nil {
		t.Fatal("a pod UID no process carries was found")
	}
}

// An absent or unreadable network-status, or one without the network, is
// an error: VLAN-06's empty lists would otherwise prove nothing (issue 22,
// item 3).
func TestNetworkStatus(t *testing.T) {
	const net = "tenant-a/vlan100"
	ok := `[{"name":"ptp","ips":["10.244.1.5"]},{"name":"tenant-a/vlan100","interface":"pod1a2b","mtu":1500}]`
	if ips, mtu, err := networkStatus(ok, net); err != nil || len(ips) != 0 || mtu != 1500 {
		t.Errorf("bridge NAD without IPAM: %v %d %v", ips, mtu, err)
	}
	if ips, _, err := networkStatus(`[{"name":"tenant-a/vlan100","ips":["203.0.113.7"]}]`, net); err != nil || len(ips) != 1 {
		t.Errorf("with an IP: %v %v", ips, err)
	}
	for _, bad := range []string{"", "{not json", `[{"name":"ptp"}]`} {
		if _, _, err := networkStatus(bad, net); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
