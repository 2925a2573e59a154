// Package addresses is the one place the suite's addresses on a VLAN come
// from. Everything is arithmetic on the flags, so the same flags give the
// same addresses. A subnet (--subnet; --other-subnet alike) is laid out as:
//
//	the gateway   --gateway (.1 by default); never handed out
//	nodes         the 2nd host address and up, one each: Node(i) (.2, .3, ...)
//	guests        from --guest-address up (.10 by default), in blocks of
//	              BlockSize, one block per tenant; the gateway's and the
//	              nodes' addresses are skipped
//	control pool  the last ControlPoolSize host addresses: the range a
//	              negative control hands out by host-local IPAM
//
// A guest never gets the gateway's, a node's or the control pool's address,
// and no two guests of a run share one.
package addresses

import (
	"fmt"
	"net/netip"

	"github.com/cozystack/vlan-conformance/framework/config"
)

const (
	// MaxNodes addresses after the gateway's are kept for nodes.
	MaxNodes = 8
	// BlockSize is how many guests one tenant may start.
	BlockSize = 8
	// ControlPoolSize is the size of the control pool at the subnet's top.
	ControlPoolSize = 21
)

// Node is the i-th node's address on the VLAN: the subnet's (2+i)-th host.
func Node(subnet netip.Prefix, i int) netip.Prefix {
	return netip.PrefixFrom(host(subnet, 2+i), subnet.Bits())
}

// ControlPool is the range a control's host-local IPAM hands out.
func ControlPool(subnet netip.Prefix) (first, last netip.Addr) {
	last = broadcast(subnet).Prev()
	first = last
	for range ControlPoolSize - 1 {
		first = first.Prev()
	}
	return first, last
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
	p := &Pool{subnet: subnet, first: first, reserved: map[netip.Addr]bool{gateway: true}}
	for i := range MaxNodes {
		p.reserved[Node(subnet, i).Addr()] = true
	}
	return p, nil
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
	return Plan{VLAN: vlan, Other: o}, err
}

// Guest is the n-th address of a tenant's block, with the subnet's prefix
// length.
func (p *Pool) Guest(block, n int) (netip.Prefix, error) {
	if n < 0 || n >= BlockSize {
		return netip.Prefix{}, fmt.Errorf("addresses: a tenant has %d guest addresses, asked for the %d-th", BlockSize, n+1)
	}
	poolStart, _ := ControlPool(p.subnet)
	a, k := p.first, 0
	for ; a.IsValid() && a.Less(poolStart); a = a.Next() {
		if p.reserved[a] {
			continue
		}
		if k == block*BlockSize+n {
			return netip.PrefixFrom(a, p.subnet.Bits()), nil
		}
		k++
	}
	return netip.Prefix{}, fmt.Errorf("addresses: %s has no guest address left for tenant %d's %d-th guest (guests from %s up to the control pool at %s)",
		p.subnet, block, n+1, p.first, poolStart)
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
