// Package addresses is the one place the suite's addresses on a VLAN come
// from. Everything is arithmetic on the flags, so the same flags give the
// same addresses. A subnet (--subnet; --other-subnet alike) is laid out as:
//
//	the gateway   --gateway (.1 by default); never handed out
//	nodes         the 2nd host address and up, one each: Node(i) (.2, .3, ...);
//	              the last of them (.9) is the standby router's where the
//	              suite builds the gateway (Standby)
//	guests        from --guest-address up (.10 by default), in blocks of
//	              BlockSize, one block per tenant; the gateway's and the
//	              nodes' addresses are skipped
//	control pool  the last ControlPoolSize host addresses: the range a
//	              negative control hands out by host-local IPAM
//
// A guest never gets the gateway's, a node's or the control pool's address,
// and no two guests of a run share one. Check, which config's Validate
// runs, rejects flags under which the plan could not keep that promise.
package addresses

import (
	"errors"
	"fmt"
	"iter"
	"net/netip"

	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/controls"
)

const (
	// MaxNodes addresses after the gateway's are kept for nodes.
	MaxNodes = 8
	// BlockSize is how many guests one tenant may start.
	BlockSize = 8
	// ControlPoolSize is the size of the control pool at the subnet's top.
	ControlPoolSize = 21
	// Tenants is how many tenants a run makes, one per spec container
	// (framework.New in suites/), each taking a block whatever the tier: the
	// guests' range must hold all their blocks, or a container finds no
	// address mid-run. framework/config's tests count the containers.
	Tenants = 12
)

// The plan checks the flags itself (Check); config calls it from Validate.
// config cannot import this package (ForConfig reads a *config.Config), so
// the check is installed there instead.
func init() { config.SetAddressCheck(Check) }

// Node is the i-th node's address on the VLAN: the subnet's (2+i)-th host.
func Node(subnet netip.Prefix, i int) netip.Prefix {
	return netip.PrefixFrom(host(subnet, 2+i), subnet.Bits())
}

// Standby is the standby router's address beside the gateway (ARP-04),
// where the suite builds the gateway: the last address kept for nodes,
// which no fabric of the suite's has as many of.
func Standby(subnet netip.Prefix) netip.Prefix { return Node(subnet, MaxNodes-1) }

// ControlPool is the range a control's host-local IPAM hands out.
func ControlPool(subnet netip.Prefix) (first, last netip.Addr) {
	last = broadcast(subnet).Prev()
	first = last
	for range ControlPoolSize - 1 {
		first = first.Prev()
	}
	return first, last
}

// HostLocalIPAM is the ipam of a NAD that assigns addresses, from the
// control pool of subnet (no guest holds one of them), as VLAN-06's
// control hands it to the bridge plugin; leaseDir, when set, is where
// host-local keeps its leases instead of its default.
func HostLocalIPAM(subnet netip.Prefix, leaseDir string) map[string]any {
	first, last := ControlPool(subnet)
	ipam := map[string]any{"type": "host-local", "subnet": subnet.String(), "rangeStart": first.String(), "rangeEnd": last.String()}
	if leaseDir != "" {
		ipam["dataDir"] = leaseDir
	}
	return ipam
}

// WithHostLocalIPAM is a NAD's config with HostLocalIPAM as its bridge
// plugin's ipam: what VLAN-06's control hands the plugin on either tier.
func WithHostLocalIPAM(subnet netip.Prefix, leaseDir string) func(conf string) string {
	return controls.SetNADKey("bridge", "ipam", HostLocalIPAM(subnet, leaseDir))
}

// Pool hands out guest addresses on one subnet.
type Pool struct {
	subnet   netip.Prefix
	first    netip.Addr
	reserved map[netip.Addr]bool
}

// New is a pool of subnet's guest addresses from first up, never the
// gateway's nor a node's.
func New(subnet netip.Prefix, gateway, first netip.Addr) (*Pool, error) {
	if !subnet.Contains(first) || !subnet.Contains(gateway) {
		return nil, fmt.Errorf("addresses: %s and %s must lie in %s", first, gateway, subnet)
	}
	return &Pool{subnet: subnet, first: first, reserved: reserved(subnet, gateway)}, nil
}

// Plan is a run's pools: the VLAN under test and the second VLAN.
type Plan struct {
	VLAN, Other *Pool
}

// ForConfig lays out --subnet from --guest-address up and --other-subnet
// from its first address after the nodes'.
func ForConfig(cfg *config.Config) (Plan, error) {
	subnet, err1 := netip.ParsePrefix(cfg.Subnet)
	gw, err2 := netip.ParseAddr(cfg.Gateway)
	guest, err3 := netip.ParsePrefix(cfg.GuestAddr)
	other, err4 := netip.ParsePrefix(cfg.OtherSubnet)
	otherGW, err5 := netip.ParseAddr(cfg.OtherGateway)
	for _, err := range []error{err1, err2, err3, err4, err5} {
		if err != nil {
			return Plan{}, fmt.Errorf("addresses: %w", err)
		}
	}
	vlan, err := New(subnet, gw, guest.Addr())
	if err != nil {
		return Plan{}, err
	}
	o, err := New(other, otherGW, Node(other, MaxNodes).Addr())
	if err != nil {
		return Plan{}, err
	}
	// Validate runs this check in every binary that links this package;
	// running it here too, no binary builds a plan that breaks it.
	if err := Check(config.AddressFlags{Subnet: subnet, Gateway: gw, Guest: guest, OtherSubnet: other, OtherGateway: otherGW}); err != nil {
		return Plan{}, err
	}
	return Plan{VLAN: vlan, Other: o}, nil
}

// Check reports the address flags that break the plan: a first guest
// (--guest-address) the plan keeps for something else, a guests' range
// without room for every tenant's block, a subnet too small for the plan.
// The addresses must lie in their subnets (Validate checks that first).
func Check(f config.AddressFlags) error {
	var errs []error
	if !f.Subnet.Contains(f.Gateway) || !f.Subnet.Contains(f.Guest.Addr()) || !f.OtherSubnet.Contains(f.OtherGateway) {
		return fmt.Errorf("addresses: %s and %s must lie in %s, %s in %s", f.Gateway, f.Guest.Addr(), f.Subnet, f.OtherGateway, f.OtherSubnet)
	}
	need := Tenants * BlockSize
	// The most guests --subnet holds: from its first host address up.
	best := &Pool{subnet: f.Subnet, first: host(f.Subnet, 1), reserved: reserved(f.Subnet, f.Gateway)}
	if n := best.room(need); n < need {
		errs = append(errs, fmt.Errorf("--subnet %s: too small: it holds %d guests besides the gateway, %d node addresses and the host-local control's pool of %d, and the suite's %d tenants need %d (%d each); want /%d or larger",
			f.Subnet, n, MaxNodes, ControlPoolSize, Tenants, need, BlockSize, bitsFor(2+1+MaxNodes+need+ControlPoolSize)))
	} else if role := reservedRole(f.Subnet, f.Gateway, f.Guest.Addr()); role != "" {
		errs = append(errs, fmt.Errorf("--guest-address %s: %s", f.Guest, role))
	} else if n := (&Pool{subnet: f.Subnet, first: f.Guest.Addr(), reserved: best.reserved}).room(need); n < need {
		poolStart, _ := ControlPool(f.Subnet)
		errs = append(errs, fmt.Errorf("--guest-address %s: leaves room for %d guests counting up from it to the host-local control's pool at %s; the suite's %d tenants need %d (%d each)",
			f.Guest, n, poolStart, Tenants, need, BlockSize))
	}
	// The second VLAN's guests start after its nodes' addresses.
	if first := Node(f.OtherSubnet, MaxNodes).Addr(); !f.OtherSubnet.Contains(first) {
		errs = append(errs, fmt.Errorf("--other-subnet %s: too small: its guests would start at %s, after the gateway's and %d nodes' addresses, outside it; want /%d or larger",
			f.OtherSubnet, first, MaxNodes, bitsFor(2+MaxNodes+2)))
	}
	return errors.Join(errs...)
}

// reserved is the set of subnet's addresses Guest skips: the gateway's and
// the nodes'.
func reserved(subnet netip.Prefix, gateway netip.Addr) map[netip.Addr]bool {
	r := map[netip.Addr]bool{gateway: true}
	for i := range MaxNodes {
		r[Node(subnet, i).Addr()] = true
	}
	return r
}

// reservedRole says what the plan keeps a for, as the rest of a sentence
// about a, or "" if a guest may hold it. subnet must hold the control pool.
func reservedRole(subnet netip.Prefix, gateway, a netip.Addr) string {
	poolFirst, poolLast := ControlPool(subnet)
	switch {
	case a == subnet.Masked().Addr():
		return "is the subnet's network address"
	case a == broadcast(subnet):
		return "is the subnet's broadcast address"
	case a == gateway:
		return "is the gateway's address (--gateway)"
	case !a.Less(poolFirst) && !poolLast.Less(a):
		return fmt.Sprintf("is in the host-local control's pool %s-%s", poolFirst, poolLast)
	}
	for i := range MaxNodes {
		if a == Node(subnet, i).Addr() {
			return fmt.Sprintf("is node %d's address (the plan keeps %s-%s for the nodes' bridge and macvlan addresses)",
				i, Node(subnet, 0).Addr(), Node(subnet, MaxNodes-1).Addr())
		}
	}
	return ""
}

// bitsFor is the longest prefix length of an IPv4 subnet of at least n
// addresses.
func bitsFor(n int) int {
	bits := 32
	for bits > 0 && 1<<(32-bits) < n {
		bits--
	}
	return bits
}

// Guest is the n-th address of a tenant's block, with the subnet's prefix
// length.
func (p *Pool) Guest(block, n int) (netip.Prefix, error) {
	if n < 0 || n >= BlockSize {
		return netip.Prefix{}, fmt.Errorf("addresses: a tenant has %d guest addresses, asked for the %d-th", BlockSize, n+1)
	}
	k := 0
	for a := range p.guests() {
		if k == block*BlockSize+n {
			return netip.PrefixFrom(a, p.subnet.Bits()), nil
		}
		k++
	}
	poolStart, _ := ControlPool(p.subnet)
	return netip.Prefix{}, fmt.Errorf("addresses: %s has no guest address left for tenant %d's %d-th guest (guests from %s up to the control pool at %s)",
		p.subnet, block, n+1, p.first, poolStart)
}

// guests are the pool's guest addresses in the order Guest hands them out:
// from the first up to the control pool, the reserved skipped.
func (p *Pool) guests() iter.Seq[netip.Addr] {
	return func(yield func(netip.Addr) bool) {
		poolStart, _ := ControlPool(p.subnet)
		for a := p.first; a.IsValid() && a.Less(poolStart); a = a.Next() {
			if !p.reserved[a] && !yield(a) {
				return
			}
		}
	}
}

// room is how many guests the pool holds, counted up to max: a big subnet
// holds millions.
func (p *Pool) room(max int) int {
	n := 0
	for range p.guests() {
		if n == max {
			break
		}
		n++
	}
	return n
}

// host is the subnet's n-th address (0 is the network's own).
func host(subnet netip.Prefix, n int) netip.Addr {
	a := subnet.Masked().Addr()
	for range n {
		a = a.Next()
	}
	return a
}

func broadcast(subnet netip.Prefix) netip.Addr {
	b := subnet.Masked().Addr().As4()
	for i := subnet.Bits(); i < 32; i++ {
		b[i/8] |= 1 << (7 - i%8)
	}
	return netip.AddrFrom4(b)
}
