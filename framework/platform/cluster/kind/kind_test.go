package kind

import (
	"slices"
	"testing"

	kindconfig "github.com/cozystack/vlan-conformance/kind-config"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
)

func TestDefaultConfig(t *testing.T) {
	c, err := ParseConfig(kindconfig.Default())
	if err != nil {
		t.Fatal(err)
	}
	var roles []v1alpha4.NodeRole
	for _, n := range c.Nodes {
		roles = append(roles, n.Role)
	}
	if !slices.Equal(roles, []v1alpha4.NodeRole{v1alpha4.ControlPlaneRole, v1alpha4.WorkerRole, v1alpha4.WorkerRole}) {
		t.Fatalf("want a control plane and two workers, got %v", roles)
	}
	if c.Networking.DisableDefaultCNI {
		t.Fatal("the default config keeps kind's default CNI for the pod network")
	}
	cps, workers := NodeNames("vcf", c)
	if !slices.Equal(cps, []string{"vcf-control-plane"}) || !slices.Equal(workers, []string{"vcf-worker", "vcf-worker2"}) {
		t.Fatalf("node names: %v %v", cps, workers)
	}
	for _, w := range Workers(c) {
		if w.Labels["vlan-conformance.cozystack.io/vlan-node"] != "true" {
			t.Fatalf("workers carry the VLAN node label: %+v", w)
		}
	}
}

func TestOfflineConfig(t *testing.T) {
	raw, err := kindconfig.Get("offline.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Networking.DisableDefaultCNI || len(c.ContainerdConfigPatches) != 0 || len(Workers(c)) != 2 {
		t.Fatalf("the offline config has no default CNI, no containerd patch (the host fixes add it) and two workers: %+v", c)
	}
}

// The oom_score_adj fix is added exactly when the probe finds the wall.
func TestHostFixes(t *testing.T) {
	raw, _ := kindconfig.Get("offline.yaml")
	out, fixes, err := HostFixes(raw)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseConfig(out)
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	if OOMScoreAdjRestricted() {
		want = 1
	}
	if len(fixes) != want || len(c.ContainerdConfigPatches) != want {
		t.Fatalf("restricted=%v: fixes %v, patches %v", want == 1, fixes, c.ContainerdConfigPatches)
	}
	t.Logf("oom_score_adj restricted here: %v; fixes: %v", want == 1, fixes)
}

func TestParseConfigRejects(t *testing.T) {
	for name, raw := range map[string]string{
		"unknown key": "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodez: []\n",
		"no worker":   "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n- role: control-plane\n",
		"wrong kind":  "kind: Pod\napiVersion: v1\n",
	} {
		if _, err := ParseConfig([]byte(raw)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestServiceSubnetIsKindsDefaultUnlessSet(t *testing.T) {
	c, err := ParseConfig([]byte("kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n- role: control-plane\n- role: worker\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := ServiceSubnet(c); got != "10.96.0.0/16" {
		t.Errorf("default: got %q, want kind's 10.96.0.0/16", got)
	}
	if len(c.Nodes) != 2 || c.Nodes[0].Image != "" {
		t.Errorf("defaulting must not touch the configuration: %+v", c.Nodes)
	}
	c.Networking.ServiceSubnet = "10.97.0.0/16"
	if got := ServiceSubnet(c); got != "10.97.0.0/16" {
		t.Errorf("set: got %q", got)
	}
}
