package config

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
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

// Control is a negative control: the same specs run against a deliberately
// broken subject, where the named claim's spec must FAIL. Everything it
// breaks is a field of its value, read by the platform where it builds the
// real subject: the zero value of every field is the guide's, so a
// platform never asks which control runs, only what it breaks.
type Control struct {
	ID          string   // e.g. "VLAN-01/no-vlan-subinterface"; passed as --control
	Claim       string   // the claim whose spec must fail, e.g. "VLAN-01"
	Description string   // what is broken, in one line
	ExtraArgs   []string // more flags the control needs (e.g. a mutant manifest)
	// Expect is the failure the control must cause in its claim's own It: a
	// value of framework/failures, the one that spec's assertion message is
	// built from, so the two cannot drift. A failure for another reason is
	// not caught.
	Expect string
	// Tier is where the broken subject is built: "" for the lab, "cluster"
	// for a kind cluster the suite makes (the cluster-only claims).
	Tier string
	// OnVMs: the control breaks KubeVirt VMs (--workload=vm). A lab
	// control with it is also a cluster control when the cluster runs VMs:
	// its break (NAD) is one the cluster's platform applies as the lab's
	// does, and its spec then fails on a VM under KubeVirt's bridge
	// binding, not on the lab's replica of it. A cluster control with it
	// runs on VMs only: its claim is about the VirtualMachine object
	// (ARP-07's restarts), which a pod lane does not have.
	OnVMs bool
	// NeedsRelease: the broken subject is made from the release under test
	// (--cozystack); without one there is nothing to break.
	NeedsRelease bool
	// Native: the claim's spec runs where the stager's do, outside the lab
	// VM (a VLAN claim proven on a staged directory, VLAN-15).
	Native bool

	// The lab's nodes (framework/platform/lab, where it provisions the
	// guide's step 1).

	// BridgeWiring is how a bridge node's uplink meets br100. Zero:
	// fabric.GuideBridge, the guide's step 1.
	BridgeWiring fabric.Wiring
	// MacvlanWiring is where the macvlan node's own address sits. Zero:
	// fabric.MacvlanParent, on uplink.100 itself, as the guide has it.
	MacvlanWiring fabric.Wiring
	// MTU is the physical VLAN's MTU. Zero: 1500.
	MTU int
	// KeepPlugins: a node a spec takes a CNI plugin from keeps it
	// (Node.WithoutPlugin does nothing).
	KeepPlugins bool

	// The NADs and the guests' userData: both platforms apply these.

	// NAD is the config the CNI plugin gets instead of conf, for every NAD
	// the run applies: what a renderer that drops or rewrites a key hands
	// it. Nil: the NADs are the guide's.
	NAD func(conf string) string
	// HostLocalIPAM: every bridge NAD the run applies carries host-local
	// IPAM over the address plan's control pool instead of ipam: {}, as a
	// renderer that fills it in would (addresses.HostLocalIPAM; the lab
	// keeps its leases in its own directory, a kind node in host-local's
	// default).
	HostLocalIPAM bool
	// UserData is the cloud-init userData a guest gets instead of the
	// guide's, given the gateway's address: what a template that adds a
	// key hands the guest. The lab's guests apply its netplan, a VM's
	// Debian cloud-init the whole of it. Nil: the guide's.
	UserData func(userData, gateway string) (string, error)

	// The guests, the gateway and the MAC allocator (ARP-).

	// UnpinnedMAC is the MAC a VM whose spec pins none is given, from its
	// namespace and name, instead of a fresh one: a MAC allocator that
	// keeps one per name. The lab's attachment and the cluster's
	// VirtualMachine (as KubeMacPool's webhook would) both apply it. Nil:
	// a fresh one.
	UnpinnedMAC func(namespace, name string) string
	// PinnedMAC is what becomes of a MAC a VM's spec pins (the lab's
	// attachment). Zero: PinKept, the attachment is asked for it.
	PinnedMAC PinnedMAC
	// GatewayTimers maps the neighbour timers the gateway declares to what
	// it really runs: a slower gateway than the profile says. Nil: what
	// it declares.
	GatewayTimers func(declared map[string]string) map[string]string
	// GuestUp is what happens on the VLAN as a guest's address comes up:
	// Quiet (the zero value) is the guide's.
	GuestUp GuestUp
	// SilentGuest: the guest's gratuitous ARP never leaves it (the lab's
	// guests).
	SilentGuest bool
	// ProbeCannotLeave: the guest's ARP probe never leaves it, its VLAN
	// NIC down while the probe runs (the lab's guests).
	ProbeCannotLeave bool
	// EvictionStrategy is the KubeVirt CR's
	// spec.configuration.evictionStrategy under the control, whatever the
	// release's CR says: what a drain does to a VM. "": the CR's own.
	EvictionStrategy string

	// The stager and Multus (STG-): a cluster's DaemonSet, the stager's
	// image, the release's charts.

	// ImagePlugins, when set, is what the stager image carries at
	// /cni-plugins under the control, given what it carries otherwise.
	ImagePlugins func(carried []string) []string
	// StagerKeptWhenOff: the cluster's Multus DaemonSet keeps the
	// stager's init container with stageCniPlugins: false, as a chart
	// whose template ignores the value would render it (the release's
	// render is made from a copy so edited, the reference one keeps the
	// container grafted on).
	StagerKeptWhenOff bool
	// StagerFailsContainer: the cluster's stager init container exits 1
	// whenever its script wrote a termination message, on either render.
	StagerFailsContainer bool
	// MultusMaxUnavailable is the Multus DaemonSet's
	// updateStrategy.rollingUpdate.maxUnavailable as a chart that sets one
	// would render it, on either render (the release's or the suite's
	// reference). "": as rendered, which leaves RollingUpdate's default
	// of one node at a time.
	MultusMaxUnavailable string
	// BreakRelease edits a copy of the release under test (--cozystack)
	// into what the specs that render its charts themselves
	// (suites/release) take instead of it. Nil: the release as it is.
	BreakRelease func(*cozystack.Release) error

	// The cluster's workloads.

	// NADCopiedIntoVMNamespace: every NAD the run applied is also applied
	// in the namespace of a VM that names it, as a NAD replicator would.
	NADCopiedIntoVMNamespace bool
}

// GuestUp is what happens on the VLAN as a guest's address comes up, on
// either platform. The guide's guest is quiet, and the gateway resolves it
// only when it has traffic for it: that is what leaves a stale entry after
// a re-creation (ARP-02) and a recovery to time (ARP-03).
type GuestUp int

const (
	// Quiet: nothing happens as the address comes up.
	Quiet GuestUp = iota
	// GuestAnnounces: the guest sends a gratuitous ARP for its address.
	GuestAnnounces
	// GatewayResolves: the gateway resolves the guest's address until it
	// holds the guest's MAC.
	GatewayResolves
)

// PinnedMAC is what becomes of a MAC a VM's spec pins.
type PinnedMAC int

const (
	// PinKept: the attachment is asked for the pinned MAC (the guide's).
	PinKept PinnedMAC = iota
	// PinIgnored: the pinned MAC is not passed on; the VM gets a fresh
	// one every time.
	PinIgnored
	// PinMadeUnique: a pinned MAC a running VM holds is replaced by a
	// fresh one, as KubeMacPool would.
	PinMadeUnique
)

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

// controls are every negative control, in ID order (the order `conformance
// controls` prints and selftest runs). Adding one is one value here; its
// Expect is a framework/failures value its claim's spec asserts with.
var controls = []Control{
	// ARP and MAC (CLAIMS.md ARP-): a gateway, a guest or a MAC allocator
	// that behaves otherwise than the claim says.
	{ID: "ARP-01/mac-derived-from-vm-name", Claim: "ARP-01", Description: "an unpinned VM's MAC is derived from its name, so re-creation keeps it", UnpinnedMAC: nameMAC, Expect: failures.FreshMAC},
	{ID: "ARP-02/guest-announces-at-boot", Claim: "ARP-02", Description: "the guest sends a gratuitous ARP as its address comes up, so the gateway learns the new MAC at once", OnVMs: true, GuestUp: GuestAnnounces, Expect: failures.GatewayHoldsOldMAC},
	{ID: "ARP-03/gateway-probes-during-boot", Claim: "ARP-03", Description: "the gateway resolves the guest's address while the re-created VM boots, so it holds the new MAC before any recovery can be timed", OnVMs: true, GuestUp: GatewayResolves, Expect: failures.RecoveryMeasuresNothing},
	{ID: "ARP-03/gateway-runs-longer-timers", Claim: "ARP-03", Description: "the gateway runs base_reachable_time_ms=180000, far longer than the declared profile", OnVMs: true, GatewayTimers: longTimers, Expect: failures.RecoversWithin},
	{ID: "ARP-04/guest-never-announces", Claim: "ARP-04", Description: "the guest's gratuitous ARP never leaves it", SilentGuest: true, Expect: failures.EntryFlipsToNewMAC},
	{ID: "ARP-05/pinned-mac-ignored", Claim: "ARP-05", Description: "the pinned MAC (VMSpec.MAC) is not passed to the attachment: a fresh one every time", PinnedMAC: PinIgnored, Expect: failures.PinnedMACSurvives},
	{ID: "ARP-06/pinned-macs-made-unique", Claim: "ARP-06", Description: "a pinned MAC already held by a running VM is replaced by a fresh one, as KubeMacPool would", PinnedMAC: PinMadeUnique, Expect: failures.CollisionFlaps},
	{ID: "ARP-07/mac-kept-per-vm-object", Claim: "ARP-07", Tier: "cluster", OnVMs: true, Description: "every unpinned VM gets a MAC derived from its namespace and name, as a MAC pool keeping one per VirtualMachine would: restarts keep it", UnpinnedMAC: nameMAC, Expect: failures.RestartFreshMAC},
	{ID: "ARP-08/drain-evicts", Claim: "ARP-08", Tier: "cluster", OnVMs: true, Description: "KubeVirt runs evictionStrategy: None, as a release whose KubeVirt CR drops LiveMigrate would: a drain evicts the launcher pod and the VM with it", EvictionStrategy: "None", Expect: failures.DrainMigrates},

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
	{ID: "VLAN-01/no-vlan-subinterface", Claim: "VLAN-01", Description: "br100 enslaves no VLAN sub-interface (uplink.100 absent)", BridgeWiring: fabric.NoSubinterface, Expect: failures.ReachesGateway},
	{ID: "VLAN-01/wrong-vlan-id", Claim: "VLAN-01", Description: "the node's sub-interface carries VLAN 101, the gateway VLAN 100", BridgeWiring: fabric.WrongVLAN, Expect: failures.ReachesGateway},
	{ID: "VLAN-02/untagged-wiring", Claim: "VLAN-02", Description: "br100 enslaves the untagged uplink itself", BridgeWiring: fabric.UntaggedUplink, Expect: failures.CrossesUntagged},
	{ID: "VLAN-03/macvlan-passthru", Claim: "VLAN-03", Description: "macvlan in passthru mode: the child receives every frame, so replies to the guest MAC arrive", OnVMs: true, NAD: SetNADKey("macvlan", "mode", "passthru"), Expect: failures.NoReplyReachesGuest},
	{ID: "VLAN-04/host-address-on-macvlan-sibling", Claim: "VLAN-04", Description: "the node's address sits on a macvlan sibling (mode bridge) of the pod's child instead of the parent: the host does reach the child", MacvlanWiring: fabric.MacvlanShim, Expect: failures.NoHostARPAtChild},
	{ID: "VLAN-04/service-on-macvlan-sibling", Claim: "VLAN-04", Description: "the node's address, and its TCP service, sit on a macvlan sibling (mode bridge) of the pod's child: the child connects", MacvlanWiring: fabric.MacvlanShim, Expect: failures.NoConnectionToParent},
	{ID: "VLAN-05/address-on-uplink.100", Claim: "VLAN-05", Description: "the node's address sits on the enslaved uplink.100 instead of br100", BridgeWiring: fabric.AddrOnSubinterface, Expect: failures.ReachesGuest},
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

// nameMAC is a locally administered unicast MAC derived from a VM's
// namespace and name: the same VM, the same MAC, however often it boots.
func nameMAC(namespace, name string) string {
	h := sha256.Sum256([]byte(namespace + "/" + name))
	return net.HardwareAddr{0x02, h[0], h[1], h[2], h[3], h[4]}.String()
}

// setKey sets a top-level key of NAD configs of one plugin type.
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

// OnTier reports whether the control's subject is built on tier.
func (c Control) OnTier(tier string) bool {
	return c.TierName() == tier || c.OnVMs && tier == "cluster"
}

// WantsVMs reports whether the control cannot run on that tier and
// workload: a control that breaks VMs on a cluster (OnVMs), the lab's or
// the cluster's own, changes nothing on a cluster that runs pods.
func (c Control) WantsVMs(tier, workload string) bool {
	return c.OnVMs && tier == "cluster" && workload != "vm"
}

// TierName is the tier the control's subject is built on: lab or cluster.
func (c Control) TierName() string {
	if c.Tier == "" {
		return "lab"
	}
	return c.Tier
}

// Controls lists every negative control, in ID order.
func Controls() []Control { return slices.Clone(controls) }

// ControlsOn lists the controls whose subject is built on tier.
func ControlsOn(tier string) []Control {
	var out []Control
	for _, c := range controls {
		if c.OnTier(tier) {
			out = append(out, c)
		}
	}
	return out
}

// ControlIDs lists the IDs accepted by --control.
func ControlIDs() []string {
	var ids []string
	for _, c := range controls {
		ids = append(ids, c.ID)
	}
	return ids
}

func controlByID(id string) (Control, bool) {
	i := slices.IndexFunc(controls, func(c Control) bool { return c.ID == id })
	if i < 0 {
		return Control{}, false
	}
	return controls[i], true
}

func knownControl(id string) bool { _, ok := controlByID(id); return ok }

// SelectedControl is the control --control names: the zero Control, the
// guide's subject with nothing broken, without one.
func (c *Config) SelectedControl() Control {
	ctl, _ := controlByID(c.Control)
	return ctl
}

// BrokenNAD is conf as the control breaks it (NAD), or conf itself.
func (c Control) BrokenNAD(conf string) string {
	if c.NAD == nil {
		return conf
	}
	return c.NAD(conf)
}

// BrokenUserData is userData as the control changes it (UserData), given
// the gateway's address, or userData itself.
func (c Control) BrokenUserData(userData, gateway string) (string, error) {
	if c.UserData == nil {
		return userData, nil
	}
	out, err := c.UserData(userData, gateway)
	if err != nil {
		return "", fmt.Errorf("control %s: %w", c.ID, err)
	}
	return out, nil
}

// VMMAC is the MAC a VM's VLAN NIC is asked for, "" for a fresh one: the
// one its spec pins, as PinnedMAC treats it (inUse tells whether a running
// VM holds a MAC; nil: none does), else the one UnpinnedMAC gives it.
func (c Control) VMMAC(namespace, name, pinned string, inUse func(mac string) bool) string {
	switch {
	case pinned == "":
	case c.PinnedMAC == PinIgnored:
		pinned = ""
	case c.PinnedMAC == PinMadeUnique && inUse != nil && inUse(pinned):
		pinned = ""
	default:
		return pinned
	}
	if c.UnpinnedMAC != nil {
		return c.UnpinnedMAC(namespace, name)
	}
	return ""
}

// Timers maps the gateway's declared neighbour timers to what it runs
// under the control (GatewayTimers): the same timers without one.
func (c Control) Timers(declared map[string]string) map[string]string {
	if c.GatewayTimers == nil {
		return declared
	}
	return c.GatewayTimers(declared)
}

// StagerImagePlugins are the plugins the stager image carries under the
// control (ImagePlugins), given those it carries otherwise (nil: the 14).
func (c Control) StagerImagePlugins(carried []string) []string {
	if c.ImagePlugins == nil {
		return carried
	}
	if carried == nil {
		carried = stager.StagedPlugins
	}
	return c.ImagePlugins(carried)
}

// StagerImagePlugins are the plugins the image the suite builds carries:
// with --cozystack the names the release's Dockerfile extracts, else nil
// (the 14); what the run's control makes of them where it needs another
// image.
func (c *Config) StagerImagePlugins() []string {
	var carried []string
	if s := c.Subject(); s != nil {
		carried = s.Image.Plugins
	}
	return c.SelectedControl().StagerImagePlugins(carried)
}
