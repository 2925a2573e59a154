package cluster

import (
	"flag"
	"strings"
	"testing"

	"github.com/cozystack/vlan-conformance/framework/config"
)

// The guide's example as --dry-run prints it: every object and node action
// in order (fixtures/cluster/dry-run.golden; the driver's output is checked
// against the same file by `make cluster-dry-run`).
func TestDryRunGolden(t *testing.T) {
	out := dryRun(t)
	golden(t, "dry-run.golden", out)
	// Order: cluster, cabling, plugins, Multus, KubeVirt, then the guide's objects.
	last := -1
	for _, s := range []string{"kind: create cluster vcf", "stage nodes", "gateway netns vcf-gw", "vcf-worker (netns", "copy the reference plugins", "Multus thick v4.3.0", "stage multus", "KubeVirt operator v1.8.4", "useEmulation", "stage kubevirt",
		"kind: NetworkAttachmentDefinition", "kind: Secret", "kind: VirtualMachine", "stage nad", "stage vmi", "kind delete cluster vcf"} {
		i := strings.Index(out, s)
		if i < 0 || i < last {
			t.Fatalf("%q missing or out of order in the dry run", s)
		}
		last = i
	}
}

func TestDryRunExistingCluster(t *testing.T) {
	out := dryRun(t, "--kubeconfig=/nonexistent/kubeconfig", "--gateway=203.0.113.254")
	for _, absent := range []string{"kind: create", "Multus thick", "KubeVirt operator", "gateway netns", "kind delete"} {
		if strings.Contains(out, absent) {
			t.Fatalf("an existing cluster gets no %q:\n%s", absent, out)
		}
	}
	if !strings.Contains(out, "203.0.113.254") || !strings.Contains(out, "kind: VirtualMachine") {
		t.Fatalf("want the vendor's gateway and the guide's objects:\n%s", out)
	}
}

// With --node-agent-image the plan puts the agent on the nodes after the
// sweep (which would delete it) and before any spec, and prints its
// DaemonSet in full.
func TestDryRunExistingClusterWithNodeAgent(t *testing.T) {
	out := dryRun(t, "--kubeconfig=/nonexistent/kubeconfig", "--node-agent-image=registry.example/vcf/conformance:1")
	last := -1
	for _, s := range []string{"tenant namespaces a killed run left", "the node agent: namespace vcf-node-agent", "kind: DaemonSet", "image: registry.example/vcf/conformance:1", "hostNetwork: true", "stage node-agent", "observed through the agent's pod", "kind: NetworkAttachmentDefinition"} {
		i := strings.Index(out, s)
		if i < 0 || i < last {
			t.Fatalf("%q missing or out of order in the dry run:\n%s", s, out)
		}
		last = i
	}
}

// dryRun is what --dry-run prints for a cluster run with args.
func dryRun(t *testing.T, args ...string) string {
	t.Helper()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	cfg := config.Register(fs)
	if err := fs.Parse(append([]string{"--tier=cluster", "--dry-run"}, args...)); err != nil {
		t.Fatal(err)
	}
	c, err := NewDryRun(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := DryRun(&b, c); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
