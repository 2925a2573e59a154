// Package platform is what specs see: a few interfaces named after what they
// model (a platform with nodes and a gateway, guests on a VLAN, capture
// points). The lab tier (platform/lab) implements them with network
// namespaces and the real CNI plugins; the cluster tier with kind, Multus and
// KubeVirt. Specs never learn which one they run on. What a ping, an ARP
// probe or a TCP dial reports is framework/probe's; a neighbour or FDB read
// is framework/evidence's: the interfaces name those types where they live.
package platform

import (
	"context"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/probe"
	"github.com/cozystack/vlan-conformance/framework/stager"
)

// Platform is one place the specs run: its nodes, the upstream gateway, and
// the VMs it starts.
type Platform interface {
	Name() string
	Config() *config.Config
	// Nodes by role: the guide's bridge nodes (br100 over uplink.100), and a
	// node provisioned the way macvlan users do (address on uplink.100).
	BridgeNodes() []Node
	MacvlanNode() Node
	Gateway() Gateway
	// Trunk is where the node's VLAN traffic leaves it, tagged (the veth
	// trunk in the lab, the real uplink in vendor mode).
	Trunk(n Node) evidence.Point
	// ApplyNAD creates a NetworkAttachmentDefinition in a namespace.
	ApplyNAD(ctx context.Context, namespace string, nad NAD) error
	// StartVM starts a VM as the vm-instance chart renders it and waits until
	// its guest has applied its cloud-init.
	StartVM(ctx context.Context, spec VMSpec) (Guest, error)
	DeleteVM(ctx context.Context, g Guest) error
	// Dump writes the state of every namespace/node the platform made (links,
	// addresses, routes, neighbours, FDB) into dir, for failed specs.
	Dump(ctx context.Context, dir string) error
	// Close removes everything the platform created.
	Close(ctx context.Context) error
}

// Node is a Kubernetes node: a netns in the lab, a kind node container or a
// real machine in a cluster. What the suite observes and does in its
// network namespace (ping, a TCP service, br100's FDB, its bridges, step 1
// redone) is framework/nodenet's, over Step1.
type Node interface {
	Name() string
	// CNIBinDir is the node's /opt/cni/bin as the CNI runtime sees it.
	CNIBinDir() string
	// Address is the node's own address on the VLAN (br100 per the guide, or
	// the parent interface on a macvlan node).
	Address() netip.Prefix
	// ParentPoint is the VLAN sub-interface (uplink.100) on the node.
	ParentPoint() evidence.Point
	// WithoutPlugin removes a plugin from the node's CNIBinDir until restore.
	WithoutPlugin(ctx context.Context, plugin string) (restore func() error, err error)
	// Step1 is the node's network namespace as the guide's step 1 cabled
	// it: the suite's way into the node. nil where the suite cannot enter
	// it (an existing cluster's node).
	Step1() *fabric.NodeNetns
}

// Gateway is the upstream router on the VLAN.
type Gateway interface {
	Address() netip.Addr
	Ping(ctx context.Context, dst netip.Addr, opts ...probe.PingOption) (probe.PingResult, error)
	Neighbor(ctx context.Context, ip netip.Addr) (evidence.Neighbor, error)
	// VLANPoint is the gateway's interface on the guests' VLAN (ARP-04
	// times a gratuitous ARP from its arrival there).
	VLANPoint() evidence.Point
	// OtherVLANPoint is the gateway's interface on the second VLAN.
	OtherVLANPoint() evidence.Point
	OtherVLANAddress() netip.Addr
	// NeighTimers reports the gateway's neighbour-table timers.
	NeighTimers(ctx context.Context) (evidence.NeighTimers, error)
	// NeighProfile is the timer profile the fixture declares for the
	// gateway (what the suite set); NeighTimers is what it reports running.
	NeighProfile(ctx context.Context) (evidence.NeighProfile, error)
	// StartPing pings dst every interval until the stream is stopped,
	// recording each echo request (ARP-03..05).
	StartPing(ctx context.Context, dst netip.Addr, interval time.Duration) (probe.PingStream, error)
}

// Standby is a gateway with a standby router beside it on the VLAN, as a
// redundant pair (VRRP) has: the suite's own gateway, the lab's and a kind
// cluster's. Its neighbour table is its own, so one re-creation leaves a
// stale entry in each, and a spec may time the gateway's recovery (ARP-03)
// while the standby, kept quiet, still holds the old MAC for another
// (ARP-04). A vendor's gateway has none.
type Standby interface {
	// Standby is the standby router, nil when there is none.
	Standby() Gateway
}

// StandbyOf is gw's standby router, nil when it has none.
func StandbyOf(gw Gateway) Gateway {
	if s, ok := gw.(Standby); ok {
		return s.Standby()
	}
	return nil
}

// Own returns the guest a platform made, when g wraps it (a spec's
// framework value embeds the platform's guest and adds its address): the
// platform's own methods type-assert their guests, and a wrapper must not
// read as a different kind of workload.
func Own(g Guest) Guest {
	if w, ok := g.(interface{ Unwrap() Guest }); ok {
		return Own(w.Unwrap())
	}
	return g
}

// Guest is a running VM: what it is, where its VLAN frames can be
// captured, and the suite's way into it. What the suite observes and sends
// from inside (links, addresses, routes, neighbours, ping, TCP, ARP) is
// framework/guestnet's, over In: a claim that needs another observation
// adds a helper there, not a method to every kind of guest.
type Guest interface {
	Name() string
	Node() Node
	// MAC of the VLAN NIC as the platform reports it (the VMI status in a
	// cluster).
	MAC() net.HardwareAddr
	// VLANInterface is the guest's name for its VLAN NIC, found by MAC.
	VLANInterface() string
	// VLANPoint is the guest's VLAN NIC as a capture point.
	VLANPoint() evidence.Point
	// Attachment is what the CNI plugin handed to the pod for this VLAN.
	Attachment() Attachment
	Spec() VMSpec
	// In is the suite's way into the guest.
	In() Inside
}

// Inside is a way into a guest: a network namespace the suite enters
// (Netns, with a netlink Handle into it: the lab's VM stand-ins, pod
// workloads), or a Shell in the guest's own OS (a VM's serial console).
type Inside struct {
	Netns  string
	Handle *netlink.Handle
	Shell  Shell
}

// Shell runs a command in a guest's OS and returns its output and exit
// code; err is a command that could not be run or did not end in time.
type Shell interface {
	Run(ctx context.Context, cmd string, timeout time.Duration) (out string, code int, err error)
}

// Attachment records the pod side of a secondary network right after CNI ADD.
type Attachment struct {
	NAD          string
	PodInterface string
	CNIResultIPs []netip.Prefix // IPs in the CNI result
	PodIPv4      []netip.Prefix // IPv4 addresses the pod interface carried
	MTU          int
	// Err is what kept the two observations above from being made (no
	// network-status annotation, no such pod interface): empty lists then
	// prove nothing, and a spec judging them fails with it.
	Err error
}

// NAD is a NetworkAttachmentDefinition.
type NAD struct {
	Name   string
	Config string // spec.config JSON, verbatim
}

// VMSpec is the subset of vm-instance values the suite varies.
type VMSpec struct {
	Name      string
	Namespace string
	Node      Node
	Networks  []string // NAD names, as in vm-instance's networks: [{name: ...}]
	CloudInit string   // userData
	MAC       string   // pinned MAC of the VLAN NIC ("" = generated)
	// AlsoOn are more nodes the VM may run on: placed on Node if it can
	// be, free to live-migrate to these (ARP-08). None: pinned to Node.
	AlsoOn []Node
	// Binding is how the attachment meets the workload: "" is KubeVirt's
	// bridge binding (a VM); NoBinding makes the attachment's interface the
	// workload's own NIC, as in a plain pod (VLAN-04's macvlan child).
	Binding string
}

// NoBinding: the CNI interface is the workload's NIC, no VM behind it.
const NoBinding = "none"

// Route is one entry of the guest's routing table.
type Route struct {
	Dst   netip.Prefix // 0.0.0.0/0 for the default route
	Gw    netip.Addr
	Iface string
	Scope string // "link" for connected, "universe" otherwise
}

// As finds an optional capability of the run's platform, e.g.
// As[KubeVMs](p): specs check a capability and skip without it, never the
// tier's name.
func As[T any](p Platform) (T, bool) {
	t, ok := p.(T)
	return t, ok
}

// KubeVMs is a platform whose VMs are Kubernetes objects (the cluster
// tier): their events and status come from the API server.
type KubeVMs interface {
	// VMEvents lists the events about a VM of spec: its VirtualMachine,
	// VirtualMachineInstance and launcher pods, oldest first.
	VMEvents(ctx context.Context, namespace, vmName string) ([]Event, error)
	// VMStatus reads the VM's instance as the API server holds it now.
	VMStatus(ctx context.Context, g Guest) (VMStatus, error)
	// StartVMNoWait creates the VM's objects and returns without waiting
	// for it to become ready (for claims about a VM that must not start).
	StartVMNoWait(ctx context.Context, spec VMSpec) error
	// VMIInterfaces lists the network names the VM's instance reports in
	// its status.interfaces (none when there is no instance yet).
	VMIInterfaces(ctx context.Context, namespace, vmName string) ([]string, error)
	// VMIConditions lists the VM instance's status conditions that are
	// False, as reports (Object the VMI, Reason and Message the
	// condition's): KubeVirt v1.8 reports a launcher pod it cannot render,
	// e.g. for a missing NAD, as Synchronized=False, not as an event. None
	// for a pod workload.
	VMIConditions(ctx context.Context, namespace, vmName string) ([]Event, error)
	// RestartVM restarts the VM the way how names, its VirtualMachine
	// kept: it waits for the new instance and returns its guest, logged in
	// as StartVM's is; the guest it replaces is closed. A restart that
	// fails leaves the VM the spec's to delete, with the guest it passed.
	// evidence.ErrNotObservable for a pod workload.
	RestartVM(ctx context.Context, g Guest, how Restart) (Guest, error)
	// DrainVM evicts the VM's launcher pod as `kubectl drain` does (the
	// Eviction API) and follows what KubeVirt makes of it: under
	// evictionStrategy LiveMigrate its webhook refuses the eviction and
	// migrates the VM, and DrainVM waits for that migration to end and
	// returns the guest on its new node, its console dialled again. An
	// eviction KubeVirt lets through (the launcher pod goes, and the VM
	// with it) is a Drain with Evicted set and no guest, not an error; a
	// migration that fails is an error quoting KubeVirt's reason, with
	// what it reported. evidence.ErrNotObservable for a pod workload.
	DrainVM(ctx context.Context, g Guest) (Guest, Drain, error)
}

// Drain is what KubeVirt made of the eviction of a VM's launcher pod.
type Drain struct {
	Pod string // the launcher pod evicted (namespace/name)
	// Evicted: the eviction went through; no migration followed.
	Evicted bool
	// Refusal is the API server's answer to the eviction, KubeVirt's
	// webhook's words when it migrates the VM instead.
	Refusal                string
	Migration              string // the VirtualMachineInstanceMigration KubeVirt created
	Phase                  string // its last phase
	SourceNode, TargetNode string
	// Start and End are the VMI's migrationState: the migration itself
	// (second resolution); Done when the suite saw it succeed.
	Start, End, Done time.Time
	Reason           string // why it failed
}

// Restart is a way to get a VM a new instance without re-creating its
// VirtualMachine object (ARP-07).
type Restart string

const (
	RestartStopStart   Restart = "stop, then start"             // virtctl stop, then start: runStrategy Halted, then Always
	RestartSubresource Restart = "the restart subresource"      // virtctl restart
	RestartVMIDeleted  Restart = "the VMI deleted under its VM" // the VM controller makes a new one
)

// Restarts are the ways, in the order ARP-07 takes them.
var Restarts = []Restart{RestartStopStart, RestartSubresource, RestartVMIDeleted}

// Event is a Kubernetes event about an object.
type Event struct {
	Object  string // Kind/name
	Type    string // Normal, Warning
	Reason  string
	Message string
}

// VMStatus is what the API server says about a running VM.
type VMStatus struct {
	VMUID, VMIUID string
	Node          string
	// VLANMAC is the MAC of the VLAN interface in the VMI's
	// status.interfaces (the network named after the NAD).
	VLANMAC net.HardwareAddr
}

// Stager is a platform whose nodes' /opt/cni/bin the release's stager
// (the Multus DaemonSet's install-cni-plugins init container; in the lab,
// its replica run by framework/stager on each node's directory) fills: the
// suite can switch the stager off, run it again on a node, read that run,
// the image's plugins it copies and the directory it writes (STG-01..03,
// STG-09, STG-11 on a platform's own nodes).
type Stager interface {
	// SetStaging renders the Multus DaemonSet with staging on or off
	// (networking.stageCniPlugins), rolls it out on every node and returns
	// the init containers of the pod template as the API server holds it
	// afterwards. evidence.ErrNotObservable where the suite does not own Multus.
	SetStaging(ctx context.Context, on bool) (initContainers []string, err error)
	// CNIBin reads a node's /opt/cni/bin: entry name -> the entry, as the
	// lab's stager reads a node's (stager.File, without provenance).
	CNIBin(ctx context.Context, n Node) (map[string]stager.File, error)
	// Payload reads the plugins the stager's image carries (/cni-plugins),
	// from the running Multus container on the node.
	Payload(ctx context.Context, n Node) (map[string]stager.File, error)
	// PlaceCNIFile puts a file into the node's /opt/cni/bin, as an
	// administrator or another package would: written aside and renamed
	// over, since a plugin of that name may be executing. restore puts
	// back what was there (by rename too), or removes the file.
	PlaceCNIFile(ctx context.Context, n Node, name string, content []byte) (restore func() error, err error)
	// PlaceCNIDir puts an empty directory at name's place in the node's
	// /opt/cni/bin, a destination no rename can replace (the node's file
	// is moved aside first). restore puts back what was there.
	PlaceCNIDir(ctx context.Context, n Node, name string) (restore func() error, err error)
	// Restage deletes the node's Multus pod and waits for its replacement
	// to be Ready: the stager runs again on that node. An init container
	// that exits non-zero ends the wait at once, with its exit code.
	Restage(ctx context.Context, n Node) error
	// StagerRun is the stager's last run on the node as the API server
	// reports it: what an operator sees with kubectl get, describe and logs.
	StagerRun(ctx context.Context, n Node) (StagerRun, error)
}

// MultusRoll is a platform whose Multus DaemonSet the suite rolls and
// follows pod by pod, and on whose nodes it can start bare pods (STG-12).
type MultusRoll interface {
	// RollStaging flips stageCniPlugins as Stager.SetStaging does and
	// follows the DaemonSet's pods on every node through one watch. The
	// moment n's old Multus pod is gone (its daemon has exited) it creates
	// two probe pods pinned to n: one on the host network, then one on
	// the NAD nad of namespace ns. It returns once every node runs a new
	// Ready Multus pod and both probes run, or when the Multus timeout
	// passes, with the roll as far as it was seen. deleteProbes deletes
	// the probes it created and waits until they are gone (nil: it created
	// none). evidence.ErrNotObservable where the suite does not own Multus.
	RollStaging(ctx context.Context, on bool, n Node, ns, nad string) (r Roll, deleteProbes func(context.Context) error, err error)
}

// Roll is one roll of the Multus DaemonSet as one watch of every pod saw
// it. Its times are when the suite received each event: one stream, so
// their order is the API server's, not a comparison of clocks.
type Roll struct {
	Strategy string     // the DaemonSet's updateStrategy, as the API server holds it after the roll
	Nodes    []NodeRoll // in the order their old pods were marked for deletion; nodes never reached last
	// MostDown is the most nodes at one time between their old pod's
	// deletion mark and their new pod's Ready.
	MostDown  int
	ProbeNode string
	// Window is how long the probe node stayed without a Ready Multus pod
	// after the probes were created (zero: not both seen).
	Window time.Duration
	// CNIConfigs are the probe node's /etc/cni/net.d entries as the probes
	// were created: the configs the runtime had to choose from (nil: the
	// node's files are not observable).
	CNIConfigs []string
	Probes     []RollProbe // in the order created: the host-network one first
}

// NodeRoll is a node's Multus pod replaced.
type NodeRoll struct {
	Node, OldPod, NewPod string
	Down                 time.Time // the old pod marked for deletion: its daemon told to stop
	Gone                 time.Time // the old pod deleted: its daemon has exited
	Up                   time.Time // the new pod Ready (zero: not within the wait)
}

// RollProbe is a pod created on a node the moment its Multus daemon was gone.
type RollProbe struct {
	Pod         string // namespace/name
	HostNetwork bool
	Created     time.Time
	Running     time.Time // zero: it did not run within the wait
	// RunningBeforeDaemon: the watch saw it Running before its node's new
	// Multus pod was Ready.
	RunningBeforeDaemon bool
	// Attached are the networks Multus's network-status annotation names
	// on it, namespace/name (none: Multus did not attach it), read again
	// once the roll is over.
	Attached []string
	// PodIP is the address its sandbox got: a pod Multus never saw still
	// has one when the runtime fell through to the default network.
	PodIP string
	// SandboxFailures are the messages of its FailedCreatePodSandBox
	// events (its own UID's).
	SandboxFailures []string
}

// StagerRun is the node's Multus pod and its stager init container.
type StagerRun struct {
	Pod        string // namespace/name
	Ready      bool   // the pod's Ready condition
	Terminated bool   // the init container has terminated (not waiting, not running)
	ExitCode   int32
	Message    string   // its termination message
	Log        []string // its log, line by line
}

// Recreator is a platform that re-creates a VM itself (the cluster: it
// times the re-creation from the delete, for make bench-cluster).
type Recreator interface {
	RecreateVM(ctx context.Context, g Guest) (Guest, error)
}

// RecreateVM deletes the VM and creates it again from the same spec, as a
// user deleting and re-applying the VM object would: the platform allocates
// the VLAN NIC a fresh MAC unless the spec pins one.
func RecreateVM(ctx context.Context, p Platform, g Guest) (Guest, error) {
	if r, ok := p.(Recreator); ok {
		return r.RecreateVM(ctx, g)
	}
	spec := g.Spec()
	if err := p.DeleteVM(ctx, g); err != nil {
		return nil, err
	}
	return p.StartVM(ctx, spec)
}

// SideBySide is a platform whose guests are slow to start (KubeVirt VMs:
// a boot takes minutes) and whose StartVM may be called from several
// goroutines at once: a spec container then starts the guests it needs
// that many at a time and waits for the slowest of each group, not for
// their sum.
type SideBySide interface {
	// StartsSideBySide is how many guests may boot at once and pay off;
	// 1 or less: one after another.
	StartsSideBySide() int
}

// Timed is a platform that keeps a timeline of the run (the cluster's,
// for `make bench-cluster`): the suite records on it when each spec ran.
type Timed interface {
	SpecRan(container, spec string, from, to time.Time)
}

// Workloads is a platform whose workloads may be pods rather than VMs (the
// cluster tier without KubeVirt). A platform that is not one runs VMs, or
// the lab's replicas of them.
type Workloads interface {
	// Pods reports whether StartVM starts pods attached by Multus.
	Pods() bool
}

// AccessTrunk is a platform whose trunk may carry the VLAN untagged (a
// kernel without 8021q: no uplink.100, no second VLAN on the trunk).
type AccessTrunk interface {
	// Untagged reports whether the trunk runs in access mode, and why.
	Untagged() (bool, string)
}
