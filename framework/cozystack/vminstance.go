package cozystack

import (
	"fmt"

	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// The names Cozystack gives a vm-instance application: its
// ApplicationDefinition (vm-instance-rd, not in a chart the suite reads)
// releases application <name> as vm-instance-<name> in the tenant's
// namespace, and the chart's fullname is then the release name.
const (
	VMInstancePrefix = "vm-instance-"
	// DefaultVMName names the guide's application when it gives bare
	// values: the guide's own names (disk example-system, namespace
	// tenant-example) use "example".
	DefaultVMName = "example"
)

// The instancetype objects the vm-instance chart looks up.
const (
	ClusterInstancetype = "VirtualMachineClusterInstancetype"
	ClusterPreference   = "VirtualMachineClusterPreference"
)

// VMApp is one vm-instance application: released as vm-instance-<Name>
// in Namespace with Values.
type VMApp struct {
	Name, Namespace string
	Values          map[string]any
	// Source says where the three came from; the ledger prints it. A
	// caller that changes any of them says so here.
	Source string
}

// Release is the Helm release Cozystack installs the application as.
func (a VMApp) Release() chartutil.ReleaseOptions {
	return chartutil.ReleaseOptions{Name: VMInstancePrefix + a.Name, Namespace: a.Namespace}
}

// VMApp is the guide's step 3 application. Without a manifest's
// metadata it is DefaultVMName in the namespace of step 2's NAD, which
// is where the chart resolves its networks (<namespace>/<network>).
func (g *Guide) VMApp() (VMApp, error) {
	v, err := g.VMValues()
	if err != nil {
		return VMApp{}, err
	}
	a := VMApp{Name: v.Name, Namespace: v.Namespace, Values: v.Values}
	a.Source = fmt.Sprintf("the guide's vm-instance values (line %d)", v.Block.Line)
	if a.Name == "" {
		a.Name = DefaultVMName
		a.Source += "; name " + a.Name + ", the guide naming none"
	}
	if a.Namespace == "" {
		nad, err := g.NAD()
		if err != nil || nad.Namespace == "" {
			return a, fmt.Errorf("the guide gives the vm-instance application no namespace, nor its NAD one (%v)", err)
		}
		a.Namespace = nad.Namespace
		a.Source += "; namespace " + a.Namespace + ", its NAD's"
	}
	return a, nil
}

// Instancetypes is packages/system/kubevirt-instancetypes rendered: the
// cluster-wide instancetypes and preferences, to be applied before any VM.
type Instancetypes struct {
	Render        *Render
	Instancetypes []*unstructured.Unstructured
	Preferences   []*unstructured.Unstructured
}

// RenderInstancetypes renders the chart under the release its
// PackageSource names, with _cluster as Cozystack passes it (p may be nil).
func (r *Release) RenderInstancetypes(p *IaaS) (*Instancetypes, error) {
	rel, err := r.componentRelease(KubeVirtPackage, "kubevirt-instancetypes")
	if err != nil {
		return nil, err
	}
	rd, err := r.RenderChart(InstanceTypes, rel, withCluster(nil, p))
	t := &Instancetypes{Render: rd}
	if err != nil {
		return t, err
	}
	for _, o := range rd.Objects {
		switch o.GetKind() {
		case ClusterInstancetype:
			t.Instancetypes = append(t.Instancetypes, o)
		case ClusterPreference:
			t.Preferences = append(t.Preferences, o)
		}
	}
	if len(t.Instancetypes) == 0 || len(t.Preferences) == 0 {
		return t, fmt.Errorf("chart %s renders %d instancetypes and %d preferences", InstanceTypes, len(t.Instancetypes), len(t.Preferences))
	}
	return t, nil
}

// Find is the instancetype or preference (kind) named name.
func (t *Instancetypes) Find(kind, name string) *unstructured.Unstructured {
	for _, o := range append(append([]*unstructured.Unstructured{}, t.Instancetypes...), t.Preferences...) {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// VMRender is a vm-instance application as the chart renders it.
type VMRender struct {
	App    VMApp
	Render *Render
	// Faked are the objects that answered its lookups (ledger).
	Faked []*unstructured.Unstructured
	VM    *unstructured.Unstructured
}

// RenderVMInstance renders packages/apps/vm-instance for app, with
// _cluster from p. Its lookups find the instancetype and preference the
// values name, as types renders them (none when types is nil), and a
// DataVolume vm-disk-<name> per disk; nothing else exists. Each is
// recorded in l.
func (r *Release) RenderVMInstance(app VMApp, p *IaaS, types *Instancetypes, l *Ledger) (*VMRender, error) {
	if p == nil {
		return nil, fmt.Errorf("chart %s: no platform render to take _cluster from", VMInstance)
	}
	rel := app.Release()
	c, err := r.LoadChart(VMInstance)
	if err != nil {
		return nil, err
	}
	// What the chart will look up follows from its defaults under app's.
	eff, err := chartutil.CoalesceValues(c, app.Values)
	if err != nil {
		return nil, fmt.Errorf("chart %s: values: %w", VMInstance, err)
	}
	var fakes []*unstructured.Unstructured
	for _, k := range [][2]string{{ClusterInstancetype, "instanceType"}, {ClusterPreference, "instanceProfile"}} {
		if name, _ := eff[k[1]].(string); name != "" && types != nil {
			if o := types.Find(k[0], name); o != nil {
				fakes = append(fakes, o.DeepCopy())
			}
		}
	}
	disks, _ := eff["disks"].([]any)
	for _, d := range disks {
		if name, _ := objectOf(d)["name"].(string); name != "" {
			fakes = append(fakes, dataVolume(rel.Namespace, "vm-disk-"+name))
		}
	}
	obj := fmt.Sprintf("chart %s (release %s/%s)", VMInstance, rel.Namespace, rel.Name)
	record(l, Change{Kind: "value", Object: obj, What: app.Source + "; _cluster of the platform's Secret cozystack-values", Why: "the guide's application, released as Cozystack releases it (vm-instance-<name> in the tenant's namespace)"})
	rd, err := r.RenderChart(VMInstance, rel, withCluster(app.Values, p), fakes...)
	v := &VMRender{App: app, Render: rd}
	if rd != nil {
		for _, f := range fakes {
			if !lookedUp(rd, f) {
				continue
			}
			v.Faked = append(v.Faked, f)
			record(l, Change{Kind: "lookup", Object: obj, What: fakeWhat(f), Why: "rendered with no cluster; the chart fails unless the objects its values name exist"})
		}
	}
	recordNotFound(l, obj, rd)
	if err != nil {
		return v, err
	}
	if v.VM = rd.Find("VirtualMachine", ""); v.VM == nil {
		return v, fmt.Errorf("chart %s renders no VirtualMachine", VMInstance)
	}
	return v, nil
}

// dataVolume is the DataVolume of the vm-disk application a disk names
// (packages/apps/vm-disk, which the suite does not render), as its chart
// renders it for optical: false: the vm-instance chart reads its
// annotations, and fails when it has none.
func dataVolume(ns, name string) *unstructured.Unstructured {
	o := &unstructured.Unstructured{}
	o.SetAPIVersion("cdi.kubevirt.io/v1beta1")
	o.SetKind("DataVolume")
	o.SetNamespace(ns)
	o.SetName(name)
	o.SetAnnotations(map[string]string{OpticalAnnotation: "false"})
	return o
}

// OpticalAnnotation on a DataVolume makes the chart attach it as a cdrom.
const OpticalAnnotation = "vm-disk.cozystack.io/optical"

func fakeWhat(f *unstructured.Unstructured) string {
	if f.GetKind() == "DataVolume" {
		return fmt.Sprintf("a faked DataVolume %s/%s answers its lookup: metadata only, %s: \"false\" as the vm-disk chart sets it", f.GetNamespace(), f.GetName(), OpticalAnnotation)
	}
	return fmt.Sprintf("a faked %s %s answers its lookup: the object %s renders", f.GetKind(), f.GetName(), InstanceTypes)
}

// lookedUp tells whether a lookup of rd found f.
func lookedUp(rd *Render, f *unstructured.Unstructured) bool {
	for _, lk := range rd.Lookups {
		if lk.Found && lk.APIVersion == f.GetAPIVersion() && lk.Kind == f.GetKind() && lk.Namespace == f.GetNamespace() && lk.Name == f.GetName() {
			return true
		}
	}
	return false
}

// Objects are the rendered objects in the release's namespace, as Helm
// installs them (the chart names none; all it renders is namespaced).
func (v *VMRender) Objects() []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range v.Render.Objects {
		o = o.DeepCopy()
		if o.GetNamespace() == "" {
			o.SetNamespace(v.Render.Release.Namespace)
		}
		out = append(out, o)
	}
	return out
}

// Typed is the VirtualMachine as kubevirt.io/api reads it.
func (v *VMRender) Typed() (*kubevirtv1.VirtualMachine, error) {
	return As[kubevirtv1.VirtualMachine](v.VM)
}

// VMAppFor is the guide's application as a run deploys one of its VMs:
// the guide's values, with what each VM of the run has of its own set
// (name, namespace, its networks, its userData). Source says which.
func (g *Guide) VMAppFor(name, namespace string, networks []string, userData string) (VMApp, error) {
	v, err := g.VMValues()
	if err != nil {
		return VMApp{}, err
	}
	values := map[string]any{}
	for k, x := range v.Values {
		values[k] = x
	}
	nets := make([]any, 0, len(networks))
	for _, n := range networks {
		nets = append(nets, map[string]any{"name": n})
	}
	values["networks"] = nets
	values["cloudInit"] = userData
	return VMApp{Name: name, Namespace: namespace, Values: values,
		Source: fmt.Sprintf("the guide's vm-instance values (line %d), with each VM's own name, namespace, networks and cloudInit (the guide's, at the VM's own address) set by the suite", v.Block.Line)}, nil
}
