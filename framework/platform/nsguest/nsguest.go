// Package nsguest is a guest the suite reaches through its network
// namespace: what the lab's VM stand-ins and the cluster tier's pod
// workloads have in common. What is observed and sent inside it goes
// through netlink or a socket opened in that namespace
// (framework/guestnet), never through a shell in it.
package nsguest

import (
	"github.com/vishvananda/netlink"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/platform"
)

// Netns implements the in-namespace half of platform.Guest.
type Netns struct {
	Path   string          // path of the guest's network namespace
	Handle *netlink.Handle // netlink handle into it
	NIC    string          // the VLAN NIC's name in it
	Label  string          // how evidence names the guest ("guest vm-a")
}

func (g *Netns) VLANInterface() string { return g.NIC }

func (g *Netns) VLANPoint() evidence.Point {
	return evidence.Point{Netns: g.Path, Iface: g.NIC, Label: g.Label + " " + g.NIC}
}

func (g *Netns) In() platform.Inside { return platform.Inside{Netns: g.Path, Handle: g.Handle} }
