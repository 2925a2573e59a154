package stager

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
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

// Container is the subset of a Kubernetes container the run honours.
type Container struct {
	Name                     string           `json:"name"`
	Image                    string           `json:"image"`
	Command                  []string         `json:"command"`
	Args                     []string         `json:"args"`
	WorkingDir               string           `json:"workingDir"`
	Env                      []EnvVar         `json:"env"`
	SecurityContext          *SecurityContext `json:"securityContext"`
	VolumeMounts             []VolumeMount    `json:"volumeMounts"`
	TerminationMessagePath   string           `json:"terminationMessagePath"`
	TerminationMessagePolicy string           `json:"terminationMessagePolicy"`
}

// EnvVar is one environment entry; only literal values can be honoured.
type EnvVar struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	ValueFrom any    `json:"valueFrom"`
}

// SecurityContext is a container's securityContext.
type SecurityContext struct {
	RunAsUser                *int64        `json:"runAsUser"`
	RunAsGroup               *int64        `json:"runAsGroup"`
	RunAsNonRoot             *bool         `json:"runAsNonRoot"`
	Privileged               *bool         `json:"privileged"`
	AllowPrivilegeEscalation *bool         `json:"allowPrivilegeEscalation"`
	ReadOnlyRootFilesystem   *bool         `json:"readOnlyRootFilesystem"`
	Capabilities             *Capabilities `json:"capabilities"`
}

// Capabilities are added to and dropped from the runtime's default set.
type Capabilities struct {
	Add  []string `json:"add"`
	Drop []string `json:"drop"`
}

// PodSecurityContext is the pod-level securityContext.
type PodSecurityContext struct {
	RunAsUser    *int64 `json:"runAsUser"`
	RunAsGroup   *int64 `json:"runAsGroup"`
	RunAsNonRoot *bool  `json:"runAsNonRoot"`
}

// VolumeMount is one of the container's mounts.
type VolumeMount struct {
	Name      string `json:"name"`
	MountPath string `json:"mountPath"`
	ReadOnly  bool   `json:"readOnly"`
}

// Volume is a pod volume; only hostPath and emptyDir are told apart.
type Volume struct {
	Name     string    `json:"name"`
	HostPath *HostPath `json:"hostPath"`
	EmptyDir any       `json:"emptyDir"`
}

// HostPath is a hostPath volume source.
type HostPath struct {
	Path string `json:"path"`
}

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

// LoadSubject reads a manifest (a rendered chart, `kubectl get ds -o yaml`,
// or an unrendered chart template) and returns its install-cni-plugins init
// container.
func LoadSubject(path string) (Subject, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Subject{}, fmt.Errorf("stager manifest: %w", err)
	}
	return ParseSubject(data, path)
}

// templatePlaceholder stands in for an inline {{ ... }} action, so that the
// YAML around it still parses and a templated command can be recognised.
const templatePlaceholder = "__HELM_TEMPLATE__"

// ParseSubject is LoadSubject on bytes; source names them in errors.
func ParseSubject(data []byte, source string) (Subject, error) {
	text, tpl := stripTemplates(string(data))
	var (
		found     []Subject
		seenNames []string
	)
	for i, doc := range splitDocuments(text) {
		if strings.TrimSpace(doc.text) == "" {
			continue
		}
		var o object
		if err := yaml.Unmarshal([]byte(doc.text), &o); err != nil {
			hint := ""
			if len(tpl.dropped) > 0 || tpl.inline > 0 {
				hint = " (template lines were dropped before parsing; render the chart with `helm template` and pass the result)"
			}
			return Subject{}, fmt.Errorf("%s: document %d (line %d): not valid YAML: %v%s", source, i+1, doc.line, err, hint)
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
	if err := tpl.checkCommand(s.Container); err != nil {
		return Subject{}, fmt.Errorf("%s: %w", source, err)
	}
	if len(s.Container.Command) == 0 {
		return Subject{}, fmt.Errorf("%s: %s has no command: the image's entrypoint is unknown here, so it cannot be run without the image", source, InitContainerName)
	}
	if _, err := s.NodeMountPath(); err != nil {
		return Subject{}, fmt.Errorf("%s: %w", source, err)
	}
	return s, nil
}

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

// --- template tolerance ---------------------------------------------------

// directiveLine is a line holding nothing but template actions, such as
// `{{- if .Values.networking.stageCniPlugins }}` or `{{- end }}`.
var directiveLine = regexp.MustCompile(`^\s*(\{\{.*?\}\}\s*)+$`)

// inlineAction is one {{ ... }} action inside a line of YAML.
var inlineAction = regexp.MustCompile(`\{\{.*?\}\}`)

// controlAction is an action that renders no text of its own.
var controlAction = regexp.MustCompile(`^\{\{-?\s*(if|else|end|with|range|define|block|break|continue|/\*|\$[A-Za-z0-9_]*\s*:?=)`)

type droppedLine struct {
	line    int // 1-based, in the original text
	text    string
	control bool // renders no text (if/else/end/...), as opposed to include/toYaml/...
}

type templateInfo struct {
	lines   []string // the original lines
	dropped []droppedLine
	inline  int // inline actions replaced by the placeholder
}

// stripTemplates drops lines that are only template actions and replaces
// inline actions by a placeholder, keeping line numbers (dropped lines
// become empty lines).
func stripTemplates(text string) (string, templateInfo) {
	info := templateInfo{lines: strings.Split(text, "\n")}
	out := make([]string, len(info.lines))
	for i, l := range info.lines {
		switch {
		case directiveLine.MatchString(l):
			t := strings.TrimSpace(l)
			info.dropped = append(info.dropped, droppedLine{line: i + 1, text: t, control: allControl(t)})
			out[i] = ""
		case inlineAction.MatchString(l):
			info.inline += len(inlineAction.FindAllString(l, -1))
			out[i] = inlineAction.ReplaceAllString(l, templatePlaceholder)
		default:
			out[i] = l
		}
	}
	return strings.Join(out, "\n"), info
}

func allControl(line string) bool {
	for _, a := range inlineAction.FindAllString(line, -1) {
		if !controlAction.MatchString(a) {
			return false
		}
	}
	return true
}

// checkCommand refuses a container whose command or args were templated:
// the script the suite would run is not the one the chart renders.
func (t templateInfo) checkCommand(c Container) error {
	for _, a := range append(append([]string{}, c.Command...), c.Args...) {
		if strings.Contains(a, templatePlaceholder) {
			return fmt.Errorf("the command of %s contains template actions ({{ ... }}); render the chart with `helm template` and pass the result", InitContainerName)
		}
	}
	if len(t.dropped) == 0 {
		return nil
	}
	start, end, ok := containerLines(t.lines)
	if !ok {
		return nil
	}
	var field string
	fieldIndent := -1
	for i := start; i < end; i++ {
		l := t.lines[i]
		if strings.TrimSpace(l) == "" || directiveLine.MatchString(l) {
			for _, d := range t.dropped {
				if d.line != i+1 {
					continue
				}
				if field == "command" || field == "args" {
					return fmt.Errorf("line %d: template action %s inside the %s of %s; render the chart with `helm template` and pass the result", d.line, d.text, field, InitContainerName)
				}
				if !d.control {
					return fmt.Errorf("line %d: part of %s is generated by a template (%s); render the chart with `helm template` and pass the result", d.line, InitContainerName, d.text)
				}
			}
			continue
		}
		ind := indentOf(l)
		if i == start {
			// "- name: install-cni-plugins": keys sit after the dash.
			fieldIndent = ind + strings.Index(l[ind:], "name")
			field = "name"
			continue
		}
		if ind == fieldIndent {
			k := strings.TrimSpace(l)
			if j := strings.Index(k, ":"); j > 0 {
				field = k[:j]
			}
		}
	}
	return nil
}

// containerLines finds the lines of the list item `- name: install-cni-plugins`
// in the original text: [start, end).
func containerLines(lines []string) (int, int, bool) {
	item := regexp.MustCompile(`^(\s*)-\s+name:\s*["']?` + regexp.QuoteMeta(InitContainerName) + `["']?\s*$`)
	for i, l := range lines {
		m := item.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		dash := len(m[1])
		end := len(lines)
		for j := i + 1; j < len(lines); j++ {
			lj := lines[j]
			if strings.TrimSpace(lj) == "" || directiveLine.MatchString(lj) || strings.HasPrefix(strings.TrimSpace(lj), "#") {
				continue
			}
			if indentOf(lj) <= dash {
				end = j
				break
			}
		}
		return i, end, true
	}
	return 0, 0, false
}

func indentOf(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }

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
