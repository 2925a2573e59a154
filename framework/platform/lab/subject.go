package lab

import (
	"cmp"
	"net/netip"

	"github.com/cozystack/vlan-conformance/framework/addresses"
	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/platform"
)

// subject is what the lab builds for a run: the guide's setup, or the
// deliberately broken variant a negative control names, read from the
// control's value (controls.Control: each break one of its fields, zero
// for the guide's). The gateway's timers, the guests' userData and what
// happens as a guest comes up are read where the lab starts them (lab.go,
// guest.go); a NAD, userData or MAC break is one the cluster applies too.
type subject struct {
	bridgeWiring  fabric.Wiring
	macvlanWiring fabric.Wiring
	mtu           int
	nadConfig     func(string) string
	keepPlugins   bool // WithoutPlugin does nothing

	// ARP and MAC (ARP-01..06).
	// vmMAC is the MAC the attachment is asked for, given the VM's spec
	// and whether a MAC is held by a running VM ("" = the plugin's random one).
	vmMAC func(spec platform.VMSpec, inUse func(mac string) bool) string
	// silentGuest: the guest's gratuitous ARP never leaves it.
	silentGuest bool
	// probeCannotLeave: the guest's ARP probes fail to send (NIC down).
	probeCannotLeave bool
	// ignoresPings: the guest answers no echo request.
	ignoresPings bool
}

// hostLocalDataDir holds the leases of the host-local control; the lab
// removes it on close and a later run sweeps it after a kill.
const hostLocalDataDir = "/run/vcf-host-local"

func subjectFor(cfg *config.Config) subject {
	ctl := cfg.SelectedControl()
	s := subject{
		bridgeWiring:  ctl.BridgeWiring,
		macvlanWiring: cmp.Or(ctl.MacvlanWiring, fabric.MacvlanParent),
		mtu:           cmp.Or(ctl.MTU, 1500),
		nadConfig:     ctl.BrokenNAD,
		keepPlugins:   ctl.KeepPlugins,
		vmMAC: func(spec platform.VMSpec, inUse func(string) bool) string {
			return ctl.VMMAC(spec.Namespace, spec.Name, spec.MAC, inUse)
		},
		silentGuest:      ctl.SilentGuest,
		probeCannotLeave: ctl.ProbeCannotLeave,
		ignoresPings:     ctl.GuestIgnoresPings,
	}
	if ctl.HostLocalIPAM {
		s.nadConfig = addresses.WithHostLocalIPAM(netip.MustParsePrefix(cfg.Subnet), hostLocalDataDir)
	}
	return s
}
