package config

import (
	"flag"
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
		c.StagerManifest = "config.go"
	}
	return c.Validate()
}

func TestValidateAcceptsTheGuide(t *testing.T) {
	if err := parse(t); err != nil {
		t.Fatalf("the guide's defaults must validate: %v", err)
	}
}

func TestValidateRejectsBadInput(t *testing.T) {
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
		{[]string{"--control=VLAN-99/nope"}, "--control"},
		{[]string{"--other-vlan=100"}, "must differ"},
	} {
		err := parse(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

func TestValidateListsEveryProblem(t *testing.T) {
	err := parse(t, "--vlan=0", "--gateway=nonsense")
	if err == nil || strings.Count(err.Error(), "\n") < 1 {
		t.Fatalf("want both problems in one error, got %v", err)
	}
}

func TestEveryControlNamesAClaim(t *testing.T) {
	for _, c := range Controls() {
		if !strings.HasPrefix(c.ID, c.Claim+"/") {
			t.Errorf("control %s: ID must start with its claim %s", c.ID, c.Claim)
		}
	}
}
