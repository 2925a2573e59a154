package config

// ARP and MAC controls (CLAIMS.md, ARP-). Each names the broken subject the
// lab builds instead of the guide's: a gateway, a guest or a MAC allocator
// that behaves otherwise than the claim says.
const (
	CtlARPNameDerivedMAC = "ARP-01/mac-derived-from-vm-name"
	CtlARPAnnounceAtBoot = "ARP-02/guest-announces-at-boot"
	CtlARPLongTimers     = "ARP-03/gateway-runs-longer-timers"
	CtlARPGatewayProbes  = "ARP-03/gateway-probes-during-boot"
	CtlARPSilentGuest    = "ARP-04/guest-never-announces"
	CtlARPPinIgnored     = "ARP-05/pinned-mac-ignored"
	CtlARPUniqueMACs     = "ARP-06/pinned-macs-made-unique"
)

// LongBaseReachableMS is what the gateway really runs under
// CtlARPLongTimers, whatever profile the fixture declares: REACHABLE alone
// then lasts at least 90 s, beyond the bound of either profile (8.5 s tuned,
// 60 s default) even after a slow re-creation.
const LongBaseReachableMS = 180000

func init() {
	register(
		Control{ID: CtlARPNameDerivedMAC, Claim: "ARP-01", Description: "an unpinned VM's MAC is derived from its name, so re-creation keeps it", Expect: "must give its VLAN NIC a fresh MAC"},
		Control{ID: CtlARPAnnounceAtBoot, Claim: "ARP-02", Description: "the guest sends a gratuitous ARP as its address comes up, so the gateway learns the new MAC at once", Expect: "must still hold the old MAC"},
		Control{ID: CtlARPLongTimers, Claim: "ARP-03", Description: "the gateway runs base_reachable_time_ms=180000, far longer than the declared profile", Expect: "must recover by itself within"},
		Control{ID: CtlARPGatewayProbes, Claim: "ARP-03", Description: "the gateway resolves the guest's address while the re-created VM boots, so it holds the new MAC before any recovery can be timed", Expect: "the recovery that follows measures nothing"},
		Control{ID: CtlARPSilentGuest, Claim: "ARP-04", Description: "the guest's gratuitous ARP never leaves it", Expect: "must flip to the new MAC"},
		Control{ID: CtlARPPinIgnored, Claim: "ARP-05", Description: "the pinned MAC (VMSpec.MAC) is not passed to the attachment: a fresh one every time", Expect: "the pinned MAC must survive re-creation"},
		Control{ID: CtlARPUniqueMACs, Claim: "ARP-06", Description: "a pinned MAC already held by a running VM is replaced by a fresh one, as KubeMacPool would", Expect: "a MAC collision must show as"},
	)
}
