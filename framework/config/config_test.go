package config

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func parse(t *testing.T, args ...string) error {
	t.Helper()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	c := Register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	// The plugin dir and manifest are checked on disk; point them at this
	// package's files so only the flag under test can be wrong.
	if c.PluginDir == "bin/cni/v1.9.1" {
		c.PluginDir = "testdata"
	}
	if c.StagerManifest == "fixtures/stager/multus-daemonset.yaml" {
		c.StagerManifest = "../../fixtures/stager/multus-daemonset.yaml"
	}
	return c.Validate()
}

func TestValidateAcceptsTheGuide(t *testing.T) {
	if err := parse(t); err != nil {
		t.Fatalf("the guide's defaults must validate: %v", err)
	}
}

func TestValidateRejectsBadInput(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // this test is no pod, even when CI runs in one
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--vlan=0"}, "--vlan 0: VLAN id must be in 1..4094"},
		{[]string{"--vlan=4095"}, "--vlan 4095: VLAN id must be in 1..4094"},
		{[]string{"--subnet=203.0.113.0/33"}, `--subnet "203.0.113.0/33": not a CIDR`},
		{[]string{"--subnet=203.0.113.7/24"}, "host bits set"},
		{[]string{"--gateway=192.0.2.1"}, "--gateway 192.0.2.1: outside the subnet 203.0.113.0/24"},
		{[]string{"--guest-address=203.0.113.10"}, "--guest-address"},
		{[]string{"--uplink=vcf-no-such-nic"}, `--uplink "vcf-no-such-nic": no such interface`},
		{[]string{"--plugin-dir=/nonexistent"}, `--plugin-dir "/nonexistent": no bridge plugin there`},
		{[]string{"--stager-manifest=/nonexistent.yaml"}, "--stager-manifest"},
		{[]string{"--tier=cluster", "--kubeconfig=/nonexistent"}, "--kubeconfig"},
		// The cluster the suite runs in is a pod's to name (certify's Job).
		{[]string{"--tier=cluster", "--kubeconfig=in-cluster"}, "--kubeconfig=in-cluster: not in a pod"},
		// A kind cluster's nodes the suite enters itself.
		{[]string{"--tier=cluster", "--node-agent-image=localhost/vcf/conformance:x"}, "the node agent is for an existing cluster (--kubeconfig)"},
		{[]string{"--control=VLAN-99/nope"}, "--control"},
		// A control applied to the other tier would change nothing.
		{[]string{"--control=VLAN-11/nad-copied-into-vm-namespace"}, "built on the cluster tier, not --tier=lab"},
		{[]string{"--tier=cluster", "--control=VLAN-01/wrong-vlan-id"}, "built on the lab tier, not --tier=cluster"},
		// A lab control that breaks VMs on a cluster has no VM there to break.
		{[]string{"--tier=cluster", "--workload=pod", "--control=VLAN-12/macspoofchk-dropped"}, "on a cluster it breaks VMs: pass --workload=vm"},
		// So does a cluster control whose claim is about VMs.
		{[]string{"--tier=cluster", "--workload=pod", "--control=ARP-07/mac-kept-per-vm-object"}, "on a cluster it breaks VMs: pass --workload=vm"},
		{[]string{"--control=ARP-07/mac-kept-per-vm-object"}, "built on the cluster tier, not --tier=lab"},
		{[]string{"--other-vlan=100"}, "must differ"},
		{[]string{"--gateway-wait=0s"}, "--gateway-wait 0s: want 1s..6h0m0s"},
		{[]string{"--gateway-wait=7h"}, "--gateway-wait 7h0m0s: want 1s..6h0m0s"},
	} {
		err := parse(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

// A stager subject the suite cannot run is bad input (exit 2), not a
// package that failed its specs.
func TestValidateRejectsBadStagerSubject(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ds := func(initContainers, volumes string) string {
		return "apiVersion: apps/v1\nkind: DaemonSet\nspec:\n  template:\n    spec:\n      initContainers:\n" + initContainers + "      volumes:\n" + volumes
	}
	mount := "        volumeMounts: [{name: cnibin, mountPath: /host/opt/cni/bin}]\n"
	if err := os.Mkdir(filepath.Join(dir, "no-plugins-root"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		flag, want string
	}{
		{"--stager-manifest=" + file("not-yaml", "root:x:0:0:root:/root:/bin/bash\n{ nope: [\n"), "not valid YAML"},
		{"--stager-manifest=" + file("no-init.yaml", ds("        - {name: install-multus-binary, command: [\"true\"]}\n", "        - {name: cnibin, hostPath: {path: /opt/cni/bin}}\n")), "no init container named install-cni-plugins"},
		{"--stager-manifest=" + file("no-mount.yaml", ds("        - name: install-cni-plugins\n          command: [sh]\n  "+mount, "        - {name: cnibin, emptyDir: {}}\n")), "mounts no hostPath volume /opt/cni/bin"},
		{"--stager-image=" + filepath.Join(dir, "no-plugins-root"), "no cni-plugins/ directory"},
		{"--stager-image=" + file("not-a-tar", "hello"), "not a directory or a tar archive"},
	} {
		err := parse(t, tc.flag)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.flag, err, tc.want)
		}
	}
}

func TestValidateListsEveryProblem(t *testing.T) {
	err := parse(t, "--vlan=0", "--gateway=nonsense")
	if err == nil || strings.Count(err.Error(), "\n") < 1 {
		t.Fatalf("want both problems in one error, got %v", err)
	}
}

// --control selects a control of framework/controls; without one the
// subject is the guide's, a Control that breaks nothing.
func TestSelectedControl(t *testing.T) {
	if got := (&Config{}).SelectedControl(); got.ID != "" || got.BridgeWiring != 0 || got.NAD != nil {
		t.Errorf("no --control selects %+v, want the zero Control", got)
	}
	const id = "VLAN-10/jumbo-physical-path"
	if got := (&Config{Control: id}).SelectedControl(); got.ID != id || got.MTU != 9000 {
		t.Errorf("--control=%s selects %+v", id, got)
	}
}
