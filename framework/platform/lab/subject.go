package lab

import (
	"net/netip"

	"github.com/cozystack/vlan-conformance/framework/addresses"
	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/platform"
)

// subject is what the lab builds for a run: the guide's setup, or the
// deliberately broken variant a negative control names. This is the only
// place controls turn into topology changes; a NAD, userData or MAC
// break is the control's own value (config.Control.NAD, UserData,
// UnpinnedMAC), which the cluster applies too.
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
}

// hostLocalDataDir holds the leases of the host-local control; the lab
// removes it on close and a later run sweeps it after a kill.
const hostLocalDataDir = "/run/vcf-host-local"

func subjectFor(cfg *config.Config) subject {
	s := subject{
		bridgeWiring: fabric.GuideBridge, macvlanWiring: fabric.MacvlanParent, mtu: 1500,
		nadConfig: cfg.ControlNAD,
		// A pinned MAC, or the control's for an unpinned VM (ARP-01's).
		vmMAC: func(spec platform.VMSpec, _ func(string) bool) string {
			return cfg.ControlMAC(spec.Namespace, spec.Name, spec.MAC)
		},
	}
	switch cfg.Control {
	case config.CtlNoSubinterface:
		s.bridgeWiring = fabric.NoSubinterface
	case config.CtlWrongVLAN:
		s.bridgeWiring = fabric.WrongVLAN
	case config.CtlUntagged:
		s.bridgeWiring = fabric.UntaggedUplink
	case config.CtlAddrOnSubinterface, config.CtlServiceOnSub:
		s.bridgeWiring = fabric.AddrOnSubinterface
	case config.CtlBothVLANsOneBridge:
		s.bridgeWiring = fabric.BothVLANs
	case config.CtlProbeCannotLeave:
		s.probeCannotLeave = true
	case config.CtlHostMacvlanShim, config.CtlServiceOnShim:
		s.macvlanWiring = fabric.MacvlanShim
	case config.CtlJumboPath:
		s.mtu = 9000
	case config.CtlNodeHasBridge:
		s.keepPlugins = true
	case config.CtlARPSilentGuest:
		s.silentGuest = true
	case config.CtlARPPinIgnored:
		s.vmMAC = func(platform.VMSpec, func(string) bool) string { return "" }
	case config.CtlARPUniqueMACs:
		s.vmMAC = func(spec platform.VMSpec, inUse func(string) bool) string {
			if spec.MAC != "" && inUse(spec.MAC) {
				return ""
			}
			return spec.MAC
		}
	}
	if cfg.ControlHostLocalIPAM() {
		s.nadConfig = addresses.WithHostLocalIPAM(netip.MustParsePrefix(cfg.Subnet), hostLocalDataDir)
	}
	return s
}
