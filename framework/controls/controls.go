package controls

import (
	"crypto/sha256"
	"encoding/json"
	"maps"
	"net"
	"slices"
	"strconv"

	"github.com/cozystack/vlan-conformance/framework/cloudinit"
	"github.com/cozystack/vlan-conformance/framework/cozystack"
	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/failures"
	"github.com/cozystack/vlan-conformance/framework/stager"
)

// registry is every negative control, in ID order (the order `conformance
// controls` prints and selftest runs). Adding one is one value here; its
// Expect is a framework/failures value its claim's spec asserts with, and
// what it breaks is a field of Control a platform reads (control.go).
var registry = []Control{
	// ARP and MAC (CLAIMS.md ARP-): a gateway, a guest or a MAC allocator
	// that behaves otherwise than the claim says.
	{ID: "ARP-01/mac-derived-from-vm-name", Claim: "ARP-01", Description: "an unpinned VM's MAC is derived from its name, so re-creation keeps it", OnVMs: true, UnpinnedMAC: nameMAC, Expect: failures.FreshMAC},
	{ID: "ARP-02/guest-announces-at-boot", Claim: "ARP-02", Description: "the guest sends a gratuitous ARP as its address comes up, so the gateway learns the new MAC at once", OnVMs: true, GuestUp: GuestAnnounces, Expect: failures.GatewayHoldsOldMAC},
	{ID: "ARP-03/gateway-probes-during-boot", Claim: "ARP-03", Description: "the gateway resolves the guest's address while the re-created VM boots, so it holds the new MAC before any recovery can be timed", OnVMs: true, GuestUp: GatewayResolves, Expect: failures.RecoveryMeasuresNothing},
	{ID: "ARP-03/gateway-runs-longer-timers", Claim: "ARP-03", Description: "the gateway runs base_reachable_time_ms=180000, far longer than the declared profile", OnVMs: true, GatewayTimers: longTimers, Expect: failures.RecoversWithin},
	{ID: "ARP-04/guest-never-announces", Claim: "ARP-04", Description: "the guest's gratuitous ARP never leaves it", SilentGuest: true, Expect: failures.EntryFlipsToNewMAC},
	{ID: "ARP-04/guest-never-announces-to-standby", Claim: "ARP-04", Alongside: []string{"ARP-02"}, Description: "the guest's gratuitous ARP never leaves it, the outage ARP-04 would end ARP-02's at the standby router", SilentGuest: true, Expect: failures.EntryFlipsToNewMAC},
	{ID: "ARP-05/pinned-mac-ignored", Claim: "ARP-05", Description: "the pinned MAC (VMSpec.MAC) is not passed to the attachment: a fresh one every time", OnVMs: true, PinnedMAC: PinIgnored, Expect: failures.PinnedMACSurvives},
	{ID: "ARP-06/pinned-macs-made-unique", Claim: "ARP-06", Description: "a pinned MAC already held by a running VM is replaced by a fresh one, as KubeMacPool would", PinnedMAC: PinMadeUnique, Expect: failures.CollisionFlaps},
	{ID: "ARP-07/mac-kept-per-vm-object", Claim: "ARP-07", Tier: "cluster", OnVMs: true, Description: "every unpinned VM gets a MAC derived from its namespace and name, as a MAC pool keeping one per VirtualMachine would: restarts keep it", UnpinnedMAC: nameMAC, Expect: failures.RestartFreshMAC},
	{ID: "ARP-08/drain-evicts", Claim: "ARP-08", Tier: "cluster", OnVMs: true, Description: "KubeVirt runs evictionStrategy: None, as a release whose KubeVirt CR drops LiveMigrate would: a drain evicts the launcher pod and the VM with it", EvictionStrategy: "None", Expect: failures.DrainMigrates},

	// The node's provisioning (CLAIMS.md NODE-): step 1 done wrongly.
	{ID: "NODE-01/address-on-uplink.100", Claim: "NODE-01", Description: "the node's address sits on the enslaved uplink.100 instead of br100", BridgeWiring: fabric.AddrOnSubinterface, Expect: failures.SubinterfaceCarriesNoAddress},
	{ID: "NODE-02/default-route-via-br100", Claim: "NODE-02", Description: "the node's default route goes via the VLAN's gateway on br100, as a netplan with gateway4 on br100 has it", BridgeWiring: fabric.DefaultViaBridge, Expect: failures.DefaultRouteOffBridge},
	{ID: "NODE-03/uplink-smaller-than-nad", Claim: "NODE-03", Description: "the physical VLAN (uplink, uplink.100, hence br100) carries 1400 bytes under the guide's NAD, whose pods get the kernel's 1500", MTU: 1400, Expect: failures.MTUsNeverGrow},

	// Staging (CLAIMS.md STG-): mutants of the reference subject in
	// fixtures/stager/mutants, each breaking one promise of the guide's
	// "Staging the reference CNI plugins", some judged by every claim they
	// break; a script that copies all the image offers (as Cozystack's
	// does), right only with an image that carries the 14 alone.
	{ID: "STG-01/mutant-writes-loopback", Claim: "STG-01", Description: "install-cni-plugins stages loopback too: more than the 14", ExtraArgs: stagerMutant("writes-loopback.yaml"), ImagePlugins: imageWith(stager.LeftAlone...), Expect: failures.NothingButTheFourteen},
	{ID: "STG-02/copy-all-image-with-loopback", Claim: "STG-02", Description: "the image carries loopback next to the 14 and the script copies all it finds", ExtraArgs: copyAllManifest, ImagePlugins: imageWith("loopback"), Expect: failures.ImageCarried + " loopback"},
	{ID: "STG-02/copy-all-release-image", Claim: "STG-02", Description: "the image carries all 18 plugins of the release and the script copies all it finds", ExtraArgs: copyAllManifest, ImagePlugins: imageWith(stager.LeftAlone...), Expect: failures.ImageCarried},
	// "loopback: " is how the layouts' STG-02 spec names the plugin it found written.
	{ID: "STG-02/mutant-writes-loopback", Claim: "STG-02", Description: "install-cni-plugins stages loopback too", ExtraArgs: stagerMutant("writes-loopback.yaml"), ImagePlugins: imageWith(stager.LeftAlone...), Expect: "loopback: " + failures.ImageCarried + " loopback"},
	{ID: "STG-03/mutant-copies-in-place", Claim: "STG-03", Description: "install-cni-plugins copies over the destination in place instead of renaming", ExtraArgs: stagerMutant("copies-in-place.yaml"), Expect: failures.UnlinkedOldInode},
	{ID: "STG-03/mutant-installs-only-missing", Claim: "STG-03", Description: "install-cni-plugins installs only plugins the node lacks", ExtraArgs: stagerMutant("installs-only-missing.yaml"), Expect: failures.OnTheSecondRun},
	{ID: "STG-04/mutant-installs-only-missing", Claim: "STG-04", Description: "install-cni-plugins installs only plugins the node lacks: Talos' four are not rewritten, older copies stay", ExtraArgs: stagerMutant("installs-only-missing.yaml"), Expect: failures.SameNameRewritten},
	{ID: "STG-05/mutant-nests-in-directory", Claim: "STG-05", Description: "install-cni-plugins moves the plugin into a directory at the destination", ExtraArgs: stagerMutant("nests-in-directory.yaml"), Expect: failures.DirectoryGained},
	{ID: "STG-05/mutant-publishes-temp-directory", Claim: "STG-05", Description: "install-cni-plugins copies into a directory an earlier run left at its temporary path and publishes it as the plugin", ExtraArgs: stagerMutant("publishes-temp-directory.yaml"), Expect: failures.NothingAppears},
	{ID: "STG-05/mutant-removes-old-copy", Claim: "STG-05", Description: "install-cni-plugins removes the node's file when it fails to write a plugin", ExtraArgs: stagerMutant("removes-old-copy.yaml"), Expect: failures.NodeCopyStays},
	{ID: "STG-06/mutant-exits-nonzero", Claim: "STG-06", Description: "install-cni-plugins exits 1 when a plugin failed", ExtraArgs: stagerMutant("exits-nonzero.yaml"), Expect: failures.PodShowsReady},
	{ID: "STG-06/mutant-gathers-causes", Claim: "STG-06", Description: "install-cni-plugins prints every cause next to the summary instead of as each plugin is attempted", ExtraArgs: stagerMutant("gathers-causes.yaml"), Expect: failures.CausesGathered},
	// The spec quotes the summary's prefix with %q.
	{ID: "STG-06/mutant-no-summary", Claim: "STG-06", Description: "install-cni-plugins prints no `failed to install:` summary", ExtraArgs: stagerMutant("no-summary.yaml"), Expect: failures.NoLineBegins + " " + strconv.Quote(stager.SummaryPrefix)},
	{ID: "STG-07/mutant-no-payload-guard", Claim: "STG-07", Description: "install-cni-plugins does not check for /cni-plugins before staging", ExtraArgs: stagerMutant("no-payload-guard.yaml"), Expect: failures.ExactSkipLine},
	{ID: "STG-08/mutant-leaves-temp", Claim: "STG-08", Description: "install-cni-plugins leaves its temporary file behind on failure", ExtraArgs: stagerMutant("leaves-temp.yaml"), Expect: failures.NoTemporaryFile},
	{ID: "STG-08/mutant-strands-killed-temp", Claim: "STG-08", Description: "install-cni-plugins uses a fresh temporary name each run and never clears what a killed run left", ExtraArgs: stagerMutant("strands-killed-temp.yaml"), Expect: failures.KilledRunLeftover},
	{ID: "STG-09/staging-kept-on", Claim: "STG-09", Tier: "cluster", Description: "the Multus chart keeps the stager's init container with stageCniPlugins: false", StagerKeptWhenOff: true, Expect: failures.NoStagerInitContainer},
	{ID: "STG-10/helper-resolves-typo-to-false", Claim: "STG-10", NeedsRelease: true, Description: "the platform chart's cozystack.platform.stageCniPlugins helper resolves a typo to false instead of failing", BreakRelease: (*cozystack.Release).BreakTypoToFalse, Expect: failures.RenderStops},
	// The assertion's message carries the platform's error: "init container install-cni-plugins exited 1".
	{ID: "STG-11/stager-fails-its-container", Claim: "STG-11", Tier: "cluster", Description: "the stager's init container exits 1 whenever its script wrote a termination message: a plugin it cannot write keeps the Multus pod from Ready", StagerFailsContainer: true, Expect: failures.MultusPodReady},
	{ID: "STG-12/multus-rolls-every-node-at-once", Claim: "STG-12", Tier: "cluster", Description: "the Multus DaemonSet rolls with maxUnavailable 100%, as a chart that sets it would render it: every node's daemon may be down at once", MultusMaxUnavailable: "100%", Expect: failures.OneNodeAtATime},

	// The datapath (CLAIMS.md VLAN-): the broken subject the platform
	// builds instead of the guide's.
	// These show that a failed ping names the hop its frames stopped at
	// (framework/hops), either way: the gateway or the guest, which no
	// reply leaves; the trunk, which carries the wrong tag, so nothing
	// reaches the gateway (wrong-vlan-id).
	{ID: "VLAN-01/gateway-ignores-pings", Claim: "VLAN-01", Description: "the gateway answers no echo request (net.ipv4.icmp_echo_ignore_all=1 in its netns)", GatewayIgnoresPings: true, Expect: "reached the gateway; " + failures.NoReplyLeft},
	{ID: "VLAN-01/guest-ignores-pings", Claim: "VLAN-01", Description: "the guest answers no echo request (net.ipv4.icmp_echo_ignore_all=1 in its netns)", GuestIgnoresPings: true, Expect: "reached the guest's NIC; " + failures.NoReplyLeft},
	{ID: "VLAN-01/no-vlan-subinterface", Claim: "VLAN-01", Description: "br100 enslaves no VLAN sub-interface (uplink.100 absent)", OnVMs: true, BridgeWiring: fabric.NoSubinterface, Expect: failures.ReachesGateway},
	{ID: "VLAN-01/wrong-vlan-id", Claim: "VLAN-01", Description: "the node's sub-interface carries VLAN 101, the gateway VLAN 100", BridgeWiring: fabric.WrongVLAN, Expect: "the trunk tagged 101, not tagged 100; " + failures.NothingReached + " the gateway"},
	{ID: "VLAN-02/untagged-wiring", Claim: "VLAN-02", Description: "br100 enslaves the untagged uplink itself", BridgeWiring: fabric.UntaggedUplink, Expect: failures.CrossesUntagged},
	{ID: "VLAN-03/macvlan-passthru", Claim: "VLAN-03", Description: "macvlan in passthru mode: the child receives every frame, so replies to the guest MAC arrive", OnVMs: true, NAD: SetNADKey("macvlan", "mode", "passthru"), Expect: failures.NoReplyReachesGuest},
	{ID: "VLAN-04/host-address-on-macvlan-sibling", Claim: "VLAN-04", Description: "the node's address sits on a macvlan sibling (mode bridge) of the pod's child instead of the parent: the host does reach the child", MacvlanWiring: fabric.MacvlanShim, Expect: failures.NoHostARPAtChild},
	{ID: "VLAN-04/service-on-macvlan-sibling", Claim: "VLAN-04", Description: "the node's address, and its TCP service, sit on a macvlan sibling (mode bridge) of the pod's child: the child connects", MacvlanWiring: fabric.MacvlanShim, Expect: failures.NoConnectionToParent},
	{ID: "VLAN-05/address-on-uplink.100", Claim: "VLAN-05", Description: "the node's address sits on the enslaved uplink.100 instead of br100", BridgeWiring: fabric.AddrOnSubinterface, Expect: failures.NotTheNodeAddress},
	{ID: "VLAN-05/service-on-uplink.100", Claim: "VLAN-05", Description: "the node's address, and its TCP service, sit on the enslaved uplink.100 instead of br100", BridgeWiring: fabric.AddrOnSubinterface, Expect: failures.ConnectsToService},
	{ID: "VLAN-06/host-local-ipam", Claim: "VLAN-06", Description: "the NAD carries host-local IPAM instead of ipam: {}", OnVMs: true, HostLocalIPAM: true, Expect: failures.CarriesNoIP},
	{ID: "VLAN-07/default-route-on-vlan-nic", Claim: "VLAN-07", Description: "cloud-init also puts a default route on the VLAN NIC", OnVMs: true, UserData: cloudinit.AddDefaultRoute, Expect: failures.DefaultRouteOnPodNIC},
	{ID: "VLAN-08/both-vlans-one-bridge", Claim: "VLAN-08", Description: "br100 enslaves both uplink.100 and uplink.200", BridgeWiring: fabric.BothVLANs, Expect: failures.GoesUnanswered},
	{ID: "VLAN-08/probe-cannot-leave", Claim: "VLAN-08", Description: "the guest's ARP probe never leaves it (its VLAN NIC is down while it runs): silence proves nothing", ProbeCannotLeave: true, Expect: failures.SeenLeaving},
	{ID: "VLAN-09/node-has-bridge", Claim: "VLAN-09", Description: "the node lacking bridge has it after all", KeepPlugins: true, Expect: failures.NamesMissingPlugin},
	{ID: "VLAN-10/jumbo-physical-path", Claim: "VLAN-10", Description: "the physical VLAN carries 9000-byte frames, so the path is not smaller", MTU: 9000, Expect: failures.DroppedOnSmallerPath},
	{ID: "VLAN-11/nad-copied-into-vm-namespace", Claim: "VLAN-11", Tier: "cluster", Description: "every NAD the run applies is also copied into the VM's own namespace, as a NAD replicator would: the VM there gets its VLAN NIC", NADCopiedIntoVMNamespace: true, Expect: failures.ReportsNADMissing},
	{ID: "VLAN-12/macspoofchk-dropped", Claim: "VLAN-12", Description: "the NAD reaches the bridge plugin without macspoofchk (a renderer that drops the key): a frame from another MAC crosses the node", OnVMs: true, NAD: dropKey("bridge", "macspoofchk"), Expect: failures.SpoofchkDrops},
	{ID: "VLAN-13/consumer-on-trunk-uplink", Claim: "VLAN-13", Description: "the consumer's macvlan child hangs off the trunk uplink, not uplink.100: nothing holds the sub-interface step 1 enslaves", NAD: SetNADKey("macvlan", "master", fabric.UplinkName), Expect: failures.RefusesToEnslave},
	{ID: "VLAN-14/nad-bridge-corrected", Claim: "VLAN-14", Description: "the subject puts every bridge-type attachment on step 1's br100, whatever bridge its NAD names", OnVMs: true, NAD: SetNADKey("bridge", "bridge", fabric.BridgeName), Expect: failures.NewBridgeMade},
	// VLAN-15 is proven on a staged directory.
	{ID: "VLAN-15/image-without-macvlan", Claim: "VLAN-15", Native: true, Description: "the image's /cni-plugins lacks macvlan (a Dockerfile that extracts the other 13): staging cannot mend the NAD", ImagePlugins: imageWithout("macvlan"), Expect: failures.AttachesAfterStaging},
}

// LongBaseReachableMS is what the gateway really runs under
// ARP-03/gateway-runs-longer-timers, whatever profile the fixture
// declares: REACHABLE alone then lasts at least 90 s, beyond the bound of
// either profile (8.5 s tuned, 60 s default) even after a slow
// re-creation.
const LongBaseReachableMS = 180000

// longTimers is the gateway of ARP-03/gateway-runs-longer-timers.
func longTimers(declared map[string]string) map[string]string {
	out := maps.Clone(declared)
	out["base_reachable_time_ms"] = strconv.Itoa(LongBaseReachableMS)
	return out
}

// nameMAC is a locally administered unicast MAC derived from a VM's
// namespace and name: the same VM, the same MAC, however often it boots.
func nameMAC(namespace, name string) string {
	h := sha256.Sum256([]byte(namespace + "/" + name))
	return net.HardwareAddr{0x02, h[0], h[1], h[2], h[3], h[4]}.String()
}

// SetNADKey sets a top-level key of NAD configs of one plugin type.
func SetNADKey(pluginType, key string, value any) func(string) string {
	return editNAD(pluginType, func(m map[string]any) { m[key] = value })
}

// dropKey removes a top-level key of NAD configs of one plugin type.
func dropKey(pluginType, key string) func(string) string {
	return editNAD(pluginType, func(m map[string]any) { delete(m, key) })
}

// editNAD applies edit to NAD configs of one plugin type, leaving others.
func editNAD(pluginType string, edit func(map[string]any)) func(string) string {
	return func(conf string) string {
		m := map[string]any{}
		if json.Unmarshal([]byte(conf), &m) != nil || m["type"] != pluginType {
			return conf
		}
		edit(m)
		b, _ := json.Marshal(m)
		return string(b)
	}
}

func stagerMutant(file string) []string {
	return []string{"--stager-manifest=fixtures/stager/mutants/" + file}
}

var copyAllManifest = []string{"--stager-manifest=fixtures/stager/copy-all-daemonset.yaml"}

// imageWith: the image carries more (a mutant could not write a plugin the
// image does not offer).
func imageWith(more ...string) func([]string) []string {
	return func(carried []string) []string { return append(slices.Clone(carried), more...) }
}

func imageWithout(name string) func([]string) []string {
	return func(carried []string) []string {
		return slices.DeleteFunc(slices.Clone(carried), func(p string) bool { return p == name })
	}
}
