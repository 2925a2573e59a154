// Package controls is the registry of negative controls: every way the
// suite breaks its subject on purpose, each one Control value naming its
// claim, what it breaks and the failure its claim's spec must then report.
// A platform reads the selected control's fields where it builds the real
// subject (the zero Control is the guide's); framework/config validates
// --control against the registry.
package controls

import (
	"fmt"
	"slices"

	"github.com/cozystack/vlan-conformance/framework/cozystack"
	"github.com/cozystack/vlan-conformance/framework/fabric"
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
	// Alongside are claims whose specs run with the claim's own, so that
	// the control breaks the path a whole run takes: ARP-04 ends the
	// outage of ARP-02's re-creation at the standby router when ARP-02
	// runs before it, and re-creates the VM itself when it runs alone.
	Alongside []string
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
	// fabric.GuideBridge, the guide's step 1. The cluster's cabling
	// wires its bridge nodes (the kind workers) by it too; on an
	// access-mode trunk only NoSubinterface has a meaning there.
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
	// PinnedMAC is what becomes of a MAC a VM's spec pins: the lab's
	// attachment and the cluster's VirtualMachine both apply it (a
	// cluster has no running-VM lookup, so PinMadeUnique is the lab's
	// only). Zero: PinKept, the attachment is asked for it.
	PinnedMAC PinnedMAC
	// GatewayTimers maps the neighbour timers the gateway declares to what
	// it really runs: a slower gateway than the profile says. Nil: what
	// it declares.
	GatewayTimers func(declared map[string]string) map[string]string
	// GatewayIgnoresPings: the lab's gateway answers no echo request
	// (net.ipv4.icmp_echo_ignore_all in its netns), the hop the guest's
	// failed ping must name (framework/hops).
	GatewayIgnoresPings bool
	// GuestIgnoresPings: the lab's guests answer no echo request (the
	// same sysctl in each guest's netns), the hop the gateway's failed
	// ping must name.
	GuestIgnoresPings bool
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

// All lists every negative control, in ID order.
func All() []Control { return slices.Clone(registry) }

// On lists the controls whose subject is built on tier.
func On(tier string) []Control {
	var out []Control
	for _, c := range registry {
		if c.OnTier(tier) {
			out = append(out, c)
		}
	}
	return out
}

// IDs lists the IDs accepted by --control.
func IDs() []string {
	var ids []string
	for _, c := range registry {
		ids = append(ids, c.ID)
	}
	return ids
}

// ByID is the control with that ID.
func ByID(id string) (Control, bool) {
	i := slices.IndexFunc(registry, func(c Control) bool { return c.ID == id })
	if i < 0 {
		return Control{}, false
	}
	return registry[i], true
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
