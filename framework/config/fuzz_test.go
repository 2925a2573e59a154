package config_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/cozystack/vlan-conformance/framework/addresses"
)

// FuzzValidate: whatever address flags Validate accepts, the run can build
// its plan, and every guest address the plan hands out (the first being
// --guest-address, in cloud-init) lies in the subnet and is none of the
// addresses the plan keeps: the subnet's network and broadcast addresses,
// the gateway's, the nodes', the host-local control's pool. The kept set is
// built here from the plan's parts, not from its check.
//
// The flags are fuzzed as numbers and formatted as a user types them: a
// subnet (address, prefix length), the gateway and guest as offsets into
// their subnet, the guest's own prefix length. Random strings seldom parse
// as a CIDR, so the fuzzer would hardly reach what Validate accepts;
// malformed flags have their own tests.
func FuzzValidate(f *testing.F) {
	type flags struct {
		vlan, otherVLAN int
		subnet          uint32
		bits            uint8
		gateway, guest  uint32 // offsets into the subnet
		guestBits       uint8  // 0: the subnet's
		otherSubnet     uint32
		otherBits       uint8
		otherGateway    uint32
	}
	v4 := func(a, b, c, d uint32) uint32 { return a<<24 | b<<16 | c<<8 | d }
	def := flags{100, 200, v4(203, 0, 113, 0), 24, 1, 10, 0, v4(198, 51, 100, 0), 24, 1}
	seeds := []flags{def}
	with := func(change func(*flags)) {
		s := def
		change(&s)
		seeds = append(seeds, s)
	}
	// The known bad first guests: the gateway's, the network and broadcast
	// addresses, the nodes', the control pool's, too near the pool, another
	// prefix length.
	for _, guest := range []uint32{1, 0, 255, 2, 4, 9, 234, 254, 200, 170, 171} {
		with(func(s *flags) { s.guest = guest })
	}
	with(func(s *flags) { s.guestBits = 16 })
	with(func(s *flags) { s.gateway = 254 })
	with(func(s *flags) { s.gateway = 12 })
	with(func(s *flags) { s.gateway, s.guest = 180, 170 })
	with(func(s *flags) { s.gateway, s.guest = 254, 1 })
	with(func(s *flags) { s.bits = 26 })
	with(func(s *flags) { s.bits, s.gateway, s.guest = 25, 126, 1 })
	with(func(s *flags) { s.bits, s.gateway, s.guest = 30, 2, 1 })
	with(func(s *flags) { s.subnet, s.bits, s.guest = 0, 0, 10 })
	with(func(s *flags) { s.subnet, s.bits, s.guest = v4(255, 255, 255, 0), 24, 10 })
	with(func(s *flags) { s.otherBits = 29 })
	with(func(s *flags) { s.otherSubnet, s.otherBits = 0, 28 })
	with(func(s *flags) { s.otherSubnet = def.subnet })
	with(func(s *flags) { s.otherVLAN = s.vlan })
	with(func(s *flags) { s.vlan = 4095 })
	for _, s := range seeds {
		f.Add(s.vlan, s.otherVLAN, s.subnet, s.bits, s.gateway, s.guest, s.guestBits, s.otherSubnet, s.otherBits, s.otherGateway)
	}
	f.Fuzz(func(t *testing.T, vlan, otherVLAN int, subnetAddr uint32, bits uint8, gatewayOff, guestOff uint32, guestBits uint8, otherAddr uint32, otherBits uint8, otherGatewayOff uint32) {
		c := newConfig(t)
		c.StagerManifest = "" // its check reads a file, and is no part of the plan
		c.VLAN, c.OtherVLAN = vlan, otherVLAN
		// A prefix length past 32 is kept: it must be rejected.
		bits, otherBits = bits%36, otherBits%36
		if guestBits == 0 {
			guestBits = bits
		}
		c.Subnet = fmt.Sprintf("%s/%d", in(subnetAddr, bits, 0), bits)
		c.Gateway = in(subnetAddr, bits, gatewayOff).String()
		c.GuestAddr = fmt.Sprintf("%s/%d", in(subnetAddr, bits, guestOff), guestBits%36)
		c.OtherSubnet = fmt.Sprintf("%s/%d", in(otherAddr, otherBits, 0), otherBits)
		c.OtherGateway = in(otherAddr, otherBits, otherGatewayOff).String()
		if c.Validate() != nil {
			return
		}
		plan, err := addresses.ForConfig(c)
		if err != nil {
			t.Fatalf("%s %s %s %s %s: validated, but no plan: %v", c.Subnet, c.Gateway, c.GuestAddr, c.OtherSubnet, c.OtherGateway, err)
		}
		check := func(name string, pool *addresses.Pool, subnet netip.Prefix, gateway netip.Addr, promised int, first netip.Prefix) {
			kept := keptAddresses(subnet, gateway)
			seen := map[netip.Addr]bool{}
			for b := range addresses.Tenants + 1 {
				for n := range addresses.BlockSize {
					g, err := pool.Guest(b, n)
					if err != nil {
						if b < promised {
							t.Fatalf("%s %s: tenant %d's guest %d: %v", name, subnet, b, n, err)
						}
						return // past the promised blocks, running out is fine
					}
					if b == 0 && n == 0 && first.IsValid() && g != first {
						t.Fatalf("%s %s: first guest %s, not --guest-address %s", name, subnet, g, first)
					}
					a := g.Addr()
					if !subnet.Contains(a) || g.Bits() != subnet.Bits() {
						t.Fatalf("%s %s: guest %s outside it", name, subnet, g)
					}
					if role, ok := kept[a]; ok {
						t.Fatalf("%s %s: guest %s is %s", name, subnet, g, role)
					}
					if seen[a] {
						t.Fatalf("%s %s: guest %s handed out twice", name, subnet, g)
					}
					seen[a] = true
				}
			}
		}
		check("--subnet", plan.VLAN, netip.MustParsePrefix(c.Subnet), netip.MustParseAddr(c.Gateway), addresses.Tenants, netip.MustParsePrefix(c.GuestAddr))
		// The second VLAN promises no blocks; what it hands out must be free.
		check("--other-subnet", plan.Other, netip.MustParsePrefix(c.OtherSubnet), netip.MustParseAddr(c.OtherGateway), 0, netip.Prefix{})
	})
}

// in is the address off into the subnet of addr and bits (bits past 32
// leave addr as it is).
func in(addr uint32, bits uint8, off uint32) netip.Addr {
	if bits <= 32 {
		mask := uint32(0)
		if bits > 0 {
			mask = ^uint32(0) << (32 - bits)
		}
		addr = addr&mask | off&^mask
	}
	return netip.AddrFrom4([4]byte{byte(addr >> 24), byte(addr >> 16), byte(addr >> 8), byte(addr)})
}

// keptAddresses are the addresses of subnet no guest may hold, each with its
// role, from the plan's parts.
func keptAddresses(subnet netip.Prefix, gateway netip.Addr) map[netip.Addr]string {
	network := subnet.Masked().Addr()
	b := network.As4()
	for i := subnet.Bits(); i < 32; i++ {
		b[i/8] |= 1 << (7 - i%8)
	}
	kept := map[netip.Addr]string{network: "the network address", netip.AddrFrom4(b): "the broadcast address", gateway: "the gateway's"}
	for i := range addresses.MaxNodes {
		kept[addresses.Node(subnet, i).Addr()] = "a node's"
	}
	_, last := addresses.ControlPool(subnet)
	for a, k := last, 0; k < addresses.ControlPoolSize && a.IsValid(); a, k = a.Prev(), k+1 {
		kept[a] = "in the control pool"
	}
	return kept
}
