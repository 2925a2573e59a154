// Package claims is the catalogue of what the suite proves (CLAIMS.md): each
// claim's ID and the guide's sentence behind it. Specs carry the ID in their
// text as "[ID]" and as a Ginkgo label; the report maps IDs to verdicts.
package claims

import (
	"regexp"
	"strings"
)

// Claim is one numbered promise of the guide.
type Claim struct {
	ID       string
	Sentence string // what the guide (or seed 003) says, in one line
	Tier     string // "" = every tier, "cluster" = cluster only, "lab" = the lab only (no guest: a staged directory)
	// Pods: its cluster spec attaches pods in every lane (a macvlan child,
	// a consumer holding the sub-interface), so a VM lane's verdict on it
	// is a pod's, not KubeVirt's.
	Pods bool
	// Exemption says why the claim has no negative control, where it has
	// none; the conformance report prints it.
	Exemption string
	// Quote is a verbatim fragment of the Cozystack guide the claim rests
	// on ("" for claims from seed 003 or the suite's own catalogue). A
	// release whose guide does not contain it gets no verdict on the
	// claim: "not in this release's guide" (report.ForRelease).
	Quote string
}

// ByID is the claim of the catalogue with that ID.
func ByID(id string) (Claim, bool) {
	for _, c := range All {
		if c.ID == id {
			return c, true
		}
	}
	return Claim{}, false
}

// Staging tells whether the claim of id is about plugin staging (STG-): a
// release that cannot stage the plugins does not make it.
func Staging(id string) bool { return strings.HasPrefix(id, "STG-") }

// quotes are the guide's words behind each claim (docs/vm-external-vlan.md).
var quotes = map[string]string{
	"VLAN-01": "Attach the VLAN sub-interface to a bridge and point a `bridge`-type [...] at it",
	"VLAN-02": "enslaves the tagged VLAN sub-interface",
	"VLAN-03": "are silently dropped before they ever reach the VM",
	"VLAN-04": "a host-side service on the parent IP is unreachable from the VMs",
	"VLAN-05": "the host can carry an address on the bridge itself to talk to the VMs",
	"VLAN-06": "no cluster-side address assignment; the guest configures its address itself",
	"VLAN-07": "brings up only the connected route for the VLAN subnet",
	"VLAN-09": `failed to find plugin "bridge" in path [/opt/cni/bin]`,
	"VLAN-11": "created in the VM's tenant namespace",
	"VLAN-13": "cannot move an interface into a bridge while a consumer still holds it",
	"VLAN-14": "must match the bridge name from step 1",
	"VLAN-15": "so a NAD naming `macvlan`, `ipvlan` or `vlan` fails there too",
	"STG-01":  "It installs 14 of the upstream reference plugins",
	"STG-02":  "leaves `loopback`, `dhcp`, `dummy` and `tap` alone",
	"STG-03":  "a hand-placed or locally patched `bridge` will normally not survive",
	"STG-04":  "staging adds the ten it does not carry and rewrites the four that overlap",
	"STG-05":  "A plugin it fails to write is reported and skipped rather than removed",
	"STG-06":  "A line beginning `failed to install:` names plugins the container could not write",
	"STG-07":  "no /cni-plugins in this image; skipping staging",
	"STG-09":  "nothing in this package removes or restores a plugin",
	"STG-10":  "stops the whole platform render rather than resolving to off",
	"STG-11":  "exits successfully on purpose, so the pod shows Ready",
	"STG-12":  "so Multus rolls node by node",
	"ARP-01":  "KubeVirt generates a fresh guest MAC each time the VM object is re-created",
	"ARP-02":  "holds a stale ARP entry for the old MAC",
	"ARP-03":  "wait for the ARP entry to age out",
	"ARP-07":  "each time the VM object is re-created",
}

func init() {
	for i := range All {
		All[i].Quote = quotes[All[i].ID]
	}
}

// All claims, in report order.
var All = []Claim{
	{ID: "VLAN-01", Sentence: "A bridge-type NAD on a Linux bridge enslaving uplink.100: guest and gateway reach each other both ways."},
	{ID: "VLAN-02", Sentence: "The guest's frames cross the trunk tagged with VLAN 100."},
	{ID: "VLAN-03", Sentence: "macvlan: the guest transmits but never receives; replies to the guest MAC are dropped, its neighbour entry stays FAILED."},
	{ID: "VLAN-04", Sentence: "macvlan: the host cannot reach macvlan children through the parent interface, nor can they reach a TCP service on its address.", Pods: true},
	{ID: "VLAN-05", Sentence: "With a host address on the bridge, host and bridge-attached VMs reach each other, a TCP service on that address included."},
	{ID: "VLAN-06", Sentence: "ipam: {} assigns no address; the guest configures its own from cloud-init userData."},
	{ID: "VLAN-07", Sentence: "The /24 on the VLAN NIC adds only the connected route; the default route stays on the pod NIC."},
	{ID: "VLAN-08", Sentence: "A guest on VLAN 100 cannot reach a host on another VLAN of the same trunk."},
	{ID: "VLAN-09", Sentence: `A node lacking the bridge plugin fails the NAD with failed to find plugin "bridge" in path [/opt/cni/bin].`},
	{ID: "VLAN-10", Sentence: "The attachment's MTU must match the physical VLAN: full-size DF passes when they match, is dropped when the path is smaller (seed 003)."},
	{ID: "VLAN-11", Sentence: "The NAD is resolved in the VM's own namespace: without a copy there the VLAN NIC does not start.", Tier: "cluster"},
	{ID: "VLAN-12", Sentence: "With macspoofchk: true on the bridge NAD the guest's own traffic passes under bridge binding; a frame from another source MAC is dropped at the node (seed 003)."},
	{ID: "VLAN-13", Sentence: "The uplink's VLAN sub-interface cannot be enslaved to br100 while a macvlan consumer holds it (EBUSY); once the consumer is gone it can, and a workload on the resulting br100 reaches the gateway.", Pods: true},
	{ID: "VLAN-14", Sentence: "A NAD naming a bridge step 1 did not make gets a new, isolated bridge of its own: the attachment succeeds, nothing reports an error, and the guest reaches nothing."},
	{ID: "VLAN-15", Sentence: `On a Talos node before staging a macvlan NAD fails with failed to find plugin "macvlan" in path [...]; after staging the same NAD attaches, on the same directory.`, Tier: "lab"},
	{ID: "NODE-01", Sentence: "Step 1: br100 enslaves uplink.100, which carries VLAN 100 and no address."},
	{ID: "NODE-02", Sentence: "Step 1 leaves the node's default route on its management interface, not on br100."},
	{ID: "NODE-03", Sentence: "Step 1's MTUs never grow along the path: uplink ≥ uplink.100 ≥ br100 ≥ the NAD's."},
	{ID: "STG-01", Sentence: "Staging installs exactly the 14 upstream reference plugins, byte-identical, mode 0755."},
	{ID: "STG-02", Sentence: "It never writes loopback, dhcp, dummy, tap, nor any file that is not an image plugin."},
	{ID: "STG-03", Sentence: "It replaces a same-name file every run, by rename: an executing plugin keeps running."},
	{ID: "STG-04", Sentence: "Talos: 10 added, 4 rewritten, loopback and flannel untouched; k3s: 14 added; Cilium: 14 added; older versions replaced."},
	{ID: "STG-05", Sentence: "A plugin it fails to write is reported and skipped, never removed."},
	{ID: "STG-06", Sentence: "Per-plugin causes where attempted, then a summary beginning `failed to install:`; exit 0."},
	{ID: "STG-07", Sentence: "No /cni-plugins: logs `no /cni-plugins in this image; skipping staging`, installs nothing, exits 0."},
	{ID: "STG-08", Sentence: "No temporary file is left in /opt/cni/bin after a run, failed or not."},
	{ID: "STG-09", Sentence: "With stageCniPlugins: false the init container is absent and nothing staged is removed."},
	{ID: "STG-10", Sentence: "An unreadable stageCniPlugins spelling stops the render rather than resolving to off; the documented spellings resolve as documented; unset follows the bundle."},
	{ID: "STG-11", Sentence: "A plugin the stager cannot write on a live node leaves the Multus pod Ready: the init container exits 0, its termination message begins `failed to install:` naming it, the cause is earlier in its log."},
	{ID: "STG-12", Sentence: "Flipping stageCniPlugins rolls Multus node by node, one at a time; while a node's daemon is down a pod with a NAD created there is not refused: it starts on the default network alone and never gets its NAD, with no error anywhere (Multus v4.3.0 removes its CNI config as its daemon stops), and a host-network pod there still starts. The guide misstates this: it says pod creation fails for the length of the restart.", Tier: "cluster"},
	{ID: "ARP-01", Sentence: "Re-creating a VM gives its VLAN NIC a fresh MAC unless one is pinned."},
	{ID: "ARP-02", Sentence: "Right after re-creation the gateway still holds the old MAC: gateway-to-guest fails, as expected."},
	{ID: "ARP-03", Sentence: "It recovers by itself once the gateway's entry ages out, within the bound its neighbour timers imply."},
	{ID: "ARP-04", Sentence: "A gratuitous ARP from the new guest ends the outage at once."},
	{ID: "ARP-05", Sentence: "A pinned MAC survives re-creation, with no outage."},
	{ID: "ARP-06", Sentence: "Two guests with one MAC on one VLAN are a detectable collision."},
	{ID: "ARP-07", Sentence: "A restart keeps the VirtualMachine but not the MAC: stop and start, the restart subresource and a VMI deleted under its VM each give an unpinned VLAN NIC a fresh MAC (KubeVirt v1.8.4), and the gateway holds the old one until its entry ages out, as after a re-creation. The guide understates this: it names re-creation only.", Tier: "cluster"},
	{ID: "ARP-08", Sentence: "A node drain live-migrates a VM (Cozystack's KubeVirt CR: evictionStrategy: LiveMigrate) and the VLAN follows it: the guest keeps its MAC and address, the gateway reaches it again within seconds of the migration's end with its entry unchanged, and the target node's br100 learns the MAC behind the new launcher's port while the source's drops the old one.", Tier: "cluster"},
}

var (
	mdLink    = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	emphOpen  = regexp.MustCompile(`(^|[^\pL\pN*_])[*_]+`)
	emphClose = regexp.MustCompile(`[*_]+($|[^\pL\pN*_])`)
	plain     = strings.NewReplacer("`", "", "**", "", "__", "", "\u2014", "-", "\u2013", "-", "\u2019", "'", "\u201c", `"`, "\u201d", `"`)
)

// Normalize is text as the guide's words are compared: what markdown adds
// to prose (links' targets, code marks, emphasis) dropped, whitespace
// folded, dashes and quotes plain, so that a sentence matches however the
// guide wraps or marks it up.
func Normalize(s string) string {
	s = mdLink.ReplaceAllString(s, "$1")
	s = plain.Replace(s)
	s = emphOpen.ReplaceAllString(s, "$1")
	s = emphClose.ReplaceAllString(s, "$1")
	return strings.Join(strings.Fields(s), " ")
}

// Says tells whether text (a guide) says fragment, verbatim up to
// whitespace and markup (Normalize); "[...]" or "…" in fragment stands for
// any text, so one quote holds where guides word a detail differently.
func Says(text, fragment string) bool {
	text = Normalize(text)
	at, matched := 0, false
	for _, part := range strings.Split(strings.ReplaceAll(fragment, "…", "[...]"), "[...]") {
		part = Normalize(part)
		if part == "" {
			continue
		}
		i := strings.Index(text[at:], part)
		if i < 0 {
			return false
		}
		at += i + len(part)
		matched = true
	}
	return matched
}
