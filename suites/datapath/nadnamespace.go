package datapath

import (
	"errors"
	"fmt"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/failures"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/run"
	"github.com/cozystack/vlan-conformance/suites/framework"
	"github.com/cozystack/vlan-conformance/suites/labels"
)

// kubeVMs returns the platform and its Kubernetes view of VMs, or skips.
func kubeVMs(ctx SpecContext, f *framework.Framework) (platform.Platform, platform.KubeVMs) {
	p, err := f.Platform(ctx)
	Expect(err).NotTo(HaveOccurred(), "building the platform")
	k, ok := platform.As[platform.KubeVMs](p)
	if !ok {
		Skip(p.Name() + " has no Kubernetes API: its VMs have no VMI status or events to judge")
	}
	return p, k
}

// A NAD is resolved by name in the VM's own namespace (CLAIMS.md VLAN-11):
// only a cluster's API server can show it, so the spec asks the platform
// for its Kubernetes view of VMs and skips where there is none (the lab).
//
//	tenant-nad:             NAD vlan100 ──▶ bridge br100 (step 1)
//	tenant-nad-without-nad: VM vm-nonad, networks: [vlan100]  ✗ no NAD here
func nadNamespaceSpecs(r *run.Run) {
	Describe("A VM in a tenant namespace without its own copy of the NAD", labels.Cluster, labels.Datapath, framework.BootsNoGuest, func() {
		f := framework.New(r, "nad")
		// "...resolves a network by name in the VM's own namespace, so one copy
		// of the NAD must exist in every tenant namespace that runs VMs on this VLAN."
		It("[VLAN-11] does not get its VLAN NIC, and the event names the missing NAD", labels.Claim("VLAN-11"), func(ctx SpecContext) {
			p, k := kubeVMs(ctx, f)
			By("the NAD exists in the tenant's namespace only")
			Expect(f.ApplyNAD(ctx, "vlan100", "vlan100-bridge")).To(Succeed())
			addr, err := f.NextAddress()
			Expect(err).NotTo(HaveOccurred())
			spec := platform.VMSpec{Name: "vm-nonad", Namespace: f.Namespace() + "-without-nad", Node: p.BridgeNodes()[0],
				Networks: []string{"vlan100"}, CloudInit: f.CloudInit(addr)}
			Expect(k.StartVMNoWait(ctx, spec)).To(Succeed())

			By("KubeVirt (an event, or the VMI's condition) or Multus reports the NAD missing in the VM's own namespace")
			var evs, naming []platform.Event
			Eventually(func() ([]platform.Event, error) {
				// A VMI that reports the VLAN interface found a NAD after
				// all: no report of a missing one will follow.
				if ifaces, err := k.VMIInterfaces(ctx, spec.Namespace, spec.Name); err == nil && slices.Contains(ifaces, "vlan100") {
					StopTrying(fmt.Sprintf("the VMI %s/%s got the interface vlan100 (status.interfaces %v): a NAD resolved in its own namespace, where KubeVirt or Multus %s (%s/vlan100)",
						spec.Namespace, spec.Name, ifaces, failures.ReportsNADMissing, spec.Namespace)).Now()
				}
				var err error
				if evs, err = k.VMEvents(ctx, spec.Namespace, spec.Name); err != nil {
					return nil, err
				}
				conds, err := k.VMIConditions(ctx, spec.Namespace, spec.Name)
				evs = append(evs, conds...)
				naming = platform.MissingNADEvents(evs, spec.Namespace, "vlan100")
				return naming, err
			}).WithContext(ctx).WithTimeout(3*time.Minute).WithPolling(2*time.Second).ShouldNot(BeEmpty(),
				"a Warning event or a False condition on the VMI, or an event on its launcher pod, %s in the VM's own namespace (%s/vlan100)", failures.ReportsNADMissing, spec.Namespace)
			for _, e := range evs {
				f.Note("%s %s %s: %s", e.Type, e.Object, e.Reason, e.Message)
			}

			By("and the VMI never reports the VLAN interface")
			if _, err := k.VMIInterfaces(ctx, spec.Namespace, spec.Name); errors.Is(err, evidence.ErrNotObservable) {
				f.Note("no VMI to read: %v", err)
				return
			}
			Consistently(func() ([]string, error) { return k.VMIInterfaces(ctx, spec.Namespace, spec.Name) }).
				WithContext(ctx).WithTimeout(20*time.Second).WithPolling(2*time.Second).ShouldNot(ContainElement("vlan100"),
				"the VMI in %s must not report the interface vlan100", spec.Namespace)
			ifaces, err := k.VMIInterfaces(ctx, spec.Namespace, spec.Name)
			f.Note("VMI %s/%s status.interfaces: %v %v", spec.Namespace, spec.Name, ifaces, err)
		})
	})
}
