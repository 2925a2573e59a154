package cozystack

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// KubeVirtPackage is the Package the platform's iaas bundle renders for
// KubeVirt; its PackageSource names the kubevirt and kubevirt-instancetypes
// components' releases.
const KubeVirtPackage = "cozystack.kubevirt"

// IaaS is the platform chart rendered with the iaas bundle on, as on a
// cluster that runs VMs: what it hands the KubeVirt and vm-instance charts.
type IaaS struct {
	Render *Render
	// Cluster is _cluster of Secret cozy-system/cozystack-values, which
	// Cozystack passes to the charts it installs (valuesFrom); the kubevirt
	// and vm-instance templates fail without it.
	Cluster map[string]any
	// KubeVirtValues are spec.components.kubevirt.values of Package
	// cozystack.kubevirt (nil when it has none).
	KubeVirtValues map[string]any
}

// RenderIaaS renders packages/core/platform with the system bundle of
// variant and the iaas bundle enabled; its lookups are answered as
// RenderPlatform's are (ledger).
func (r *Release) RenderIaaS(variant string, l *Ledger) (*IaaS, error) {
	c, err := r.LoadChart(PlatformChart)
	if err != nil {
		return nil, err
	}
	src, err := sourceObject(c.Values)
	if err != nil {
		return nil, err
	}
	values := map[string]any{"bundles": map[string]any{
		"system": map[string]any{"enabled": true, "variant": variant},
		"iaas":   map[string]any{"enabled": true},
	}}
	obj := "chart " + PlatformChart
	record(l, Change{Kind: "lookup", Object: obj, What: fmt.Sprintf("a faked %s %s/%s answers its lookup", src.GetKind(), src.GetNamespace(), src.GetName()), Why: "rendered with no cluster; the chart fails without its source repository"})
	record(l, Change{Kind: "value", Object: obj, What: fmt.Sprintf("bundles.system.enabled: true, bundles.system.variant: %s, bundles.iaas.enabled: true", variant), Why: "the bundles of a cluster that runs VMs: what KubeVirt and vm-instance are rendered with"})
	rd, err := r.RenderChart(PlatformChart, platformRelease, values, src)
	recordNotFound(l, obj, rd)
	p := &IaaS{Render: rd}
	if err != nil {
		return p, err
	}
	sec := rd.Find("Secret", "cozystack-values")
	raw, _, _ := unstructured.NestedString(objectOrEmpty(sec), "stringData", "values.yaml")
	var v struct {
		Cluster map[string]any `json:"_cluster"`
	}
	if err := yaml.Unmarshal([]byte(raw), &v); err != nil || v.Cluster == nil {
		return p, fmt.Errorf("chart %s renders no _cluster in Secret cozystack-values (%v)", PlatformChart, err)
	}
	p.Cluster = v.Cluster
	pkg := rd.Find("Package", KubeVirtPackage)
	if pkg == nil {
		return p, fmt.Errorf("chart %s (variant %s, iaas on) renders no Package %s", PlatformChart, variant, KubeVirtPackage)
	}
	p.KubeVirtValues, _, _ = unstructured.NestedMap(pkg.Object, "spec", "components", "kubevirt", "values")
	return p, nil
}

func objectOrEmpty(u *unstructured.Unstructured) map[string]any {
	if u == nil {
		return map[string]any{}
	}
	return u.Object
}

// withCluster is values plus _cluster, values left as they are.
func withCluster(values map[string]any, p *IaaS) map[string]any {
	out := map[string]any{}
	for k, v := range values {
		out[k] = v
	}
	if p != nil {
		out["_cluster"] = p.Cluster
	}
	return out
}

// recordNotFound lists the lookups of rd that found nothing, as
// RenderPlatform does.
func recordNotFound(l *Ledger, object string, rd *Render) {
	if rd == nil {
		return
	}
	var empty []string
	for _, lk := range rd.Lookups {
		if !lk.Found {
			empty = append(empty, lookupName(lk))
		}
	}
	if len(empty) > 0 {
		record(l, Change{Kind: "lookup", Object: object, What: "found nothing, as on a cluster without them: " + strings.Join(dedupe(empty), ", "), Why: "rendered with no cluster; only the objects listed as faked exist"})
	}
}

// record adds c to l, if there is a ledger.
func record(l *Ledger, c Change) {
	if l != nil {
		l.Add(c)
	}
}

func lookupName(lk Lookup) string {
	return strings.TrimPrefix(fmt.Sprintf("%s %s %s/%s", lk.APIVersion, lk.Kind, lk.Namespace, lk.Name), "/")
}

// componentRelease is the release name and namespace the platform's
// PackageSource source installs component under.
func (r *Release) componentRelease(source, component string) (chartutil.ReleaseOptions, error) {
	files, _ := filepath.Glob(r.Path(PlatformChart + "/sources/*.yaml"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return chartutil.ReleaseOptions{}, err
		}
		objs, err := decode(string(b))
		if err != nil {
			return chartutil.ReleaseOptions{}, fmt.Errorf("%s: %w", f, err)
		}
		for _, o := range objs {
			if o.GetKind() != "PackageSource" || o.GetName() != source {
				continue
			}
			variants, _, _ := unstructured.NestedSlice(o.Object, "spec", "variants")
			for _, v := range variants {
				cs, _, _ := unstructured.NestedSlice(objectOf(v), "components")
				for _, c := range cs {
					name, _, _ := unstructured.NestedString(objectOf(c), "name")
					rel, _, _ := unstructured.NestedString(objectOf(c), "install", "releaseName")
					ns, _, _ := unstructured.NestedString(objectOf(c), "install", "namespace")
					if name == component && rel != "" && ns != "" {
						return chartutil.ReleaseOptions{Name: rel, Namespace: ns}, nil
					}
				}
			}
		}
	}
	return chartutil.ReleaseOptions{}, fmt.Errorf("%s/sources: no PackageSource %s installs a component %s", PlatformChart, source, component)
}

func objectOf(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// KubeVirt is packages/system/kubevirt as Cozystack renders it.
type KubeVirt struct {
	Render *Render
	CR     *unstructured.Unstructured // the KubeVirt CR, as rendered
}

// RenderKubeVirt renders the kubevirt chart with the values the platform
// gives it (Package cozystack.kubevirt, and _cluster), under the release
// its PackageSource names.
func (r *Release) RenderKubeVirt(p *IaaS, l *Ledger) (*KubeVirt, error) {
	if p == nil {
		return nil, fmt.Errorf("chart %s: no platform render to take its values from", KubeVirtChart)
	}
	rel, err := r.componentRelease(KubeVirtPackage, "kubevirt")
	if err != nil {
		return nil, err
	}
	rd, err := r.RenderChart(KubeVirtChart, rel, withCluster(p.KubeVirtValues, p))
	recordNotFound(l, "chart "+KubeVirtChart, rd)
	if err != nil {
		return &KubeVirt{Render: rd}, err
	}
	cr := rd.Find("KubeVirt", "")
	if cr == nil {
		return &KubeVirt{Render: rd}, fmt.Errorf("chart %s renders no KubeVirt", KubeVirtChart)
	}
	return &KubeVirt{Render: rd, CR: cr}, nil
}

// WithEmulation is a copy of the KubeVirt CR with
// spec.configuration.developerConfiguration.useEmulation: true, and the
// obsolete CPU models emulation needs (EmulatedObsoleteCPUModels): the
// things the suite changes in it (ledger).
func WithEmulation(cr *unstructured.Unstructured, l *Ledger) *unstructured.Unstructured {
	out := cr.DeepCopy()
	obj := fmt.Sprintf("KubeVirt %s/%s", cr.GetNamespace(), cr.GetName())
	_ = unstructured.SetNestedField(out.Object, true, "spec", "configuration", "developerConfiguration", "useEmulation")
	record(l, Change{Kind: "value", Object: obj, What: "spec.configuration.developerConfiguration.useEmulation: true", Why: "the guests run in software emulation: the nodes give them no KVM"})
	if _, set, _ := unstructured.NestedMap(out.Object, "spec", "configuration", "obsoleteCPUModels"); !set {
		models := map[string]any{}
		for m, v := range EmulatedObsoleteCPUModels {
			models[m] = v
		}
		_ = unstructured.SetNestedMap(out.Object, models, "spec", "configuration", "obsoleteCPUModels")
		record(l, Change{Kind: "value", Object: obj, What: "spec.configuration.obsoleteCPUModels: KubeVirt's default list without kvm64", Why: "in software emulation libvirt's host-model is kvm64 on some hosts (an Intel Xeon here); KubeVirt's default marks it obsolete, so no node is labelled able to take a host-model VM's live migration (NoSuitableNodesForHostModelMigration) and a drain cannot move it (ARP-08)"})
	}
	return out
}

// EmulatedObsoleteCPUModels is KubeVirt's default list of obsolete CPU
// models (virtconfig.DefaultObsoleteCPUModels) without kvm64: under
// emulation libvirt may give kvm64 as a node's host-model, and a model
// marked obsolete is never labelled migratable.
var EmulatedObsoleteCPUModels = map[string]bool{
	"486": true, "pentium": true, "pentium2": true, "pentium3": true, "pentiumpro": true,
	"coreduo": true, "n270": true, "core2duo": true, "Conroe": true, "athlon": true,
	"phenom": true, "qemu64": true, "qemu32": true, "kvm32": true,
}

// As converts a rendered object to its API type; a field that type does
// not know is an error (the render no longer matches the API the suite
// speaks).
func As[T any](u *unstructured.Unstructured) (*T, error) {
	var t T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, &t, true); err != nil {
		return nil, fmt.Errorf("%s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return &t, nil
}
