package cozystack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"sigs.k8s.io/yaml"
)

// LoadChart loads a chart of the checkout with Helm's loader. A
// dependency under charts/ that git checked out as a file holding its
// link target (a symlink on a checkout without core.symlinks, or in an
// archive that flattened it) is loaded from that target, as the symlink
// would have been.
func (r *Release) LoadChart(path string) (*chart.Chart, error) {
	dir := r.Path(path)
	links, err := linkedDependencies(dir)
	if err != nil {
		return nil, err
	}
	if len(links) == 0 {
		c, err := loader.Load(dir)
		if err != nil {
			return nil, fmt.Errorf("chart %s: %w", path, err)
		}
		return c, nil
	}
	files, err := chartFiles(dir, links)
	if err != nil {
		return nil, err
	}
	c, err := loader.LoadFiles(files)
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", path, err)
	}
	for _, target := range links {
		dep, err := loader.Load(target)
		if err != nil {
			return nil, fmt.Errorf("chart %s: its dependency at %s: %w", path, target, err)
		}
		c.AddDependency(dep)
	}
	return c, nil
}

// linkedDependencies are charts/<name> entries that are small files naming
// a chart directory: name -> the directory.
func linkedDependencies(dir string) (map[string]string, error) {
	entries, err := os.ReadDir(filepath.Join(dir, "charts"))
	if os.IsNotExist(err) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, e := range entries {
		p := filepath.Join(dir, "charts", e.Name())
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() || fi.Size() > 512 || strings.HasSuffix(e.Name(), ".tgz") {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		target := filepath.Join(filepath.Dir(p), strings.TrimSpace(string(b)))
		if _, err := os.Stat(filepath.Join(target, "Chart.yaml")); err == nil {
			out[e.Name()] = target
		}
	}
	return out, nil
}

// chartFiles are a chart directory's files, as Helm's directory loader
// reads them, without the linked dependencies.
func chartFiles(dir string, skip map[string]string) ([]*loader.BufferedFile, error) {
	var files []*loader.BufferedFile
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if fi.IsDir() {
			return nil
		}
		if name, ok := strings.CutPrefix(rel, "charts/"); ok {
			if _, linked := skip[name]; linked {
				return nil
			}
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files = append(files, &loader.BufferedFile{Name: rel, Data: b})
		return nil
	})
	return files, err
}

// Render is one chart rendered with Helm's engine: values coalesced with
// the chart's defaults and checked against its schema, as `helm template`
// does, and lookups answered from the given objects only.
type Render struct {
	Chart    string
	Release  chartutil.ReleaseOptions
	Values   map[string]any
	Lookups  []Lookup // every lookup the templates made, in order
	Manifest string   // every rendered template, in name order, as one YAML stream
	Objects  []*unstructured.Unstructured
}

// Lookup is one `lookup` call of a template and whether a faked object
// answered it.
type Lookup struct {
	APIVersion, Kind, Namespace, Name string
	Found                             bool
}

// RenderChart renders path with values, as release name/namespace; objs
// are the cluster's objects its lookups may find (faked, and listed as
// such by the caller).
func (r *Release) RenderChart(path string, rel chartutil.ReleaseOptions, values map[string]any, objs ...*unstructured.Unstructured) (*Render, error) {
	c, err := r.LoadChart(path)
	if err != nil {
		return nil, err
	}
	rel.IsInstall = true
	if rel.Revision == 0 {
		rel.Revision = 1
	}
	vals, err := chartutil.ToRenderValues(c, values, rel, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, fmt.Errorf("chart %s: values: %w", path, err)
	}
	cp := newLookups(objs)
	out, err := engine.RenderWithClientProvider(c, vals, cp)
	res := &Render{Chart: path, Release: rel, Values: values, Lookups: cp.calls()}
	if err != nil {
		return res, fmt.Errorf("chart %s: %w", path, err)
	}
	names := make([]string, 0, len(out))
	for n := range out {
		if strings.HasSuffix(n, "NOTES.txt") || strings.TrimSpace(out[n]) == "" {
			continue
		}
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", n, strings.TrimSpace(out[n]))
		docs, err := decode(out[n])
		if err != nil {
			return res, fmt.Errorf("chart %s: %s: %w", path, n, err)
		}
		res.Objects = append(res.Objects, docs...)
	}
	res.Manifest = b.String()
	return res, nil
}

// Find is the rendered object of kind and name ("" matches any name).
func (r *Render) Find(kind, name string) *unstructured.Unstructured {
	for _, o := range r.Objects {
		if o.GetKind() == kind && (name == "" || o.GetName() == name) {
			return o
		}
	}
	return nil
}

// decode splits a rendered template into objects (empty documents skipped).
func decode(s string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split("\n"+s, "\n---") {
		doc = strings.TrimSpace(doc)
		if doc == "" {
			continue
		}
		m := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out, nil
}

// lookups answers Helm's lookup function from a fake dynamic client that
// holds only the objects given (there is no cluster at render time), and
// records every call.
type lookups struct {
	client *dynamicfake.FakeDynamicClient
	log    []Lookup
}

func newLookups(objs []*unstructured.Unstructured) *lookups {
	scheme := runtime.NewScheme()
	kinds := map[schema.GroupVersionResource]string{}
	var ros []runtime.Object
	for _, o := range objs {
		gvr, _ := meta.UnsafeGuessKindToResource(o.GroupVersionKind())
		kinds[gvr] = o.GetKind() + "List"
		ros = append(ros, o.DeepCopy())
	}
	l := &lookups{client: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, kinds, ros...)}
	return l
}

func (l *lookups) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, false, err
	}
	gvr, _ := meta.UnsafeGuessKindToResource(gv.WithKind(kind))
	return recorder{l: l, gvr: gvr, kind: kind, apiVersion: apiVersion, NamespaceableResourceInterface: l.client.Resource(gvr)}, true, nil
}

func (l *lookups) calls() []Lookup { return append([]Lookup(nil), l.log...) }

// recorder is the fake's resource client, noting each Get and List.
type recorder struct {
	dynamic.NamespaceableResourceInterface
	l                *lookups
	gvr              schema.GroupVersionResource
	kind, apiVersion string
}

func (r recorder) Namespace(ns string) dynamic.ResourceInterface {
	return nsRecorder{ResourceInterface: r.NamespaceableResourceInterface.Namespace(ns), r: r, ns: ns}
}

type nsRecorder struct {
	dynamic.ResourceInterface
	r  recorder
	ns string
}

func (r recorder) Get(ctx context.Context, name string, o metav1.GetOptions, sub ...string) (*unstructured.Unstructured, error) {
	u, err := r.NamespaceableResourceInterface.Get(ctx, name, o, sub...)
	r.l.log = append(r.l.log, Lookup{APIVersion: r.apiVersion, Kind: r.kind, Name: name, Found: err == nil})
	return u, err
}

func (r recorder) List(ctx context.Context, o metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	u, err := r.NamespaceableResourceInterface.List(ctx, o)
	r.l.log = append(r.l.log, Lookup{APIVersion: r.apiVersion, Kind: r.kind, Found: err == nil && len(u.Items) > 0})
	return u, err
}

func (n nsRecorder) Get(ctx context.Context, name string, o metav1.GetOptions, sub ...string) (*unstructured.Unstructured, error) {
	u, err := n.ResourceInterface.Get(ctx, name, o, sub...)
	n.r.l.log = append(n.r.l.log, Lookup{APIVersion: n.r.apiVersion, Kind: n.r.kind, Namespace: n.ns, Name: name, Found: err == nil})
	return u, err
}

func (n nsRecorder) List(ctx context.Context, o metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	u, err := n.ResourceInterface.List(ctx, o)
	n.r.l.log = append(n.r.l.log, Lookup{APIVersion: n.r.apiVersion, Kind: n.r.kind, Namespace: n.ns, Found: err == nil && len(u.Items) > 0})
	return u, err
}
