package addresses

import (
	"flag"
	"net/netip"
	"testing"

	"github.com/cozystack/vlan-conformance/framework/config"
)

func TestGuestsAvoidGatewayNodesAndControlPool(t *testing.T) {
	subnet := netip.MustParsePrefix("203.0.113.0/24")
	// A gateway inside the guests' range, and guests starting among the nodes.
	p, err := New(subnet, netip.MustParseAddr("203.0.113.12"), netip.MustParseAddr("203.0.113.8"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[netip.Addr]bool{}
	poolStart, _ := ControlPool(subnet)
	for k := 0; ; k++ {
		g, err := p.Guest(k/BlockSize, k%BlockSize)
		if err != nil {
			if k < 200 {
				t.Fatalf("only %d guests: %v", k, err)
			}
			break
		}
		a := g.Addr()
		if seen[a] || p.reserved[a] || !a.Less(poolStart) || g.Bits() != 24 {
			t.Fatalf("guest %d: %s is taken, reserved or in the control pool", k, g)
		}
		seen[a] = true
	}
	if first, _ := p.Guest(0, 0); first.String() != "203.0.113.10/24" {
		t.Errorf("first guest %s, want 203.0.113.10/24 (after the nodes)", first)
	}
	if _, err := p.Guest(0, BlockSize); err == nil {
		t.Error("a tenant's block must end")
	}
	if _, err := p.Guest(1000, 0); err == nil {
		t.Error("a full subnet must say so")
	}
}

func TestDefaultLayout(t *testing.T) {
	plan, err := ForConfig(config.Register(newFlagSet()))
	if err != nil {
		t.Fatal(err)
	}
	subnet := netip.MustParsePrefix("203.0.113.0/24")
	for want, got := range map[string]string{
		"203.0.113.2/24":   Node(subnet, 0).String(),
		"203.0.113.10/24":  must(plan.VLAN.Guest(0, 0)).String(),
		"203.0.113.18/24":  must(plan.VLAN.Guest(1, 0)).String(),
		"198.51.100.10/24": must(plan.Other.Guest(0, 0)).String(),
	} {
		if got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	}
	if first, last := ControlPool(subnet); first.String() != "203.0.113.234" || last.String() != "203.0.113.254" {
		t.Errorf("control pool %s-%s", first, last)
	}
}

func must(p netip.Prefix, err error) netip.Prefix {
	if err != nil {
		panic(err)
	}
	return p
}

func newFlagSet() *flag.FlagSet { return flag.NewFlagSet("test", flag.ContinueOnError) }
