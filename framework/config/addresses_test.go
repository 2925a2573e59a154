package config_test

import (
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cozystack/vlan-conformance/framework/addresses"
	"github.com/cozystack/vlan-conformance/framework/config"
)

// newConfig is the guide's defaults with args applied, the on-disk flags
// pointed at files that exist so only the addresses can be wrong.
func newConfig(t testing.TB, args ...string) *config.Config {
	t.Helper()
	fset := flag.NewFlagSet("t", flag.ContinueOnError)
	c := config.Register(fset)
	if err := fset.Parse(args); err != nil {
		t.Fatal(err)
	}
	c.PluginDir = "testdata"
	c.StagerManifest = "../../fixtures/stager/multus-daemonset.yaml"
	return c
}

func TestValidateRejectsAddressesThePlanKeeps(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--guest-address=203.0.113.1/24"}, "--guest-address 203.0.113.1/24: is the gateway's address (--gateway)"},
		{[]string{"--gateway=203.0.113.254", "--guest-address=203.0.113.254/24"}, "--guest-address 203.0.113.254/24: is the gateway's address (--gateway)"},
		{[]string{"--guest-address=203.0.113.0/24"}, "--guest-address 203.0.113.0/24: is the subnet's network address"},
		{[]string{"--guest-address=203.0.113.255/24"}, "--guest-address 203.0.113.255/24: is the subnet's broadcast address"},
		// node-a's bridge, the macvlan node (node-m), the last node slot.
		{[]string{"--guest-address=203.0.113.2/24"}, "--guest-address 203.0.113.2/24: is node 0's address (the plan keeps 203.0.113.2-203.0.113.9 for the nodes' bridge and macvlan addresses)"},
		{[]string{"--guest-address=203.0.113.4/24"}, "--guest-address 203.0.113.4/24: is node 2's address"},
		{[]string{"--guest-address=203.0.113.9/24"}, "--guest-address 203.0.113.9/24: is node 7's address"},
		{[]string{"--guest-address=203.0.113.234/24"}, "--guest-address 203.0.113.234/24: is in the host-local control's pool 203.0.113.234-203.0.113.254"},
		{[]string{"--guest-address=203.0.113.254/24"}, "--guest-address 203.0.113.254/24: is in the host-local control's pool 203.0.113.234-203.0.113.254"},
		{[]string{"--guest-address=203.0.113.200/24"}, "--guest-address 203.0.113.200/24: leaves room for 34 guests counting up from it to the host-local control's pool at 203.0.113.234; the suite's 12 tenants need 96 (8 each)"},
		// A gateway in the guests' range is skipped, and so costs one.
		{[]string{"--gateway=203.0.113.180", "--guest-address=203.0.113.170/24"}, "leaves room for 63 guests"},
		{[]string{"--subnet=203.0.113.0/26", "--guest-address=203.0.113.10/26"}, "--subnet 203.0.113.0/26: too small: it holds 32 guests besides the gateway, 8 node addresses and the host-local control's pool of 21, and the suite's 12 tenants need 96 (8 each); want /25 or larger"},
		{[]string{"--subnet=203.0.113.0/30", "--guest-address=203.0.113.1/30", "--gateway=203.0.113.2"}, "--subnet 203.0.113.0/30: too small: it holds 0 guests"},
		{[]string{"--other-subnet=198.51.100.0/29"}, "--other-subnet 198.51.100.0/29: too small: its guests would start at 198.51.100.10, after the gateway's and 8 nodes' addresses, outside it; want /28 or larger"},
	} {
		err := newConfig(t, tc.args...).Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error containing %q", tc.args, err, tc.want)
			continue
		}
		if n := strings.Count(err.Error(), "\n") + 1; n != 1 {
			t.Errorf("%v: want one error, got %d:\n%v", tc.args, n, err)
		}
	}
}

func TestValidateAcceptsAddressesThePlanLeavesFree(t *testing.T) {
	for _, args := range [][]string{
		nil,
		// A vendor's gateway at the top, in the control pool's range: the
		// control's host-local IPAM is the only user of that pool.
		{"--gateway=203.0.113.254"},
		// A gateway among the guests: they skip it.
		{"--gateway=203.0.113.12"},
		// Free addresses below the nodes' and just below the room's end.
		{"--gateway=203.0.113.254", "--guest-address=203.0.113.1/24"},
		{"--guest-address=203.0.113.138/24"},
		{"--subnet=203.0.113.0/25", "--gateway=203.0.113.1", "--guest-address=203.0.113.10/25"},
		{"--other-subnet=198.51.100.0/28"},
	} {
		c := newConfig(t, args...)
		if err := c.Validate(); err != nil {
			t.Errorf("%v: %v", args, err)
			continue
		}
		if _, err := addresses.ForConfig(c); err != nil {
			t.Errorf("%v: validated, but no plan: %v", args, err)
		}
	}
}

// The guests' range is checked for room for addresses.Tenants blocks: that
// must cover every spec container the suite declares.
func TestTenantsCoversTheSuite(t *testing.T) {
	n := 0
	err := filepath.WalkDir("../../suites", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(node ast.Node) bool {
			if call, ok := node.(*ast.CallExpr); ok {
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "New" {
					if id, ok := sel.X.(*ast.Ident); ok && id.Name == "framework" {
						n++
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 || n > addresses.Tenants {
		t.Fatalf("the suite makes %d tenants (framework.New in suites/), addresses.Tenants is %d: raise it", n, addresses.Tenants)
	}
}
