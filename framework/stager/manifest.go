package stager

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// InitContainerName is the init container the multus package adds when
// networking.stageCniPlugins is on.
const InitContainerName = "install-cni-plugins"

// NodeCNIBinDir is the hostPath the subject must mount: the node's
// /opt/cni/bin.
const NodeCNIBinDir = "/opt/cni/bin"

// InitContainer is the install-cni-plugins init container as a manifest
// declares it, with the pod-level settings it inherits.
type InitContainer struct {
	Source    string // the manifest file
	Workload  string // e.g. "DaemonSet cozy-multus/cozy-multus"
	Container corev1.Container
	// PodSecurity is the pod's securityContext (uid/gid defaults).
	PodSecurity *corev1.PodSecurityContext
	// Volumes are the pod's volumes by name.
	Volumes map[string]corev1.Volume
}

// decoder reads the kinds that carry a pod template; any other kind (a
// ConfigMap's neighbours, CRDs) is not registered and passes by.
var decoder = func() runtime.Decoder {
	sch := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme} {
		if err := add(sch); err != nil {
			panic(err) // the k8s.io/api registrations, fixed at build time
		}
	}
	return serializer.NewCodecFactory(sch).UniversalDeserializer()
}()

// workload is a decoded object that carries a pod spec.
type workload struct {
	kind string
	obj  runtime.Object
	spec corev1.PodSpec
}

// workloads are the objects of one YAML or JSON document that carry a pod
// spec: a Pod, a workload's template, a CronJob's, or those of a List. It
// decodes as the API server does, so a manifest a cluster would refuse
// (no apiVersion, a number where a string goes) is refused here too.
func workloads(doc []byte) ([]workload, error) {
	obj, gvk, err := decoder.Decode(doc, nil, nil)
	switch {
	case runtime.IsNotRegisteredError(err), runtime.IsMissingKind(err):
		return nil, nil
	case runtime.IsMissingVersion(err):
		return nil, errors.New("an object without apiVersion")
	case err != nil:
		return nil, err
	}
	w := workload{kind: gvk.Kind, obj: obj}
	var tpl *corev1.PodTemplateSpec // spec.template, where the kind has one
	switch o := obj.(type) {
	case *corev1.List:
		var out []workload
		for _, item := range o.Items {
			ws, err := workloads(item.Raw)
			if err != nil {
				return nil, err
			}
			out = append(out, ws...)
		}
		return out, nil
	case *corev1.Pod:
		w.spec = o.Spec
		return []workload{w}, nil
	case *batchv1.CronJob:
		tpl = &o.Spec.JobTemplate.Spec.Template
	case *corev1.ReplicationController:
		tpl = o.Spec.Template
	case *appsv1.DaemonSet:
		tpl = &o.Spec.Template
	case *appsv1.Deployment:
		tpl = &o.Spec.Template
	case *appsv1.StatefulSet:
		tpl = &o.Spec.Template
	case *appsv1.ReplicaSet:
		tpl = &o.Spec.Template
	case *batchv1.Job:
		tpl = &o.Spec.Template
	}
	if tpl == nil {
		return nil, nil
	}
	w.spec = tpl.Spec
	return []workload{w}, nil
}

// name is "Kind namespace/name".
func (w workload) name() string {
	m, err := meta.Accessor(w.obj)
	if err != nil {
		return w.kind
	}
	return strings.TrimSpace(fmt.Sprintf("%s %s", w.kind, qualified(m.GetNamespace(), m.GetName())))
}

// LoadInitContainer reads a manifest (a rendered chart, `kubectl get ds -o
// yaml`) and returns its install-cni-plugins init container.
func LoadInitContainer(path string) (InitContainer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return InitContainer{}, fmt.Errorf("stager manifest: %w", err)
	}
	return ParseInitContainer(data, path)
}

// ParseInitContainer is LoadInitContainer on bytes; source names them in
// errors.
func ParseInitContainer(data []byte, source string) (InitContainer, error) {
	var (
		found     []InitContainer
		seenNames []string
	)
	for i, doc := range splitDocuments(string(data)) {
		if strings.TrimSpace(doc.text) == "" {
			continue
		}
		ws, err := workloads([]byte(doc.text))
		if err != nil {
			err = fmt.Errorf("%s: document %d (line %d): not valid YAML: %v", source, i+1, doc.line, err)
			if strings.Contains(doc.text, "{{") {
				err = fmt.Errorf("%w; it %s", err, unrendered)
			}
			return InitContainer{}, err
		}
		for _, w := range ws {
			for _, c := range w.spec.InitContainers {
				seenNames = append(seenNames, c.Name)
				if c.Name != InitContainerName {
					continue
				}
				s := InitContainer{
					Source:      source,
					Workload:    w.name(),
					Container:   c,
					PodSecurity: w.spec.SecurityContext,
					Volumes:     map[string]corev1.Volume{},
				}
				for _, v := range w.spec.Volumes {
					s.Volumes[v.Name] = v
				}
				found = append(found, s)
			}
		}
	}
	switch {
	case len(found) == 0 && len(seenNames) == 0:
		return InitContainer{}, fmt.Errorf("%s: no pod template with init containers; want a multus DaemonSet with the %s init container", source, InitContainerName)
	case len(found) == 0:
		return InitContainer{}, fmt.Errorf("%s: no init container named %s (init containers seen: %s); is networking.stageCniPlugins off?", source, InitContainerName, strings.Join(seenNames, ", "))
	case len(found) > 1:
		return InitContainer{}, fmt.Errorf("%s: %d init containers named %s (in %s and %s); pass a manifest with one", source, len(found), InitContainerName, found[0].Workload, found[1].Workload)
	}
	s := found[0]
	if strings.Contains(strings.Join(s.Argv(), " "), "{{") {
		return InitContainer{}, fmt.Errorf("%s: the command of %s %s", source, InitContainerName, unrendered)
	}
	if len(s.Container.Command) == 0 {
		return InitContainer{}, fmt.Errorf("%s: %s has no command: the image's entrypoint is unknown here, so it cannot be run without the image", source, InitContainerName)
	}
	if _, err := s.NodeMountPath(); err != nil {
		return InitContainer{}, fmt.Errorf("%s: %w", source, err)
	}
	return s, nil
}

// unrendered refuses a chart template passed as a manifest: the suite
// reads what Helm renders (--cozystack renders the release itself).
const unrendered = "holds template actions ({{ ... }}); render the chart (--cozystack, or `helm template`) and pass the result"

func qualified(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

// NodeMountPath is where the container mounts the node's /opt/cni/bin.
func (s InitContainer) NodeMountPath() (string, error) {
	for _, m := range s.Container.VolumeMounts {
		v, ok := s.Volumes[m.Name]
		if ok && v.HostPath != nil && strings.TrimRight(v.HostPath.Path, "/") == NodeCNIBinDir {
			return m.MountPath, nil
		}
	}
	return "", fmt.Errorf("%s mounts no hostPath volume %s", InitContainerName, NodeCNIBinDir)
}

// Argv is what the container runtime executes: command, then args.
func (s InitContainer) Argv() []string {
	return append(append([]string{}, s.Container.Command...), s.Container.Args...)
}

// TerminationMessagePath is where the kubelet reads the termination message.
func (s InitContainer) TerminationMessagePath() string {
	if s.Container.TerminationMessagePath != "" {
		return s.Container.TerminationMessagePath
	}
	return "/dev/termination-log"
}

type document struct {
	text string
	line int // first line, 1-based
}

// splitDocuments splits a YAML stream at `---` lines.
func splitDocuments(text string) []document {
	var docs []document
	var cur bytes.Buffer
	start := 1
	for i, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "---") && strings.TrimSpace(strings.TrimPrefix(l, "---")) == "" {
			docs = append(docs, document{text: cur.String(), line: start})
			cur.Reset()
			start = i + 2
			continue
		}
		cur.WriteString(l)
		cur.WriteByte('\n')
	}
	docs = append(docs, document{text: cur.String(), line: start})
	return docs
}
