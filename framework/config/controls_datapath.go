package config

// Datapath controls (CLAIMS.md, VLAN-). Each names the broken subject the
// lab platform builds instead of the guide's.
const (
	CtlNoSubinterface     = "VLAN-01/no-vlan-subinterface"
	CtlWrongVLAN          = "VLAN-01/wrong-vlan-id"
	CtlUntagged           = "VLAN-02/untagged-wiring"
	CtlMacvlanPassthru    = "VLAN-03/macvlan-passthru"
	CtlNADBridgeCorrected = "VLAN-14/nad-bridge-corrected"
	CtlConsumerOnTrunk    = "VLAN-13/consumer-on-trunk-uplink"
	CtlHostMacvlanShim    = "VLAN-04/host-address-on-macvlan-sibling"
	CtlServiceOnShim      = "VLAN-04/service-on-macvlan-sibling"
	CtlAddrOnSubinterface = "VLAN-05/address-on-uplink.100"
	CtlServiceOnSub       = "VLAN-05/service-on-uplink.100"
	CtlHostLocalIPAM      = "VLAN-06/host-local-ipam"
	CtlDefaultRouteOnVLAN = "VLAN-07/default-route-on-vlan-nic"
	CtlBothVLANsOneBridge = "VLAN-08/both-vlans-one-bridge"
	CtlProbeCannotLeave   = "VLAN-08/probe-cannot-leave"
	CtlNodeHasBridge      = "VLAN-09/node-has-bridge"
	CtlJumboPath          = "VLAN-10/jumbo-physical-path"
	CtlSpoofchkDropped    = "VLAN-12/macspoofchk-dropped"
)

func init() {
	register(
		Control{ID: CtlNoSubinterface, Claim: "VLAN-01", Description: "br100 enslaves no VLAN sub-interface (uplink.100 absent)", Expect: "must reach the gateway"},
		Control{ID: CtlWrongVLAN, Claim: "VLAN-01", Description: "the node's sub-interface carries VLAN 101, the gateway VLAN 100", Expect: "must reach the gateway"},
		Control{ID: CtlUntagged, Claim: "VLAN-02", Description: "br100 enslaves the untagged uplink itself", Expect: "may cross the trunk untagged"},
		Control{ID: CtlNADBridgeCorrected, Claim: "VLAN-14", Description: "the subject puts every bridge-type attachment on step 1's br100, whatever bridge its NAD names", Expect: "the bridge plugin must have made a new bridge"},
		Control{ID: CtlConsumerOnTrunk, Claim: "VLAN-13", Description: "the consumer's macvlan child hangs off the trunk uplink, not uplink.100: nothing holds the sub-interface step 1 enslaves", Expect: "must refuse to enslave"},
		Control{ID: CtlMacvlanPassthru, Claim: "VLAN-03", Description: "macvlan in passthru mode: the child receives every frame, so replies to the guest MAC arrive", Expect: "no reply may reach the guest"},
		Control{ID: CtlHostMacvlanShim, Claim: "VLAN-04", Description: "the node's address sits on a macvlan sibling (mode bridge) of the pod's child instead of the parent: the host does reach the child", Expect: "no ARP frame of the host"},
		Control{ID: CtlServiceOnShim, Claim: "VLAN-04", Description: "the node's address, and its TCP service, sit on a macvlan sibling (mode bridge) of the pod's child: the child connects", Expect: "must not open a connection"},
		Control{ID: CtlAddrOnSubinterface, Claim: "VLAN-05", Description: "the node's address sits on the enslaved uplink.100 instead of br100", Expect: "must reach the guest"},
		Control{ID: CtlServiceOnSub, Claim: "VLAN-05", Description: "the node's address, and its TCP service, sit on the enslaved uplink.100 instead of br100", Expect: "must connect to the service"},
		Control{ID: CtlHostLocalIPAM, Claim: "VLAN-06", Description: "the NAD carries host-local IPAM instead of ipam: {}", Expect: "must carry no IP"},
		Control{ID: CtlDefaultRouteOnVLAN, Claim: "VLAN-07", Description: "cloud-init also puts a default route on the VLAN NIC", Expect: "the default route must stay on the pod NIC"},
		Control{ID: CtlBothVLANsOneBridge, Claim: "VLAN-08", Description: "br100 enslaves both uplink.100 and uplink.200", Expect: "must go unanswered"},
		Control{ID: CtlProbeCannotLeave, Claim: "VLAN-08", Description: "the guest's ARP probe never leaves it (its VLAN NIC is down while it runs): silence proves nothing", Expect: "must be seen leaving"},
		Control{ID: CtlNodeHasBridge, Claim: "VLAN-09", Description: "the node lacking bridge has it after all", Expect: "must fail naming the missing plugin"},
		Control{ID: CtlSpoofchkDropped, Claim: "VLAN-12", Description: "the NAD reaches the bridge plugin without macspoofchk (a renderer that drops the key): a frame from another MAC crosses the node", Expect: "macspoofchk must drop every frame"},
		Control{ID: CtlJumboPath, Claim: "VLAN-10", Description: "the physical VLAN carries 9000-byte frames, so the path is not smaller", Expect: "must be dropped on a path smaller"},
	)
}
