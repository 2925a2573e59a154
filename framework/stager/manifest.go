package stager

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"
)

// InitContainerName is the init container the multus package adds when
// networking.stageCniPlugins is on.
const InitContainerName = "install-cni-plugins"

// NodeCNIBinDir is the hostPath the subject must mount: the node's
// /opt/cni/bin.
const NodeCNIBinDir = "/opt/cni/bin"

// Subject is the install-cni-plugins init container as a manifest declares
// it, with the pod-level settings it inherits.
type Subject struct {
	Source    string // the manifest file
	Workload  string // e.g. "DaemonSet cozy-multus/cozy-multus"
	Container Container
	// PodSecurity is the pod's securityContext (uid/gid defaults).
	PodSecurity *PodSecurityContext
	// Volumes are the pod's volumes by name.
	Volumes map[string]Volume
}

// podSpec is the part of a pod template the subject is found in.
type podSpec struct {
	InitContainers  []Container         `json:"initContainers"`
	Volumes         []Volume            `json:"volumes"`
	SecurityContext *PodSecurityContext `json:"securityContext"`
}

// object is just enough of a workload, a Pod or a List to find pod specs.
type object struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec struct {
		podSpec
		Template *struct {
			Spec podSpec `json:"spec"`
		} `json:"template"`
		JobTemplate *struct {
			Spec struct {
				Template struct {
					Spec podSpec `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		} `json:"jobTemplate"`
	} `json:"spec"`
	Items []object `json:"items"`
}

// podSpec is the pod template of a workload, a CronJob or a Pod.
func (o object) podSpec() (podSpec, bool) {
	switch {
	case o.Spec.Template != nil:
		return o.Spec.Template.Spec, true
	case o.Spec.JobTemplate != nil:
		return o.Spec.JobTemplate.Spec.Template.Spec, true
	case o.Kind == "Pod":
		return o.Spec.podSpec, true
	}
	return podSpec{}, false
}

// LoadSubject reads a manifest (a rendered chart, `kubectl get ds -o yaml`)
// and returns its install-cni-plugins init container.
func LoadSubject(path string) (Subject, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Subject{}, fmt.Errorf("stager manifest: %w", err)
	}
	return ParseSubject(data, path)
}

// ParseSubject is LoadSubject on bytes; source names them in errors.
func ParseSubject(data []byte, source string) (Subject, error) {
	var (
		found     []Subject
		seenNames []string
	)
	for i, doc := range splitDocuments(string(data)) {
		if strings.TrimSpace(doc.text) == "" {
			continue
		}
		var o object
		if err := yaml.Unmarshal([]byte(doc.text), &o); err != nil {
			err = fmt.Errorf("%s: document %d (line %d): not valid YAML: %v", source, i+1, doc.line, err)
			if strings.Contains(doc.text, "{{") {
				err = fmt.Errorf("%w; it %s", err, unrendered)
			}
			return Subject{}, err
		}
		objs := []object{o}
		if len(o.Items) > 0 {
			objs = o.Items
		}
		for _, o := range objs {
			ps, ok := o.podSpec()
			if !ok {
				continue
			}
			for _, c := range ps.InitContainers {
				seenNames = append(seenNames, c.Name)
				if c.Name != InitContainerName {
					continue
				}
				s := Subject{
					Source:      source,
					Workload:    strings.TrimSpace(fmt.Sprintf("%s %s", o.Kind, qualified(o.Metadata.Namespace, o.Metadata.Name))),
					Container:   c,
					PodSecurity: ps.SecurityContext,
					Volumes:     map[string]Volume{},
				}
				for _, v := range ps.Volumes {
					s.Volumes[v.Name] = v
				}
				found = append(found, s)
			}
		}
	}
	switch {
	case len(found) == 0 && len(seenNames) == 0:
		return Subject{}, fmt.Errorf("%s: no pod template with init containers; want a multus DaemonSet with the %s init container", source, InitContainerName)
	case len(found) == 0:
		return Subject{}, fmt.Errorf("%s: no init container named %s (init containers seen: %s); is networking.stageCniPlugins off?", source, InitContainerName, strings.Join(seenNames, ", "))
	case len(found) > 1:
		return Subject{}, fmt.Errorf("%s: %d init containers named %s (in %s and %s); pass a manifest with one", source, len(found), InitContainerName, found[0].Workload, found[1].Workload)
	}
	s := found[0]
	if strings.Contains(strings.Join(s.Argv(), " "), "{{") {
		return Subject{}, fmt.Errorf("%s: the command of %s %s", source, InitContainerName, unrendered)
	}
	if len(s.Container.Command) == 0 {
		return Subject{}, fmt.Errorf("%s: %s has no command: the image's entrypoint is unknown here, so it cannot be run without the image", source, InitContainerName)
	}
	if _, err := s.NodeMountPath(); err != nil {
		return Subject{}, fmt.Errorf("%s: %w", source, err)
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
func (s Subject) NodeMountPath() (string, error) {
	for _, m := range s.Container.VolumeMounts {
		v, ok := s.Volumes[m.Name]
		if ok && v.HostPath != nil && strings.TrimRight(v.HostPath.Path, "/") == NodeCNIBinDir {
			return m.MountPath, nil
		}
	}
	return "", fmt.Errorf("%s mounts no hostPath volume %s", InitContainerName, NodeCNIBinDir)
}

// Argv is what the container runtime executes: command, then args.
func (s Subject) Argv() []string {
	return append(append([]string{}, s.Container.Command...), s.Container.Args...)
}

// TerminationMessagePath is where the kubelet reads the termination message.
func (s Subject) TerminationMessagePath() string {
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
