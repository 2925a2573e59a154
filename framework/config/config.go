// Package config holds the suite's flags and validates them before anything
// is created: bad input gets one clear error and exit status 2.
package config

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cozystack/vlan-conformance/framework/controls"
	"github.com/cozystack/vlan-conformance/framework/stager"
)

// ExitBadInput is the exit status for invalid flags.
const ExitBadInput = 2

// Config is everything a run is parameterised by. Specs read it through the
// platform, never directly.
type Config struct {
	Tier string // "lab" (default) or "cluster"

	// The VLAN under test and the guide's addresses on it.
	VLAN      int
	Subnet    string // CIDR, e.g. 203.0.113.0/24
	Gateway   string // the upstream gateway on the VLAN
	GuestAddr string // the guest's static address (cloud-init), CIDR
	// A second VLAN on the same trunk, for isolation (VLAN-08).
	OtherVLAN    int
	OtherSubnet  string
	OtherGateway string

	// Vendor mode: a real NIC and an existing gateway instead of the veth trunk.
	Uplink string

	PluginDir      string // the CNI plugins every lab node carries in its /opt/cni/bin
	OldPluginDir   string // an older plugin release, for stager node layouts
	StagerManifest string // multus DaemonSet manifest carrying install-cni-plugins
	StagerImage    string // the multus image's root (dir or tarball); "" = the suite's reference build
	Kubeconfig     string
	ReportDir      string
	WorkDir        string // scratch for CNI cache, node dirs; removed afterwards
	Control        string // negative control to apply, a framework/controls ID ("" = the guide's subject)
	ARPProfile     string // gateway neighbour timers: "tuned" or "default"
	// GatewayWait is --gateway-wait: how long ARP-03 and ARP-07 wait for
	// a gateway that declares no neighbour timers (a vendor's) to recover
	// from its stale entry by itself.
	GatewayWait   time.Duration
	DumpOnFailure bool // write namespace dumps next to a failed spec's evidence

	Cluster ClusterConfig // the cluster tier's flags (cluster.go)

	// Cozystack is --cozystack: the release under test, which
	// framework/subject opens (Of); Guide is --guide: the guide
	// its claims are judged by, when not the one it ships.
	Cozystack string
	Guide     string
	// ImageArchives is --image-archive: images the release pins, as an
	// air-gapped mirror holds them (subject.Options).
	ImageArchives Repeated
	// PullPinned is --pull-pinned: pull the images the release pins that
	// no archive holds, by digest, from their registry or from the
	// --registry-mirror of it (RegistryMirrors, HOST=MIRROR each).
	PullPinned      bool
	RegistryMirrors Repeated
	fs              *flag.FlagSet
}

// DefaultGatewayWait is --gateway-wait's default: the guide's "~5 min"
// for the stale entry, and a margin. MaxGatewayWait covers routers that
// keep an ARP entry 4 hours.
const (
	DefaultGatewayWait = 10 * time.Minute
	MaxGatewayWait     = 6 * time.Hour
)

// Register binds the flags to fs with the guide's defaults.
func Register(fs *flag.FlagSet) *Config {
	c := &Config{}
	fs.StringVar(&c.Tier, "tier", "lab", "where the specs run: lab (netns) or cluster")
	fs.IntVar(&c.VLAN, "vlan", 100, "VLAN id under test (1-4094)")
	fs.StringVar(&c.Subnet, "subnet", "203.0.113.0/24", "the VLAN's subnet")
	fs.StringVar(&c.Gateway, "gateway", "203.0.113.1", "the VLAN's upstream gateway address")
	fs.StringVar(&c.GuestAddr, "guest-address", "203.0.113.10/24", "the first guest's static address on the VLAN (cloud-init); further guests count up from it (framework/addresses)")
	fs.IntVar(&c.OtherVLAN, "other-vlan", 200, "a second VLAN on the trunk, for isolation checks")
	fs.StringVar(&c.OtherSubnet, "other-subnet", "198.51.100.0/24", "the second VLAN's subnet")
	fs.StringVar(&c.OtherGateway, "other-gateway", "198.51.100.1", "a host on the second VLAN")
	fs.StringVar(&c.Uplink, "uplink", "", "vendor mode: a real NIC carrying the VLAN tagged, towards an existing gateway")
	fs.StringVar(&c.PluginDir, "plugin-dir", "bin/cni/v1.9.1", "directory with the upstream CNI plugin binaries")
	fs.StringVar(&c.OldPluginDir, "old-plugin-dir", "bin/cni/v1.6.2", "directory with an older CNI plugin release (stager layouts)")
	fs.StringVar(&c.StagerManifest, "stager-manifest", stager.DefaultManifest, "multus DaemonSet manifest whose install-cni-plugins init container is the stager subject")
	fs.StringVar(&c.StagerImage, "stager-image", "", "the multus image install-cni-plugins runs in: a directory holding cni-plugins/, an OCI layout directory, or a `docker save` / OCI-layout / `crane export` tarball (default: the suite builds one with the 14 staged plugins of --plugin-dir, as Cozystack's Dockerfile does)")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "", "cluster tier: an existing cluster's kubeconfig; "+InCluster+": the cluster the suite runs in, by its pod's service account (conformance certify)")
	fs.StringVar(&c.ReportDir, "report-dir", "reports", "where junit.xml, conformance.md and artifacts go")
	fs.StringVar(&c.WorkDir, "work-dir", "", "scratch directory (default: a fresh temp dir)")
	fs.StringVar(&c.Control, "control", "", "negative control: run the specs against a deliberately broken subject (list them with `conformance controls`)")
	fs.StringVar(&c.ARPProfile, "arp-profile", "tuned", "lab gateway neighbour timers: tuned or default")
	fs.DurationVar(&c.GatewayWait, "gateway-wait", DefaultGatewayWait, "how long to wait for a gateway without declared neighbour timers (a vendor's) to drop its stale entry by itself after a re-creation or restart (ARP-03, ARP-07); past it the verdict is \"not recovered within\" it")
	fs.BoolVar(&c.DumpOnFailure, "dump-on-failure", true, "dump every namespace's links, addresses, routes, neighbours and FDB when a spec fails")
	registerCluster(fs, c)
	registerCozystack(fs, c)
	return c
}

// InCluster is the --kubeconfig that names the cluster the suite runs in,
// by its pod's service account: `conformance certify` runs it so.
const InCluster = "in-cluster"

// Validate checks every flag and returns all problems as one error. It
// creates nothing. The release the flags name is opened by
// framework/subject (Of) once they are valid.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }

	switch c.Tier {
	case "lab", "cluster":
	default:
		add("--tier %q: want lab or cluster", c.Tier)
	}
	for _, v := range []struct {
		flag string
		id   int
	}{{"--vlan", c.VLAN}, {"--other-vlan", c.OtherVLAN}} {
		if v.id < 1 || v.id > 4094 {
			add("%s %d: VLAN id must be in 1..4094", v.flag, v.id)
		}
	}
	if c.VLAN == c.OtherVLAN {
		add("--other-vlan %d: must differ from --vlan", c.OtherVLAN)
	}
	subnet, err := parseSubnet("--subnet", c.Subnet)
	if err != nil {
		errs = append(errs, err)
	}
	other, err := parseSubnet("--other-subnet", c.OtherSubnet)
	if err != nil {
		errs = append(errs, err)
	}
	inside := func(flagName, addr string, p netip.Prefix) (netip.Addr, bool) {
		a, err := netip.ParseAddr(addr)
		if err != nil {
			add("%s %q: not an IP address", flagName, addr)
			return a, false
		}
		if p.IsValid() && !p.Contains(a) {
			add("%s %s: outside the subnet %s", flagName, a, p)
			return a, false
		}
		return a, p.IsValid()
	}
	gw, gwOK := inside("--gateway", c.Gateway, subnet)
	otherGW, otherOK := inside("--other-gateway", c.OtherGateway, other)
	g, err := netip.ParsePrefix(c.GuestAddr)
	guestOK := err == nil && subnet.IsValid() && subnet.Contains(g.Addr()) && g.Bits() == subnet.Bits()
	if err != nil {
		add("--guest-address %q: want an address with prefix length, e.g. 203.0.113.10/24", c.GuestAddr)
	} else if subnet.IsValid() && !guestOK {
		add("--guest-address %s: not in the subnet %s", g, subnet)
	}
	// Only flags that parsed are checked against the plan: one error each.
	if gwOK && otherOK && guestOK {
		if err := validateAddresses(AddressFlags{Subnet: subnet, Gateway: gw, Guest: g, OtherSubnet: other, OtherGateway: otherGW}); err != nil {
			errs = append(errs, err)
		}
	}
	if subnet.IsValid() && other.IsValid() && subnet.Overlaps(other) {
		add("--other-subnet %s overlaps --subnet %s", other, subnet)
	}
	if c.Uplink != "" {
		if _, err := net.InterfaceByName(c.Uplink); err != nil {
			add("--uplink %q: no such interface in this namespace", c.Uplink)
		}
	}
	if c.Tier == "lab" {
		if fi, err := os.Stat(filepath.Join(c.PluginDir, "bridge")); err != nil || fi.IsDir() {
			add("--plugin-dir %q: no bridge plugin there (build them with `make plugins`)", c.PluginDir)
		}
	}
	// A subject the stager cannot run is bad input, not a failed package.
	if c.StagerManifest != "" {
		if _, err := stager.LoadInitContainer(c.StagerManifest); err != nil {
			add("--stager-manifest: %v", err)
		}
	}
	if c.StagerImage != "" {
		if err := stager.CheckImage(c.StagerImage); err != nil {
			add("--stager-image %q: %v", c.StagerImage, err)
		}
	}
	if c.Tier == "cluster" && c.Kubeconfig == InCluster {
		// rest.InClusterConfig's own test: a pod's environment.
		if os.Getenv("KUBERNETES_SERVICE_HOST") == "" {
			add("--kubeconfig=%s: not in a pod (no KUBERNETES_SERVICE_HOST); `conformance certify` runs the suite in the cluster", InCluster)
		}
	} else if c.Tier == "cluster" && c.Kubeconfig != "" {
		if _, err := os.Stat(c.Kubeconfig); err != nil {
			add("--kubeconfig %q: %v", c.Kubeconfig, errors.Unwrap(err))
		}
	}
	switch c.ARPProfile {
	case "tuned", "default":
	default:
		add("--arp-profile %q: want tuned or default", c.ARPProfile)
	}
	if c.GatewayWait < time.Second || c.GatewayWait > MaxGatewayWait {
		add("--gateway-wait %s: want 1s..%s (a router's 4-hour ARP cache: 4h10m)", c.GatewayWait, MaxGatewayWait)
	}
	errs = append(errs, c.validateCluster())
	if err := c.validateCozystack(); err != nil {
		errs = append(errs, err)
	}
	if ctl, ok := controls.ByID(c.Control); c.Control != "" && !ok {
		add("--control %q: unknown (known: %s)", c.Control, strings.Join(controls.IDs(), ", "))
	} else if ok {
		if ctl.NeedsRelease && c.Cozystack == "" {
			add("--control %q: its broken subject is made from the release under test: pass --cozystack=DIR", c.Control)
		}
		if !ctl.OnTier(c.Tier) {
			// Applied to the other tier, a control would change nothing:
			// its specs would pass and the control look uncaught.
			add("--control %q: its broken subject is built on the %s tier, not --tier=%s", c.Control, ctl.TierName(), c.Tier)
		}
		if ctl.WantsVMs(c.Tier, c.Cluster.Workload) {
			add("--control %q: on a cluster it breaks VMs: pass --workload=vm, not %s", c.Control, c.Cluster.Workload)
		}
	}
	return errors.Join(errs...)
}

// SelectedControl is the negative control --control names
// (framework/controls): the zero Control, the guide's subject with
// nothing broken, without one.
func (c *Config) SelectedControl() controls.Control {
	ctl, _ := controls.ByID(c.Control)
	return ctl
}

// Repeated is a flag given once per value (--image-archive=A
// --image-archive=B).
type Repeated []string

func (r *Repeated) String() string { return strings.Join(*r, ",") }

// Set adds one value.
func (r *Repeated) Set(v string) error {
	if v == "" {
		return errors.New("empty")
	}
	*r = append(*r, v)
	return nil
}

// Values are the values in the order given; a driver passing the flags on
// gives each as a flag of its own.
func (r *Repeated) Values() []string { return *r }

// VendorMode reports whether a real uplink replaces the lab's veth trunk.
func (c *Config) VendorMode() bool { return c.Uplink != "" }

func parseSubnet(flagName, s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%s %q: not a CIDR", flagName, s)
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("%s %s: host bits set (did you mean %s?)", flagName, p, p.Masked())
	}
	if !p.Addr().Is4() || p.Bits() > 30 {
		return netip.Prefix{}, fmt.Errorf("%s %s: want an IPv4 subnet of /30 or larger", flagName, p)
	}
	return p, nil
}
