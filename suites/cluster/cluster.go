// Package cluster holds the claims only a real cluster can prove (CLAIMS.md
// VLAN-11, STG-09, and ARP-01 on real re-creation): how the API server
// resolves a NAD, what the Multus DaemonSet renders, what KubeVirt puts in
// a VMI's status. Each spec asks the platform for the capability it needs
// and skips with the reason when the platform has none (the lab); none
// knows the tier's name. The topology is the cluster tier's (see
// framework/platform/cluster): kind workers cabled to the gateway netns,
// each with the guide's br100 over uplink.100.
package cluster

import (
	"fmt"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cozystack/vlan-conformance/fixtures"
	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/suites/labels"
	"github.com/cozystack/vlan-conformance/suites/skip"
)

// A cluster is made once for the run, before any spec; a platform that
// builds lazily (the lab) is left alone.
var _ = SynchronizedBeforeSuite(func(ctx SpecContext) {
	Expect(platform.Provision(ctx)).To(Succeed(), "building the cluster for the run")
}, func(SpecContext) {})

// kubeVMs returns the platform and its Kubernetes view of VMs, or skips.
func kubeVMs(ctx SpecContext) (platform.Platform, platform.KubeVMs) {
	p, err := platform.Ready(ctx)
	Expect(err).NotTo(HaveOccurred(), "building the platform")
	k, ok := platform.As[platform.KubeVMs](p)
	if !ok {
		Skip(p.Name() + " has no Kubernetes API: its VMs have no VMI status or events to judge")
	}
	return p, k
}

var _ = Describe("A VM in a tenant namespace without its own copy of the NAD", labels.Cluster, labels.Datapath, func() {
	// "...resolves a network by name in the VM's own namespace, so one copy
	// of the NAD must exist in every tenant namespace that runs VMs on this VLAN."
	It("[VLAN-11] does not get its VLAN NIC, and the event names the missing NAD", labels.Claim("VLAN-11"), func(ctx SpecContext) {
		p, k := kubeVMs(ctx)
		By("the NAD exists in tenant-example only")
		Expect(p.ApplyNAD(ctx, "tenant-example", platform.NAD{Name: "vlan100", Config: fixtures.NAD("vlan100-bridge")})).To(Succeed())
		spec := platform.VMSpec{Name: "vm-nonad", Namespace: "tenant-without-nad", Node: p.BridgeNodes()[0],
			Networks: []string{"vlan100"}, CloudInit: fixtures.CloudInit(p.Config().GuestAddr)}
		_, err := p.StartVM(ctx, spec)
		evs, everr := k.VMEvents(ctx, spec.Namespace, spec.Name)
		Expect(everr).NotTo(HaveOccurred())
		var naming []string
		for _, e := range evs {
			evidence.Note("VLAN-11", "%s %s %s: %s", e.Type, e.Object, e.Reason, e.Message)
			if e.Type == "Warning" && strings.Contains(e.Message, "vlan100") {
				naming = append(naming, e.Message)
			}
		}
		evidence.Note("VLAN-11", "StartVM in %s: %v", spec.Namespace, err)
		Expect(err).To(HaveOccurred(), "a VM whose namespace has no NAD vlan100 must not start with its VLAN NIC")
		Expect(naming).NotTo(BeEmpty(), "a Warning event about %s must name the NAD vlan100; events:\n%v", spec.Name, evs)
	})
})

var _ = Describe("Re-creating a VM on the cluster", labels.Cluster, labels.ARP, Ordered, func() {
	// "KubeVirt generates a fresh guest MAC each time the VM object is re-created."
	It("[ARP-01] gives its VLAN NIC a fresh MAC in the VMI status", labels.Claim("ARP-01"), func(ctx SpecContext) {
		p, k := kubeVMs(ctx)
		Expect(p.ApplyNAD(ctx, "tenant-example", platform.NAD{Name: "vlan100", Config: fixtures.NAD("vlan100-bridge")})).To(Succeed())
		g, err := p.StartVM(ctx, platform.VMSpec{Name: "vm-recreate", Namespace: "tenant-example", Node: p.BridgeNodes()[0],
			Networks: []string{"vlan100"}, CloudInit: fixtures.CloudInit(p.Config().GuestAddr)})
		Expect(err).NotTo(HaveOccurred())
		before, err := k.VMStatus(ctx, g)
		Expect(err).NotTo(HaveOccurred())

		g, err = platform.RecreateVM(ctx, p, g)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) { Expect(p.DeleteVM(ctx, g)).To(Succeed()) })
		after, err := k.VMStatus(ctx, g)
		Expect(err).NotTo(HaveOccurred())
		evidence.Note("ARP-01", "VM UID %s -> %s; VMI status MAC of vlan100 %s -> %s; the guest's %s has %s", before.VMUID, after.VMUID, before.VLANMAC, after.VLANMAC, g.VLANInterface(), g.MAC())
		Expect(after.VMUID).NotTo(Equal(before.VMUID), "the VirtualMachine object must really be re-created")
		Expect(after.VLANMAC.String()).NotTo(Equal(before.VLANMAC.String()), "an unpinned VLAN NIC gets a fresh MAC on re-creation")
		Expect(g.MAC().String()).To(Equal(after.VLANMAC.String()), "the guest's VLAN NIC carries the MAC of the VMI status")
	})
})

// Not labelled stager: the stager's label selects specs that need no
// platform, and this one needs a cluster.
var _ = Describe("Multus with stageCniPlugins: false", labels.Cluster, Ordered, func() {
	// "If the init container is absent from the Multus pod altogether, staging
	// is off ... nothing in this package removes or restores a plugin."
	It("[STG-09] renders no install-cni-plugins init container and leaves the node's /opt/cni/bin as it was", labels.Claim("STG-09"), func(ctx SpecContext) {
		p, err := platform.Ready(ctx)
		Expect(err).NotTo(HaveOccurred(), "building the platform")
		s, ok := platform.As[platform.CNIStaging](p)
		if !ok {
			Skip(p.Name() + " renders no Multus DaemonSet: STG-09 needs a cluster whose Multus the suite installs")
		}
		node := p.BridgeNodes()[0]
		before, err := s.CNIBin(ctx, node)
		if err != nil {
			skip.IfNotObservable(err)
		}
		Expect(err).NotTo(HaveOccurred())
		inits, err := s.SetStaging(ctx, false)
		skip.IfNotObservable(err)
		Expect(err).NotTo(HaveOccurred())
		after, err := s.CNIBin(ctx, node)
		Expect(err).NotTo(HaveOccurred())
		evidence.Note("STG-09", "Multus pod template init containers with staging off: %v", inits)
		changed := diffFiles(before, after)
		evidence.Note("STG-09", "%s:/opt/cni/bin across the roll-out: %d files before, %d after, changed: %v", node.Name(), len(before), len(after), changed)
		Expect(slices.Contains(inits, "install-cni-plugins")).To(BeFalse(), "with staging off the pod template carries no install-cni-plugins: %v", inits)
		Expect(changed).To(BeEmpty(), "nothing already staged may be removed, restored or rewritten")
	})
})

func diffFiles(before, after map[string]platform.FileState) []string {
	var out []string
	for n, b := range before {
		a, ok := after[n]
		switch {
		case !ok:
			out = append(out, "removed "+n)
		case a.SHA256 != b.SHA256 || a.Mode != b.Mode || !a.MTime.Equal(b.MTime):
			out = append(out, fmt.Sprintf("changed %s", n))
		}
	}
	for n := range after {
		if _, ok := before[n]; !ok {
			out = append(out, "added "+n)
		}
	}
	slices.Sort(out)
	return out
}
