package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/vlan-conformance/framework/config"
)

// Manifest is a release manifest of a pinned component.
type Manifest struct {
	Component string // multus, kubevirt-operator
	Version   string
	URL       string
	File      string // under --manifests-dir/<component>/<version>/
}

// Manifests the kind cluster is given, pinned by the configuration.
func Manifests(cl *config.ClusterConfig) []Manifest {
	return []Manifest{
		{Component: "multus", Version: cl.MultusVersion, File: "multus-daemonset-thick.yml",
			URL: "https://raw.githubusercontent.com/k8snetworkplumbingwg/multus-cni/" + cl.MultusVersion + "/deployments/multus-daemonset-thick.yml"},
		{Component: "kubevirt-operator", Version: cl.KubeVirtVersion, File: "kubevirt-operator.yaml",
			URL: "https://github.com/kubevirt/kubevirt/releases/download/" + cl.KubeVirtVersion + "/kubevirt-operator.yaml"},
	}
}

// Path is where the manifest is cached.
func (m Manifest) Path(dir string) string { return filepath.Join(dir, m.Component, m.Version, m.File) }

// Load reads the manifest from the cache, fetching it from its release URL
// on first use (never in an air-gapped run whose --manifests-dir has it).
func (m Manifest) Load(ctx context.Context, dir string) ([]byte, error) {
	p := m.Path(dir)
	if b, err := os.ReadFile(p); err == nil {
		return b, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.URL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: not in %s and not fetched: %w (an air-gapped run puts it there beforehand)", m.Component, m.Version, p, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: GET %s: %s", m.Component, m.Version, m.URL, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, err
	}
	return b, os.WriteFile(p, b, 0o644)
}

// Decode splits a multi-document manifest into objects.
func Decode(b []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var m map[string]any
		if err := d.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "List" {
			items, _, _ := unstructured.NestedSlice(m, "items")
			for _, it := range items {
				if im, ok := it.(map[string]any); ok {
					out = append(out, &unstructured.Unstructured{Object: im})
				}
			}
			continue
		}
		out = append(out, u)
	}
}

// KubeVirtCR is the KubeVirt custom resource the suite applies: software
// emulation when KVM is not usable, images never pulled when present (the
// offline lane preloads them).
func KubeVirtCR(emulation bool) *kubevirtv1.KubeVirt {
	kv := &kubevirtv1.KubeVirt{
		TypeMeta:   metav1.TypeMeta{APIVersion: "kubevirt.io/v1", Kind: "KubeVirt"},
		ObjectMeta: metav1.ObjectMeta{Name: kubevirtName, Namespace: kubevirtNamespace, Labels: owned()},
		Spec: kubevirtv1.KubeVirtSpec{
			ImagePullPolicy: corev1.PullIfNotPresent,
			Configuration:   kubevirtv1.KubeVirtConfiguration{DeveloperConfiguration: &kubevirtv1.DeveloperConfiguration{UseEmulation: emulation}},
		},
	}
	return kv
}

// The init container of the stager subject.
const stagerContainer = "install-cni-plugins"

// stagerInit takes the install-cni-plugins init container from the stager
// manifest (--stager-manifest) with the image given for it, mounting the
// node's /opt/cni/bin as the manifest does.
func stagerInit(manifest []byte, image string) (corev1.Container, string, error) {
	objs, err := Decode(manifest)
	if err != nil {
		return corev1.Container{}, "", err
	}
	for _, o := range objs {
		if o.GetKind() != "DaemonSet" {
			continue
		}
		var ds appsv1.DaemonSet
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &ds); err != nil {
			return corev1.Container{}, "", err
		}
		for _, c := range ds.Spec.Template.Spec.InitContainers {
			if c.Name != stagerContainer {
				continue
			}
			for _, vm := range c.VolumeMounts {
				for _, v := range ds.Spec.Template.Spec.Volumes {
					if v.Name == vm.Name && v.HostPath != nil && filepath.Clean(v.HostPath.Path) == "/opt/cni/bin" {
						if image != "" {
							c.Image = image
						}
						return c, vm.Name, nil
					}
				}
			}
			return corev1.Container{}, "", fmt.Errorf("stager manifest: %s mounts no hostPath /opt/cni/bin", stagerContainer)
		}
	}
	return corev1.Container{}, "", fmt.Errorf("stager manifest: no DaemonSet with an init container %s (staging is off in that render)", stagerContainer)
}

// withStaging renders the Multus DaemonSet as the chart does with
// networking.stageCniPlugins on (the stager's init container first, mounting
// the node's /opt/cni/bin) or off (no such init container). rev, if set,
// annotates the pod template so that the DaemonSet rolls.
func withStaging(objs []*unstructured.Unstructured, stager *corev1.Container, stagerVolume, rev string) error {
	for _, o := range objs {
		if o.GetKind() != "DaemonSet" || !strings.Contains(o.GetName(), "multus") {
			continue
		}
		var ds appsv1.DaemonSet
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &ds); err != nil {
			return err
		}
		spec := &ds.Spec.Template.Spec
		var inits []corev1.Container
		for _, c := range spec.InitContainers {
			if c.Name != stagerContainer {
				inits = append(inits, c)
			}
		}
		if stager != nil {
			c := *stager
			vol := cniBinVolume(spec)
			if vol == "" {
				vol = stagerVolume
				spec.Volumes = append(spec.Volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/opt/cni/bin"}}})
			}
			for i := range c.VolumeMounts {
				if c.VolumeMounts[i].Name == stagerVolume {
					c.VolumeMounts[i].Name = vol
				}
			}
			inits = append([]corev1.Container{c}, inits...)
		}
		spec.InitContainers = inits
		if rev != "" {
			if ds.Spec.Template.Annotations == nil {
				ds.Spec.Template.Annotations = map[string]string{}
			}
			ds.Spec.Template.Annotations["vlan-conformance.cozystack.io/staging"] = rev
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&ds)
		if err != nil {
			return err
		}
		o.Object = m
		return nil
	}
	return errors.New("no Multus DaemonSet in the manifest")
}

func cniBinVolume(spec *corev1.PodSpec) string {
	for _, v := range spec.Volumes {
		if v.HostPath != nil && filepath.Clean(v.HostPath.Path) == "/opt/cni/bin" {
			return v.Name
		}
	}
	return ""
}

// applier applies objects with server-side apply.
type applier struct {
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

func newApplier(cfg *rest.Config) (*applier, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dc, err := newDiscovery(cfg)
	if err != nil {
		return nil, err
	}
	return &applier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}, nil
}

// Apply applies objects in order. A kind the API server does not know yet
// (a CRD applied a moment ago) is retried for up to a minute.
func (a *applier) Apply(ctx context.Context, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		var mapping *meta.RESTMapping
		var err error
		for start := time.Now(); ; {
			mapping, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err == nil || !meta.IsNoMatchError(err) || time.Since(start) > time.Minute {
				break
			}
			a.mapper.Reset()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(2 * time.Second):
			}
		}
		if err != nil {
			return fmt.Errorf("apply %s %s: %w", gvk.Kind, o.GetName(), err)
		}
		var ri dynamic.ResourceInterface = a.dyn.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := o.GetNamespace()
			if ns == "" {
				ns = metav1.NamespaceDefault
			}
			ri = a.dyn.Resource(mapping.Resource).Namespace(ns)
		}
		if _, err := ri.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: "vlan-conformance", Force: true}); err != nil {
			return fmt.Errorf("apply %s %s/%s: %w", gvk.Kind, o.GetNamespace(), o.GetName(), err)
		}
	}
	return nil
}

// toUnstructured converts a typed object for the applier.
func toUnstructured(obj any) (*unstructured.Unstructured, error) {
	b, err := yaml.Marshal(obj)
	if err != nil {
		return nil, err
	}
	objs, err := Decode(b)
	if err != nil || len(objs) != 1 {
		return nil, fmt.Errorf("convert %T: %v", obj, err)
	}
	return objs[0], nil
}
