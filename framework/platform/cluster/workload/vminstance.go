package workload

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/vlan-conformance/framework/cloudinit"
	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/cozystack"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/kube"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/vm"
)

// With --cozystack a VM is the release's vm-instance chart rendered with
// the guide's step 3 values, the VM's own name, namespace, networks and
// userData set (cozystack.Guide.VMAppFor). Only what the offline lane
// cannot do as Cozystack does is changed, each change a row of the run's
// ledger, and each VM's rendered and applied objects are kept side by side
// in <report-dir>/cozystack/vms:
//
//	chart apps/vm-instance ─┬─ disk-<disk> (a CDI DataVolume) → the guest image (kernelBoot or containerDisk)
//	                        ├─ userdata + a password for the serial console
//	                        ├─ nodeSelector kubernetes.io/hostname: the spec's node
//	                        ├─ label vlan-conformance.cozystack.io/owned (cleanup)
//	                        ├─ WorkloadMonitor left out (a Cozystack CRD)
//	                        └─ Role, RoleBinding left out inside the cluster (certify's role)
//
// A VM whose MAC a spec pins (ARP-05/06) is the suite's own build
// (RenderVM): the chart has no value for it. The MAC a control gives an
// unpinned VM (ARP-07's) is patched onto the chart's render instead, as a
// MAC pool's webhook sets it on the VirtualMachine: the VM stays the
// release's.

// fromRelease tells whether spec's VM is rendered by the release's chart:
// it takes the guide's step 3 values, so not without a guide (the
// ledger says so).
func (w *Workloads) fromRelease(spec platform.VMSpec) bool {
	s := w.subj
	return s != nil && s.IaaS != nil && s.Guide != nil && spec.MAC == ""
}

// Kinds the offline cluster does not serve, left out of what is applied.
var notServed = map[string]string{
	"WorkloadMonitor": "a cozystack.io CRD of Cozystack's controller, which the offline cluster does not run; it only watches the VM",
}

// Kinds the run inside the cluster (certify) leaves out: its role grants
// no RBAC objects (suitejob.Rules), which the chart makes for Cozystack's
// dashboard.
var notGranted = map[string]string{
	"Role":        "the run inside the cluster (certify) is granted no RBAC objects; the chart's Role only lets Cozystack's dashboard read the VM's Service and WorkloadMonitor",
	"RoleBinding": "the run inside the cluster (certify) is granted no RBAC objects; the chart's RoleBinding binds the dashboard's Role to the tenant's users",
}

// releaseObjects renders spec's application and patches it for the lane.
func (w *Workloads) releaseObjects(spec platform.VMSpec, nodeName string) ([]*unstructured.Unstructured, error) {
	subj := w.subj
	app, err := subj.Guide.VMAppFor(spec.Name, spec.Namespace, spec.Networks, spec.CloudInit)
	if err != nil {
		return nil, err
	}
	// One ledger row per kind of change, not one per VM: the names a VM
	// has of its own are put back as placeholders.
	general := strings.NewReplacer(InstanceName(spec.Name), "vm-instance-<name>", spec.Namespace, "<namespace>")
	var scratch cozystack.Ledger
	rd, err := subj.Release.RenderVMInstance(app, subj.IaaS, subj.Instancetypes, &scratch)
	defer func() {
		for _, c := range scratch.Changes() {
			c.Object, c.What = general.Replace(c.Object), general.Replace(c.What)
			subj.Ledger.Add(c)
		}
	}()
	if err != nil {
		return nil, fmt.Errorf("VM %s: chart %s: %w", spec.Name, cozystack.VMInstance, err)
	}
	secret := CloudInitSecretName(spec.Name)
	var out []*unstructured.Unstructured
	var rendered, applied strings.Builder
	for _, o := range rd.Objects() {
		b, _ := yaml.Marshal(o.Object)
		fmt.Fprintf(&rendered, "---\n%s", b)
		obj := fmt.Sprintf("%s vm-instance-<name>", o.GetKind())
		why, ok := notServed[o.GetKind()]
		if !ok && w.cfg.Kubeconfig == config.InCluster {
			why, ok = notGranted[o.GetKind()]
		}
		if ok {
			scratch.Add(cozystack.Change{Kind: "object", Object: obj, What: "left out", Why: why})
			continue
		}
		before := o.DeepCopy()
		switch {
		case o.GetKind() == "VirtualMachine":
			if o, before, err = w.patchVM(o, spec, nodeName, &scratch); err != nil {
				return nil, err
			}
		case o.GetKind() == "Secret" && o.GetName() == secret:
			ud, _, _ := unstructured.NestedString(o.Object, "stringData", "userdata")
			_ = unstructured.SetNestedField(o.Object, cloudinit.WithConsolePassword(ud, w.img.Password), "stringData", "userdata")
			scratch.Add(cozystack.Change{Kind: "patch", Object: obj, What: "stringData.userdata: a password for the image's default user " + w.img.User + " appended", Why: "the serial console is the suite's only way into the guest"})
		}
		labels := o.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[kube.OwnedLabel] = "true"
		o.SetLabels(labels)
		scratch.Add(cozystack.Change{Kind: "patch", Object: "every object of chart " + cozystack.VMInstance, What: "label " + kube.OwnedLabel + ": \"true\"", Why: "the suite deletes exactly what it made, and a later run sweeps what a killed one left"})
		if d := cmp.Diff(before.Object, o.Object); d != "" {
			scratch.Add(cozystack.Change{Kind: "patch", Object: obj, What: "rendered → applied, in full (the first VM's; every VM's is in cozystack/vms)", Why: "the rows above and nothing else", Diff: general.Replace(d)})
		}
		b, _ = yaml.Marshal(o.Object)
		fmt.Fprintf(&applied, "---\n%s", b)
		out = append(out, o)
	}
	dir := filepath.Join(w.cfg.ReportDir, "cozystack", "vms", spec.Namespace)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for suffix, text := range map[string]string{"rendered": rendered.String(), "applied": applied.String()} {
		if err := os.WriteFile(filepath.Join(dir, InstanceName(spec.Name)+"."+suffix+".yaml"), []byte(text), 0o644); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// patchVM makes the rendered VirtualMachine bootable here: its
// DataVolume disks (CDI, which the lane does not run) give way to the
// guest image, and it is placed on the spec's node. Under a control that
// gives unpinned VMs a MAC (controls.Control.UnpinnedMAC) its VLAN
// interface gets it, as a MAC pool's webhook would set it. It returns the
// patched object and the rendered one as the same typed round trip gives
// it, so that their difference is the patch alone.
func (w *Workloads) patchVM(o *unstructured.Unstructured, spec platform.VMSpec, nodeName string, l *cozystack.Ledger) (patched, before *unstructured.Unstructured, err error) {
	typed, err := cozystack.As[kubevirtv1.VirtualMachine](o)
	if err != nil {
		return nil, nil, err
	}
	if before, err = kube.ToUnstructured(typed); err != nil {
		return nil, nil, err
	}
	obj := "VirtualMachine vm-instance-<name>"
	boot := "a containerDisk of " + w.img.Image
	if k, _ := w.img.KernelPaths(); k != "" {
		boot = "KubeVirt's kernelBoot from " + w.img.Image + " (its root in the initrd)"
	}
	var opts []vm.Option
	for _, v := range typed.Spec.Template.Spec.Volumes {
		if v.DataVolume != nil {
			opts = append(opts, vm.WithoutDisk(v.Name))
			l.Add(cozystack.Change{Kind: "patch", Object: obj, What: fmt.Sprintf("disk and volume %s (DataVolume %s) removed; the guest boots %s", v.Name, v.DataVolume.Name, boot), Why: "the lane runs no CDI and has no image registry: the guest image is built here and preloaded"})
		}
	}
	opts = append(opts, bootFrom(w.img))
	if o := placement(spec, nodeName); o != nil {
		opts = append(opts, o)
		if len(spec.AlsoOn) == 0 {
			l.Add(cozystack.Change{Kind: "patch", Object: obj, What: "spec.template.spec.nodeSelector kubernetes.io/hostname: <the spec's node>", Why: "a spec observes the links of the node it placed the VM on"})
		} else {
			l.Add(cozystack.Change{Kind: "patch", Object: obj, What: "spec.template.spec.affinity: required hostname in <the spec's nodes>, the first preferred", Why: "a spec that drains the VM's node (ARP-08) places it on one bridge node and leaves it free to move to another"})
		}
	}
	if mac := w.cfg.SelectedControl().VMMAC(spec.Namespace, spec.Name, spec.MAC, nil); mac != "" && len(spec.Networks) > 0 {
		opts = append(opts, vm.WithInterfaceMAC(spec.Networks[0], mac))
		l.Add(cozystack.Change{Kind: "patch", Object: obj, What: "spec.template.spec.domain.devices.interfaces[<the VLAN network>].macAddress: <derived from the namespace and name>", Why: "negative control " + w.cfg.Control + ": a MAC allocator keeping one MAC per VirtualMachine"})
	}
	for _, opt := range opts {
		opt(typed)
	}
	patched, err = kube.ToUnstructured(typed)
	return patched, before, err
}
