package workload

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/config/configtest"
	"github.com/cozystack/vlan-conformance/framework/cozystack"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/kube"
	"github.com/cozystack/vlan-conformance/framework/subject"
)

// releaseWorkloads are the workloads of a VM lane whose subject is the
// verbatim Cozystack subset (skipped when it is not beside the checkout).
func releaseWorkloads(t *testing.T, extra ...string) *Workloads {
	t.Helper()
	cfg, s := configtest.ClusterRelease(t, "../../../..", extra...)
	return New(cfg, s, nil, t.TempDir(), nil, nil, nil, nil, nil)
}

// A VM of the lane is the chart's render of the guide's values with the
// VM's own name, namespace, networks and userData, and nothing else
// changed but the listed patches: the disk, the node, the console
// password, the ownership label, and the WorkloadMonitor left out.
func TestReleaseVMChangesOnlyWhatIsListed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{"containerDisk", nil},
		{"kernelBoot", []string{"--guest-image=localhost/vcf/guest:test", "--guest-kernel-boot=/boot/vmlinuz:/boot/initrd.img"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := releaseWorkloads(t, tc.flags...)
			subj := w.subj
			userData := subj.UserData("203.0.113.21/24")
			spec := platform.VMSpec{Name: "vm-a", Namespace: "tenant-vlan", Networks: []string{"vlan100"}, CloudInit: userData}
			objs, err := w.releaseObjects(spec, "vcf-worker2")
			if err != nil {
				t.Fatal(err)
			}
			var kinds []string
			var vmObj, secret *unstructured.Unstructured
			for _, o := range objs {
				kinds = append(kinds, o.GetKind())
				if o.GetLabels()[kube.OwnedLabel] != "true" || o.GetNamespace() != spec.Namespace {
					t.Errorf("%s %s: labels %v, namespace %q", o.GetKind(), o.GetName(), o.GetLabels(), o.GetNamespace())
				}
				switch o.GetKind() {
				case "VirtualMachine":
					vmObj = o
				case "Secret":
					secret = o
				}
			}
			sort.Strings(kinds)
			if want := []string{"Role", "RoleBinding", "Secret", "Service", "VirtualMachine"}; !slices.Equal(kinds, want) {
				t.Fatalf("applied %v, want %v (the WorkloadMonitor left out)", kinds, want)
			}
			if ud, _, _ := unstructured.NestedString(secret.Object, "stringData", "userdata"); !strings.HasPrefix(ud, strings.TrimSuffix(userData, "\n")) || !strings.Contains(ud, "203.0.113.21/24") || !strings.Contains(ud, "password: "+w.img.Password) {
				t.Errorf("userdata is not the guide's at the VM's address plus the console password:\n%s", ud)
			}

			// The applied VM, its listed patches undone, is the render.
			vm, err := cozystack.As[kubevirtv1.VirtualMachine](vmObj)
			if err != nil {
				t.Fatal(err)
			}
			s := &vm.Spec.Template.Spec
			if vm.Spec.Instancetype == nil || vm.Spec.Instancetype.Name != "u1.medium" || vm.Spec.Preference == nil || vm.Spec.Preference.Name != "ubuntu" {
				t.Errorf("instancetype %+v, preference %+v: not the guide's", vm.Spec.Instancetype, vm.Spec.Preference)
			}
			if s.NodeSelector["kubernetes.io/hostname"] != "vcf-worker2" {
				t.Errorf("nodeSelector %v", s.NodeSelector)
			}
			for _, v := range s.Volumes {
				if v.DataVolume != nil {
					t.Errorf("volume %s is still a DataVolume", v.Name)
				}
			}
			if k, _ := w.img.KernelPaths(); k != "" {
				if s.Domain.Firmware == nil || s.Domain.Firmware.KernelBoot == nil || s.Domain.Firmware.KernelBoot.Container.Image != w.img.Image {
					t.Errorf("no kernelBoot from %s: %+v", w.img.Image, s.Domain.Firmware)
				}
				s.Domain.Firmware.KernelBoot = nil
			} else {
				s.Domain.Devices.Disks = slices.DeleteFunc(s.Domain.Devices.Disks, func(d kubevirtv1.Disk) bool { return d.Name == "disk-system" })
				s.Volumes = slices.DeleteFunc(s.Volumes, func(v kubevirtv1.Volume) bool { return v.Name == "disk-system" })
			}
			s.NodeSelector = nil
			delete(vm.Labels, kube.OwnedLabel)

			rd, err := subj.Release.RenderVMInstance(mustApp(t, subj, spec), subj.IaaS, subj.Instancetypes, nil)
			if err != nil {
				t.Fatal(err)
			}
			want, err := rd.Typed()
			if err != nil {
				t.Fatal(err)
			}
			want.Namespace = spec.Namespace
			ws := &want.Spec.Template.Spec
			ws.Domain.Devices.Disks = slices.DeleteFunc(ws.Domain.Devices.Disks, func(d kubevirtv1.Disk) bool { return d.Name == "disk-example-system" })
			ws.Volumes = slices.DeleteFunc(ws.Volumes, func(v kubevirtv1.Volume) bool { return v.Name == "disk-example-system" })
			if d := cmp.Diff(want, vm); d != "" {
				t.Errorf("the applied VM differs from the render by more than the listed patches:\n%s", d)
			}

			// The ledger lists each patch once, in general terms, and the
			// artifacts hold both sides.
			var rows []string
			for _, c := range subj.Ledger.Changes() {
				rows = append(rows, c.Kind+" "+c.Object+": "+c.What)
				if strings.Contains(c.Object+c.What+c.Diff, spec.Namespace) || strings.Contains(c.Object+c.What, "vm-instance-vm-a") {
					t.Errorf("a ledger row names this VM rather than every VM: %s", c.Object+": "+c.What)
				}
			}
			all := strings.Join(rows, "\n")
			for _, want := range []string{"WorkloadMonitor vm-instance-<name>: left out", "(DataVolume vm-disk-example-system) removed", "nodeSelector kubernetes.io/hostname", "a password for the image's default user", "label " + kube.OwnedLabel, "VirtualMachine vm-instance-<name>: rendered → applied", "a faked DataVolume <namespace>/vm-disk-example-system"} {
				if !strings.Contains(all, want) {
					t.Errorf("the ledger has no row with %q:\n%s", want, all)
				}
			}
			for _, side := range []string{"rendered", "applied"} {
				b, err := os.ReadFile(filepath.Join(w.cfg.ReportDir, "cozystack", "vms", spec.Namespace, "vm-instance-vm-a."+side+".yaml"))
				if err != nil || !strings.Contains(string(b), "kind: VirtualMachine") {
					t.Errorf("artifact %s: %v", side, err)
				}
				t.Logf("%s:\n%s", side, b)
			}
		})
	}
}

// Inside the cluster (certify) the run's role grants no RBAC objects: the
// chart's Role and RoleBinding, Cozystack's dashboard's, are left out, and
// the ledger says so; the VM, its Secret and Service are applied as ever.
func TestInsideTheClusterTheChartsRBACIsLeftOut(t *testing.T) {
	w := releaseWorkloads(t)
	w.cfg.Kubeconfig = config.InCluster
	spec := platform.VMSpec{Name: "vm-a", Namespace: "tenant-vlan", Networks: []string{"vlan100"}, CloudInit: w.subj.UserData("203.0.113.21/24")}
	objs, err := w.releaseObjects(spec, "vcf-worker2")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind())
	}
	sort.Strings(kinds)
	if want := []string{"Secret", "Service", "VirtualMachine"}; !slices.Equal(kinds, want) {
		t.Errorf("applied %v, want %v", kinds, want)
	}
	var rows []string
	for _, c := range w.subj.Ledger.Changes() {
		rows = append(rows, c.Object+": "+c.What)
	}
	for _, want := range []string{"Role vm-instance-<name>: left out", "RoleBinding vm-instance-<name>: left out"} {
		if !slices.Contains(rows, want) {
			t.Errorf("the ledger has no row %q: %q", want, rows)
		}
	}
}

func mustApp(t *testing.T, subj *subject.Subject, spec platform.VMSpec) cozystack.VMApp {
	t.Helper()
	app, err := subj.Guide.VMAppFor(spec.Name, spec.Namespace, spec.Networks, spec.CloudInit)
	if err != nil {
		t.Fatal(err)
	}
	return app
}

// A release without a guide has no step 3 values to render its chart
// with: every VM is then the suite's own, and the ledger says so.
func TestReleaseWithoutAGuideRendersTheSuitesVM(t *testing.T) {
	rel := configtest.Release(t, "../../../..")
	if err := os.Remove(rel.Path(cozystack.GuidePath)); err != nil {
		t.Fatal(err)
	}
	w := releaseWorkloads(t, "--cozystack="+rel.Dir)
	subj := w.subj
	if subj.Guide != nil || subj.IaaS == nil {
		t.Fatalf("a VM lane without a guide: guide %v, iaas render %v", subj.Guide, subj.IaaS != nil)
	}
	if w.fromRelease(platform.VMSpec{Name: "vm-a", Namespace: "tenant-vlan", Networks: []string{"vlan100"}}) {
		t.Error("a VM is rendered with the release's chart, which needs the guide's step 3 values")
	}
	if !slices.ContainsFunc(subj.Ledger.Changes(), func(c cozystack.Change) bool {
		return c.Object == "every VM" && strings.Contains(c.Why, subject.NoGuide)
	}) {
		t.Errorf("the ledger does not say the VMs are the suite's own: %+v", subj.Ledger.Changes())
	}
}
