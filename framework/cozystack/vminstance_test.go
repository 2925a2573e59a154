package cozystack

import (
	"reflect"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	instancetypev1beta1 "kubevirt.io/api/instancetype/v1beta1"
)

func instancetypes(t *testing.T, r *Release, p *IaaS) *Instancetypes {
	t.Helper()
	types, err := r.RenderInstancetypes(p)
	if err != nil {
		t.Fatal(err)
	}
	return types
}

func TestInstancetypes(t *testing.T) {
	r := subject(t)
	types := instancetypes(t, r, iaas(t, r, nil))
	if rel := types.Render.Release; rel.Name != "kubevirt-instancetypes" || rel.Namespace != "cozy-kubevirt" {
		t.Errorf("released as %s/%s", rel.Namespace, rel.Name)
	}
	if len(types.Instancetypes)+len(types.Preferences) != len(types.Render.Objects) || len(types.Render.Lookups) != 0 {
		t.Errorf("the chart renders more than instancetypes and preferences, or looks up: %d objects, lookups %v", len(types.Render.Objects), types.Render.Lookups)
	}
	for _, o := range types.Render.Objects {
		if o.GetAPIVersion() != "instancetype.kubevirt.io/v1beta1" || o.GetNamespace() != "" {
			t.Errorf("%s %s/%s: not a cluster-wide v1beta1 object", o.GetKind(), o.GetNamespace(), o.GetName())
		}
	}
	for _, o := range types.Preferences {
		if _, err := As[instancetypev1beta1.VirtualMachineClusterPreference](o); err != nil {
			t.Error(err)
		}
	}
	var u1 *instancetypev1beta1.VirtualMachineClusterInstancetype
	for _, o := range types.Instancetypes {
		it, err := As[instancetypev1beta1.VirtualMachineClusterInstancetype](o)
		if err != nil {
			t.Error(err)
		} else if it.Name == "u1.medium" {
			u1 = it
		}
	}
	if u1 == nil || types.Find(ClusterPreference, "ubuntu") == nil {
		t.Fatal("no u1.medium or ubuntu")
	}
	t.Logf("u1.medium: %d vCPU, %s", u1.Spec.CPU.Guest, u1.Spec.Memory.Guest.String())
	if u1.Spec.CPU.Guest == 0 || u1.Spec.Memory.Guest.IsZero() {
		t.Errorf("u1.medium has no guest cpu and memory: %+v", u1.Spec)
	}
}

func guideVM(t *testing.T) (*Release, *Guide, *IaaS, *Instancetypes, *VMRender, *Ledger) {
	t.Helper()
	r := subject(t)
	g := guide(t)
	l := &Ledger{}
	p := iaas(t, r, l)
	types := instancetypes(t, r, p)
	app, err := g.VMApp()
	if err != nil {
		t.Fatal(err)
	}
	v, err := r.RenderVMInstance(app, p, types, l)
	if err != nil {
		t.Fatalf("%v (chart: %s)", err, ChartError(err))
	}
	return r, g, p, types, v, l
}

// The guide's step 3, rendered by the release's chart: the VM the guide
// describes.
func TestVMInstanceFromGuide(t *testing.T) {
	_, g, _, _, v, _ := guideVM(t)
	nad, _ := g.NAD()
	if rel := v.Render.Release; rel.Name != "vm-instance-example" || rel.Namespace != nad.Namespace {
		t.Fatalf("released as %s/%s", rel.Namespace, rel.Name)
	}
	vm, err := v.Typed()
	if err != nil {
		t.Fatal(err)
	}
	if vm.Name != "vm-instance-example" || vm.Spec.Instancetype == nil || vm.Spec.Instancetype.Kind != ClusterInstancetype || vm.Spec.Instancetype.Name != "u1.medium" ||
		vm.Spec.Preference == nil || vm.Spec.Preference.Kind != ClusterPreference || vm.Spec.Preference.Name != "ubuntu" {
		t.Errorf("VM %s: instancetype %+v, preference %+v", vm.Name, vm.Spec.Instancetype, vm.Spec.Preference)
	}
	spec := vm.Spec.Template.Spec
	// Dual-homed, bridge binding on both, no MAC pinned (the guide's gotchas).
	var ifs []string
	for _, i := range spec.Domain.Devices.Interfaces {
		if i.Bridge == nil || i.Masquerade != nil || i.SRIOV != nil || i.Binding != nil || i.MacAddress != "" {
			t.Errorf("interface %s: not a bridge binding with a generated MAC: %+v", i.Name, i)
		}
		ifs = append(ifs, i.Name)
	}
	nets := map[string]string{}
	for _, n := range spec.Networks {
		switch {
		case n.Pod != nil:
			nets[n.Name] = "pod"
		case n.Multus != nil:
			nets[n.Name] = n.Multus.NetworkName
		}
	}
	if !reflect.DeepEqual(ifs, []string{"default", nad.Name}) || !reflect.DeepEqual(nets, map[string]string{"default": "pod", nad.Name: nad.Namespace + "/" + nad.Name}) {
		t.Errorf("interfaces %v, networks %v", ifs, nets)
	}
	// userData only, as the guide's step 3 gives it.
	var cloud, disk bool
	for _, vol := range spec.Volumes {
		if c := vol.CloudInitNoCloud; c != nil {
			cloud = c.UserDataSecretRef != nil && c.UserDataSecretRef.Name == "vm-instance-example-cloud-init" && c.NetworkData == "" && c.NetworkDataSecretRef == nil && c.NetworkDataBase64 == ""
		}
		if dv := vol.DataVolume; dv != nil {
			disk = dv.Name == "vm-disk-example-system" && vol.Name == "disk-example-system"
		}
	}
	if !cloud || !disk {
		t.Errorf("volumes %+v", spec.Volumes)
	}
	sec := v.Render.Find("Secret", "vm-instance-example-cloud-init")
	gv, _ := g.VMValues()
	if ud, _, _ := unstructured.NestedString(objectOrEmpty(sec), "stringData", "userdata"); strings.TrimSpace(ud) != strings.TrimSpace(gv.UserData()) {
		t.Errorf("the Secret's userdata is not the guide's:\n%s", ud)
	}
	var kinds []string
	for _, o := range v.Objects() {
		if o.GetNamespace() != nad.Namespace {
			t.Errorf("%s %s in %q", o.GetKind(), o.GetName(), o.GetNamespace())
		}
		kinds = append(kinds, o.GetKind())
	}
	sort.Strings(kinds)
	if want := []string{"Role", "RoleBinding", "Secret", "Service", "VirtualMachine", "WorkloadMonitor"}; !reflect.DeepEqual(kinds, want) {
		t.Errorf("objects %v, want %v (a fresh install: no update hook)", kinds, want)
	}
}

// Every lookup was answered by a recorded fake or recorded as finding
// nothing, and every fake is what the release renders or needs.
func TestVMInstanceLookups(t *testing.T) {
	_, _, _, types, v, l := guideVM(t)
	rows := map[string]bool{}
	var empty string
	obj := "chart " + VMInstance + " (release tenant-example/vm-instance-example)"
	for _, c := range l.Changes() {
		if c.Kind == "lookup" && c.Object == obj {
			rows[c.What] = true
			if strings.HasPrefix(c.What, "found nothing") {
				empty = c.What
			}
		}
	}
	if len(v.Faked) != 3 {
		t.Errorf("faked %d objects, want the instancetype, the preference and the disk's DataVolume", len(v.Faked))
	}
	for _, f := range v.Faked {
		if !rows[fakeWhat(f)] {
			t.Errorf("%s %s: faked and not in the ledger", f.GetKind(), f.GetName())
		}
		if f.GetKind() != "DataVolume" && !reflect.DeepEqual(f.Object, types.Find(f.GetKind(), f.GetName()).Object) {
			t.Errorf("%s %s: not as %s renders it", f.GetKind(), f.GetName(), InstanceTypes)
		}
	}
	for _, lk := range v.Render.Lookups {
		if lk.Found {
			found := false
			for _, f := range v.Faked {
				found = found || (f.GetKind() == lk.Kind && f.GetName() == lk.Name && f.GetNamespace() == lk.Namespace)
			}
			if !found {
				t.Errorf("%s: found, but by no recorded fake", lookupName(lk))
			}
		} else if !strings.Contains(empty, lookupName(lk)) {
			t.Errorf("%s: found nothing, and the ledger does not say so (%q)", lookupName(lk), empty)
		}
	}
}

// An instancetype the release does not ship is not faked: the chart's own
// check fails the render.
func TestVMInstanceUnknownInstancetype(t *testing.T) {
	r, g, p, types, _, _ := guideVM(t)
	app, _ := g.VMApp()
	app.Values = map[string]any{"instanceType": "u9.nope", "disks": app.Values["disks"]}
	var l Ledger
	v, err := r.RenderVMInstance(app, p, types, &l)
	if err == nil || ChartError(err) != "Specified instanceType does not exist in the cluster: u9.nope" {
		t.Fatalf("rendered: %v", err)
	}
	if len(v.Faked) != 0 {
		t.Errorf("faked %v", v.Faked)
	}
}
