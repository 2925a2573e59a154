package config

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cozystack/vlan-conformance/framework/stager"
)

// ClusterConfig parameterises the cluster tier (--tier=cluster): a kind
// cluster the suite makes (the default) or an existing one (--kubeconfig,
// vendor mode). Every component is pinned here and every pin is a flag, so
// the offline lane (locally built images, a pod network of its own) is a
// configuration of this tier, not a fork of it.
type ClusterConfig struct {
	DryRun      bool // print every object and node action in order, then exit
	KeepCluster bool // keep a kind cluster this run made (for debugging)

	KindName      string // kind cluster name
	KindNodeImage string // "" = the kind release's default node image
	KindConfig    string // kind cluster config file; "" = kind-config/cluster.yaml (embedded)
	Runtime       string // container runtime binary kind drives: docker, podman, nerdctl
	// PodNetwork: "kind" keeps kind's default CNI; "ptp" disables it and
	// gives every node a ptp + host-local conflist (the offline lane, where
	// kindnetd's image cannot be pulled).
	PodNetwork string

	KubeVirtVersion string // virt-operator release, the one Cozystack ships
	MultusVersion   string // Multus thick release
	// Emulation: "auto" sets KubeVirt's useEmulation when /dev/kvm is not
	// usable here, "on"/"off" force it.
	Emulation string
	// ManifestsDir holds the release manifests: read from there first,
	// fetched from their release URLs into it on first use. An air-gapped run
	// pre-fills it and the run never goes online.
	ManifestsDir string
	// ImagesArchives are docker-archive tarballs imported into every node
	// before anything is applied (comma-separated).
	ImagesArchives string
	// CNIStaging puts the reference plugins into every node's /opt/cni/bin:
	// "stager" grafts the install-cni-plugins init container of
	// --stager-manifest onto the Multus DaemonSet (the stager subject, image
	// --cni-plugins-image); "installer" copies --plugin-dir into each node
	// directly; "none" leaves the nodes as they are.
	CNIStaging      string
	CNIPluginsImage string

	Guest GuestImage

	// Workload is what attaches to the VLAN: "vm" (KubeVirt VMs, the
	// guide's) or "pod" (pods attached by Multus, no KubeVirt installed:
	// the offline lane's first half; claims about VMs skip).
	Workload string
	// Trunk: "tagged" (uplink.100 per the guide), "untagged" (access mode,
	// for a kernel without 8021q: kind nodes share the host's) or "auto"
	// (tagged when the kernel can).
	Trunk string

	// NodeAgentImage is the suite's own image (images/conformance), run on
	// an existing cluster's nodes as the node agent: the suite then
	// observes them as it does a kind node. "": no agent, the node
	// observations are not observable there.
	NodeAgentImage string

	Timeouts string // per readiness stage, e.g. nodes=5m,multus=5m,kubevirt=15m,nad=1m,vmi=10m
}

// GuestImage is the guest the VMs boot, and how the suite logs in on its
// serial console.
type GuestImage struct {
	Image    string // a containerDisk (a disk under /disk), or with KernelBoot a kernel-boot image
	User     string // the image's default user (cloud-init sets its password)
	Password string
	// KernelBoot is "KERNEL:INITRD", paths inside Image, for a guest KubeVirt
	// boots with kernelBoot (its root in the initrd, no system disk); ""
	// boots Image as a containerDisk.
	KernelBoot string
	KernelArgs string
}

// KernelPaths splits KernelBoot ("" "": a containerDisk guest).
func (g GuestImage) KernelPaths() (kernel, initrd string) {
	kernel, initrd, _ = strings.Cut(g.KernelBoot, ":")
	return kernel, initrd
}

// StageTimeoutDefaults are the readiness stages' timeouts, in stage order.
var StageTimeoutDefaults = []struct {
	Stage   string
	Timeout time.Duration
}{
	{"nodes", 5 * time.Minute},
	{"multus", 5 * time.Minute},
	{"kubevirt", 15 * time.Minute},
	{"nad", time.Minute},
	{"vmi", 10 * time.Minute},
}

func registerCluster(fs *flag.FlagSet, c *Config) {
	cl := &c.Cluster
	fs.BoolVar(&cl.DryRun, "dry-run", false, "cluster tier: print every object and node action it would apply, in order, and exit")
	fs.BoolVar(&cl.KeepCluster, "keep-cluster", false, "cluster tier: keep the kind cluster this run made (delete it later with `make kind-down`)")
	fs.StringVar(&cl.KindName, "kind-name", "vcf", "cluster tier: kind cluster name (one of this name that is there is reused if `make kind-up` or --keep-cluster made it, else deleted and made afresh)")
	fs.StringVar(&cl.KindNodeImage, "kind-node-image", "", "cluster tier: kind node image (default: the kind release's)")
	fs.StringVar(&cl.KindConfig, "kind-config", "", "cluster tier: kind cluster config (default: kind-config/cluster.yaml, built in)")
	fs.StringVar(&cl.Runtime, "container-runtime", "docker", "cluster tier: the container runtime kind drives: docker, podman or nerdctl")
	fs.StringVar(&cl.PodNetwork, "pod-network", "kind", "cluster tier: kind (kind's default CNI) or ptp (no default CNI; a ptp conflist per node, for offline node images)")
	fs.StringVar(&cl.KubeVirtVersion, "kubevirt-version", "v1.8.4", "cluster tier: KubeVirt release (Cozystack ships v1.8.x)")
	fs.StringVar(&cl.MultusVersion, "multus-version", "v4.3.0", "cluster tier: Multus thick release")
	fs.StringVar(&cl.Emulation, "kubevirt-emulation", "auto", "cluster tier: KubeVirt useEmulation: auto (when /dev/kvm is not usable), on or off")
	fs.StringVar(&cl.ManifestsDir, "manifests-dir", ".cache/manifests", "cluster tier: release manifests, read from here first and fetched into it on first use")
	fs.StringVar(&cl.ImagesArchives, "images-archive", "", "cluster tier: docker-archive tarballs (comma-separated) loaded into every kind node before anything is applied")
	fs.StringVar(&cl.CNIStaging, "cni-staging", "installer", "cluster tier: how the reference plugins reach /opt/cni/bin: stager (the install-cni-plugins init container of --stager-manifest on the Multus DaemonSet), installer (--plugin-dir copied into each kind node) or none")
	fs.StringVar(&cl.CNIPluginsImage, "cni-plugins-image", "", "cluster tier, --cni-staging=stager: an image carrying the reference plugins at /cni-plugins")
	fs.StringVar(&cl.Guest.Image, "guest-image", "quay.io/containerdisks/ubuntu:24.04", "cluster tier: guest containerDisk (cloud-init and netplan, as the guide's instanceProfile ubuntu), or a kernel-boot image with --guest-kernel-boot")
	fs.StringVar(&cl.Guest.User, "guest-user", "ubuntu", "cluster tier: the guest image's default user")
	fs.StringVar(&cl.Guest.Password, "guest-password", "vcf-conformance", "cluster tier: the serial-console password cloud-init gives the guest user")
	fs.StringVar(&cl.Guest.KernelBoot, "guest-kernel-boot", "", "cluster tier: KERNEL:INITRD, absolute paths in --guest-image, to boot it with KubeVirt's kernelBoot (root in the initrd, no system disk); empty: a containerDisk")
	fs.StringVar(&cl.Guest.KernelArgs, "guest-kernel-args", "console=ttyS0", "cluster tier, with --guest-kernel-boot: the kernel command line")
	fs.StringVar(&cl.Workload, "workload", "vm", "cluster tier: vm (KubeVirt VMs, as the guide) or pod (pods attached by Multus; KubeVirt is not installed and VM claims skip)")
	fs.StringVar(&cl.Trunk, "trunk", "auto", "cluster tier: tagged (uplink.100, needs 8021q), untagged (access mode: the trunk carries the VLAN untagged; tag claims skip) or auto (tagged when the kernel has 8021q; on an existing cluster, tagged as the guide)")
	fs.StringVar(&cl.NodeAgentImage, "node-agent-image", "", "cluster tier, existing cluster (--kubeconfig): the suite's image (make conformance-image), run on every node as the node agent (DaemonSet vcf-node-agent, hostNetwork, capabilities NET_RAW and NET_ADMIN only) so the suite observes the nodes (links, routes, bridges, br100's FDB, pings, a TCP service, captures on the uplink); empty: those are not observable")
	fs.StringVar(&cl.Timeouts, "stage-timeouts", "", "cluster tier: readiness stage timeouts overriding the defaults, e.g. kubevirt=20m,vmi=15m (stages: nodes, multus, kubevirt, nad, vmi)")
}

// StageTimeouts returns every stage's timeout: the defaults with
// --stage-timeouts applied.
func (cl *ClusterConfig) StageTimeouts() (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	for _, d := range StageTimeoutDefaults {
		out[d.Stage] = d.Timeout
	}
	if strings.TrimSpace(cl.Timeouts) == "" {
		return out, nil
	}
	for _, kv := range strings.Split(cl.Timeouts, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if _, known := out[k]; !ok || !known {
			stages := make([]string, 0, len(out))
			for s := range out {
				stages = append(stages, s)
			}
			sort.Strings(stages)
			return nil, fmt.Errorf("--stage-timeouts %q: want stage=duration with stage one of %s", kv, strings.Join(stages, ", "))
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("--stage-timeouts %q: %q is not a positive duration", kv, v)
		}
		out[k] = d
	}
	return out, nil
}

// ExistingCluster reports whether the run uses a cluster it did not make.
func (c *Config) ExistingCluster() bool { return c.Tier == "cluster" && c.Kubeconfig != "" }

// Archives lists --images-archive.
func (cl *ClusterConfig) Archives() []string {
	var out []string
	for _, a := range strings.Split(cl.ImagesArchives, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

func (c *Config) validateCluster() error {
	if c.Tier != "cluster" {
		if c.Cluster.DryRun {
			return fmt.Errorf("--dry-run prints the cluster tier's plan: it needs --tier=cluster")
		}
		return nil
	}
	cl := &c.Cluster
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	oneOf := func(flagName, v string, allowed ...string) {
		for _, a := range allowed {
			if v == a {
				return
			}
		}
		add("%s %q: want %s", flagName, v, strings.Join(allowed, ", "))
	}
	oneOf("--container-runtime", cl.Runtime, "docker", "podman", "nerdctl")
	oneOf("--pod-network", cl.PodNetwork, "kind", "ptp")
	oneOf("--kubevirt-emulation", cl.Emulation, "auto", "on", "off")
	oneOf("--cni-staging", cl.CNIStaging, "stager", "installer", "none")
	oneOf("--workload", cl.Workload, "vm", "pod")
	oneOf("--trunk", cl.Trunk, "auto", "tagged", "untagged")
	if cl.Guest.KernelBoot != "" {
		if k, i := cl.Guest.KernelPaths(); !strings.HasPrefix(k, "/") || !strings.HasPrefix(i, "/") {
			add("--guest-kernel-boot %q: want KERNEL:INITRD, absolute paths inside --guest-image", cl.Guest.KernelBoot)
		}
	}
	if _, err := cl.StageTimeouts(); err != nil {
		errs = append(errs, err)
	}
	if !strings.HasPrefix(cl.KubeVirtVersion, "v") || !strings.HasPrefix(cl.MultusVersion, "v") {
		add("--kubevirt-version %q / --multus-version %q: want release tags such as v1.8.4", cl.KubeVirtVersion, cl.MultusVersion)
	}
	if cl.KindName == "" || strings.ContainsAny(cl.KindName, " /") {
		add("--kind-name %q: want a plain name", cl.KindName)
	}
	if cl.KindConfig != "" {
		if _, err := os.Stat(cl.KindConfig); err != nil {
			add("--kind-config %q: %v", cl.KindConfig, errors.Unwrap(err))
		}
	}
	for _, a := range cl.Archives() {
		if _, err := os.Stat(a); err != nil {
			add("--images-archive %q: %v", a, errors.Unwrap(err))
		}
	}
	if cl.CNIStaging == "stager" { // the image half of the subject, read as --stager-image is
		errs = append(errs, stager.CheckClusterImage(cl.CNIPluginsImage, cl.Archives()))
	}
	if cl.CNIStaging == "stager" && cl.CNIPluginsImage == "" && !cl.DryRun {
		add("--cni-staging=stager needs --cni-plugins-image (an image carrying the plugins at /cni-plugins)")
	}
	if cl.CNIStaging == "installer" {
		errs = append(errs, c.CheckInstallerPlugins())
	}
	if c.Kubeconfig != "" && (cl.KeepCluster || cl.KindConfig != "" || cl.KindNodeImage != "" || len(cl.Archives()) > 0) {
		add("--kubeconfig (an existing cluster) does not go with --keep-cluster, --kind-config, --kind-node-image or --images-archive: the suite makes no cluster there")
	}
	if cl.NodeAgentImage != "" && c.Kubeconfig == "" {
		add("--node-agent-image %q: the node agent is for an existing cluster (--kubeconfig); the suite enters a kind cluster's nodes itself", cl.NodeAgentImage)
	}
	if c.Uplink != "" {
		add("--uplink is the lab tier's vendor mode; an existing cluster is given with --kubeconfig")
	}
	return errors.Join(errs...)
}

// CheckInstallerPlugins: the plugins the installer copies into the kind
// nodes are there (an existing cluster's nodes are not written; a dry run
// copies nothing).
func (c *Config) CheckInstallerPlugins() error {
	if c.Kubeconfig != "" || c.Cluster.DryRun {
		return nil
	}
	if fi, err := os.Stat(filepath.Join(c.PluginDir, "bridge")); err != nil || fi.IsDir() {
		return fmt.Errorf("--plugin-dir %q: no bridge plugin there to install into the kind nodes (build them with `make plugins`)", c.PluginDir)
	}
	return nil
}
