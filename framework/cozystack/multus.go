package cozystack

import (
	"fmt"
	"strings"

	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The names Cozystack deploys its platform and multus under.
var (
	platformRelease = chartutil.ReleaseOptions{Name: "cozystack", Namespace: "cozy-system"}
	multusRelease   = chartutil.ReleaseOptions{Name: "multus", Namespace: "cozy-multus"}
)

// MultusPackage is the Package the platform chart renders for multus.
const MultusPackage = "cozystack.multus"

// Staging is a value of networking.stageCniPlugins on the platform: Unset,
// or the spelling a user writes (true, "yes", "Off", "maybe", ...).
type Staging struct {
	Set   bool
	Value any
}

// Unset is networking.stageCniPlugins left out.
var Unset = Staging{}

// StagingValue is networking.stageCniPlugins: v.
func StagingValue(v any) Staging { return Staging{Set: true, Value: v} }

func (s Staging) String() string {
	if !s.Set {
		return "unset"
	}
	if str, ok := s.Value.(string); ok {
		return fmt.Sprintf("%q", str)
	}
	return fmt.Sprintf("%v", s.Value)
}

// Platform is the platform chart's render for one bundle variant and one
// networking.stageCniPlugins: the multus Package and the values it hands
// the multus chart.
type Platform struct {
	Render *Render
	// MultusValues is spec.components.multus.values of Package
	// cozystack.multus: what the platform passes to packages/system/multus.
	MultusValues map[string]any
}

// RenderPlatform renders packages/core/platform with the system bundle of
// variant enabled and networking.stageCniPlugins as s, the way Cozystack's
// platform reconcile does. Its repository lookup is answered by a faked
// source object of the kind and name its own values name (ledger).
func (r *Release) RenderPlatform(variant string, s Staging, l *Ledger) (*Platform, error) {
	c, err := r.LoadChart(PlatformChart)
	if err != nil {
		return nil, err
	}
	networking := map[string]any{}
	if s.Set {
		networking["stageCniPlugins"] = s.Value
	}
	values := map[string]any{
		"bundles":    map[string]any{"system": map[string]any{"enabled": true, "variant": variant}},
		"networking": networking,
	}
	src, err := sourceObject(c.Values)
	if err != nil {
		return nil, err
	}
	if l != nil {
		l.Add(Change{Kind: "lookup", Object: "chart " + PlatformChart, What: fmt.Sprintf("a faked %s %s/%s answers its lookup", src.GetKind(), src.GetNamespace(), src.GetName()), Why: "rendered with no cluster; the chart fails without its source repository"})
		l.Add(Change{Kind: "value", Object: "chart " + PlatformChart, What: fmt.Sprintf("bundles.system.enabled: true, bundles.system.variant: %s, networking.stageCniPlugins: %s", variant, s), Why: "the platform values under test"})
	}
	rd, err := r.RenderChart(PlatformChart, platformRelease, values, src)
	if l != nil && rd != nil {
		var empty []string
		for _, lk := range rd.Lookups {
			if !lk.Found {
				empty = append(empty, strings.TrimPrefix(fmt.Sprintf("%s %s %s/%s", lk.APIVersion, lk.Kind, lk.Namespace, lk.Name), "/"))
			}
		}
		if len(empty) > 0 {
			l.Add(Change{Kind: "lookup", Object: "chart " + PlatformChart, What: "found nothing, as on a cluster without them: " + strings.Join(dedupe(empty), ", "), Why: "rendered with no cluster; only the objects listed as faked exist"})
		}
	}
	if err != nil {
		return &Platform{Render: rd}, err
	}
	pkg := rd.Find("Package", MultusPackage)
	if pkg == nil {
		return &Platform{Render: rd}, fmt.Errorf("chart %s (variant %s) renders no Package %s", PlatformChart, variant, MultusPackage)
	}
	mv, _, err := unstructured.NestedMap(pkg.Object, "spec", "components", "multus", "values")
	if err != nil {
		return &Platform{Render: rd}, fmt.Errorf("Package %s: spec.components.multus.values: %w", MultusPackage, err)
	}
	return &Platform{Render: rd, MultusValues: mv}, nil
}

func dedupe(xs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// sourceObject is the Flux source the platform chart looks up, as its own
// default values.sourceRef names it.
func sourceObject(values map[string]any) (*unstructured.Unstructured, error) {
	ref, _ := values["sourceRef"].(map[string]any)
	kind, _ := ref["kind"].(string)
	name, _ := ref["name"].(string)
	ns, _ := ref["namespace"].(string)
	if kind == "" || name == "" {
		return nil, fmt.Errorf("chart %s: values.sourceRef names no kind and name", PlatformChart)
	}
	o := &unstructured.Unstructured{}
	o.SetAPIVersion("source.toolkit.fluxcd.io/v1")
	o.SetKind(kind)
	o.SetName(name)
	o.SetNamespace(ns)
	_ = unstructured.SetNestedField(o.Object, "oci://vcf.invalid/cozystack-platform", "spec", "url")
	return o, nil
}

// Multus is packages/system/multus rendered with the values the platform
// gave it.
type Multus struct {
	Render    *Render
	DaemonSet *unstructured.Unstructured
}

// RenderMultus renders the multus chart with values (Platform.MultusValues)
// under the release name and namespace Cozystack gives it.
func (r *Release) RenderMultus(values map[string]any) (*Multus, error) {
	rd, err := r.RenderChart(MultusChart, multusRelease, values)
	if err != nil {
		return &Multus{Render: rd}, err
	}
	ds := rd.Find("DaemonSet", "")
	if ds == nil {
		return &Multus{Render: rd}, fmt.Errorf("chart %s renders no DaemonSet", MultusChart)
	}
	return &Multus{Render: rd, DaemonSet: ds}, nil
}

// InitContainers are the names of the DaemonSet's init containers.
func (m *Multus) InitContainers() []string {
	ics, _, _ := unstructured.NestedSlice(m.DaemonSet.Object, "spec", "template", "spec", "initContainers")
	var out []string
	for _, ic := range ics {
		if c, ok := ic.(map[string]any); ok {
			n, _ := c["name"].(string)
			out = append(out, n)
		}
	}
	return out
}

// StagingOn is the release's multus as the platform renders it for
// variant with s: the platform's Package, then the multus chart with its
// values. Either render's failure is returned as the chart's own error.
func (r *Release) StagingOn(variant string, s Staging, l *Ledger) (*Platform, *Multus, error) {
	p, err := r.RenderPlatform(variant, s, l)
	if err != nil {
		return p, nil, err
	}
	m, err := r.RenderMultus(p.MultusValues)
	return p, m, err
}

// ChartError is the template's own message of a render error: Helm wraps
// a `fail` as "execution error at (<template>:<line>:<col>): <message>".
func ChartError(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	if _, msg, ok := strings.Cut(s, "): "); ok && strings.Contains(s, "execution error at (") {
		return msg
	}
	return s
}

// ImageRef is one image reference of a rendered object: the container that
// names it and the reference as the release pins it.
type ImageRef struct {
	Object string // e.g. "DaemonSet cozy-multus/cozy-multus"
	Field  string // "initContainer" or "container"
	Name   string // the container's name
	Ref    string
}

// String names the container as the ledger's rows do:
// "DaemonSet cozy-multus/cozy-multus initContainer install-cni-plugins".
func (i ImageRef) String() string { return i.Object + " " + i.Field + " " + i.Name }

// Images lists every container image of the rendered objects with a pod
// template, in the render's order: what the release pins.
func (m *Multus) Images() []ImageRef {
	var out []ImageRef
	for _, o := range m.Render.Objects {
		for _, field := range []string{"initContainers", "containers"} {
			cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", field)
			for _, c := range cs {
				cm, _ := c.(map[string]any)
				ref, _ := cm["image"].(string)
				name, _ := cm["name"].(string)
				if ref == "" {
					continue
				}
				out = append(out, ImageRef{Object: fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName()), Field: strings.TrimSuffix(field, "s"), Name: name, Ref: ref})
			}
		}
	}
	return out
}
