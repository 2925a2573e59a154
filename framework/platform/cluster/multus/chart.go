package multus

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/vlan-conformance/framework/atomicfile"
	"github.com/cozystack/vlan-conformance/framework/cozystack"
	"github.com/cozystack/vlan-conformance/framework/stager"
	"github.com/cozystack/vlan-conformance/framework/subject"
)

// With --cozystack the cluster runs the release's multus chart as its
// platform renders it: namespace, names, resources, init containers,
// script and security context untouched. Only what the offline cluster
// cannot have is changed, and each change goes into the run's ledger:
//
//	rendered chart ──image refs → the locally built multus image──▶ applied
//	               ──+ Namespace cozy-multus (Cozystack's HelmRelease makes it)
//	node /etc/cni/net.d: the pod network's conflist also under the name
//	               multusMasterCNI gives (05-cilium.conflist in Cozystack)

// releaseObjects are the release's multus objects to apply, for
// networking.stageCniPlugins s: rendered (from the control's broken copy
// under Control.StagerKeptWhenOff), then the listed rewrites.
func (m *Multus) releaseObjects(s cozystack.Staging) ([]*unstructured.Unstructured, error) {
	subj := m.subj
	rel := subj.Release
	ctl := m.cfg.SelectedControl()
	if ctl.StagerKeptWhenOff && s.Set {
		var err error
		if rel, err = m.keptOnCopy(); err != nil {
			return nil, fmt.Errorf("the control's copy of the release: %w", err)
		}
	}
	_, mu, err := rel.StagingOn(subject.DefaultVariant, s, subj.Ledger)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	nsName := ""
	for _, o := range mu.Render.Objects {
		o = o.DeepCopy()
		if o.GetNamespace() != "" {
			nsName = o.GetNamespace()
		}
		if o.GetKind() == "DaemonSet" {
			rendered := o.DeepCopy()
			if err := m.rewriteImages(o, subj.Ledger); err != nil {
				return nil, err
			}
			// The whole difference between what the chart rendered and
			// what is applied, for the report.
			why := "the image rewrites above and nothing else"
			if ctl.StagerFailsContainer {
				if err := failingStagerIn(o); err != nil {
					return nil, fmt.Errorf("the control %s: %w", ctl.ID, err)
				}
				why = "the image rewrites above and the control " + ctl.ID + "'s wrapper of the stager's script"
			}
			if v := ctl.MultusMaxUnavailable; v != "" {
				if err := rollingUpdate(o, v); err != nil {
					return nil, fmt.Errorf("the control %s: %w", ctl.ID, err)
				}
				why = "the image rewrites above and the control " + ctl.ID + "'s maxUnavailable " + v
			}
			subj.Ledger.Add(cozystack.Change{Kind: "patch", Object: fmt.Sprintf("DaemonSet %s/%s (stageCniPlugins %s)", o.GetNamespace(), o.GetName(), s), What: "rendered → applied, in full", Why: why, Diff: cmp.Diff(rendered.Object, o.Object)})
		}
		objs = append(objs, o)
	}
	if nsName != "" {
		ns := &unstructured.Unstructured{}
		ns.SetAPIVersion("v1")
		ns.SetKind("Namespace")
		ns.SetName(nsName)
		subj.Ledger.Add(cozystack.Change{Kind: "object", Object: "Namespace " + nsName, What: "created before the chart's objects", Why: "Cozystack's HelmRelease creates its target namespace; the chart has no Namespace object"})
		objs = append([]*unstructured.Unstructured{ns}, objs...)
	}
	if err := os.WriteFile(filepath.Join(m.cfg.ReportDir, "cozystack", "multus.applied-"+stagingName(s)+".yaml"), []byte(manifestOf(objs)), 0o644); err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	return objs, nil
}

func stagingName(s cozystack.Staging) string {
	if !s.Set {
		return "unset"
	}
	return fmt.Sprint(s.Value)
}

// rewriteImages points every container of the DaemonSet at the locally
// built multus image (--cni-plugins-image, the offline lane), the only
// change to it; without one the chart's references are pulled.
func (m *Multus) rewriteImages(o *unstructured.Unstructured, l *cozystack.Ledger) error {
	img := m.cfg.Cluster.CNIPluginsImage
	if img == "" {
		return nil // pulled as the chart names it
	}
	for _, field := range []string{"initContainers", "containers"} {
		cs, _, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", field)
		if err != nil {
			return err
		}
		for i, c := range cs {
			cm := c.(map[string]any)
			if old, _ := cm["image"].(string); old != img {
				cm["image"] = img
				l.Add(cozystack.Change{Kind: "image", Object: fmt.Sprintf("DaemonSet %s/%s %s %v", o.GetNamespace(), o.GetName(), strings.TrimSuffix(field, "s"), cm["name"]), What: old + " → " + img, Why: "no image registry here: the locally built multus image (its row says how it was built)"})
			}
			cs[i] = cm
		}
		if err := unstructured.SetNestedSlice(o.Object, cs, "spec", "template", "spec", field); err != nil {
			return err
		}
	}
	return nil
}

// masterCNI is the multusMasterCNI of the rendered daemon config ("" when
// it names none: Multus then takes the first conflist).
func masterCNI(objs []*unstructured.Unstructured) string {
	for _, o := range objs {
		if o.GetKind() != "ConfigMap" {
			continue
		}
		data, _, _ := unstructured.NestedStringMap(o.Object, "data")
		for _, v := range data {
			var dc struct {
				MultusMasterCNI string `json:"multusMasterCNI"`
			}
			if json.Unmarshal([]byte(v), &dc) == nil && dc.MultusMasterCNI != "" {
				return dc.MultusMasterCNI
			}
		}
	}
	return ""
}

// meetMasterCNI writes the node's pod network conflist under the name the
// chart's multusMasterCNI gives, where the node has no such file (the
// offline cluster has no Cilium): Multus delegates the pod network to it.
func (m *Multus) meetMasterCNI(master string, pids map[string]int) error {
	if master == "" {
		return nil
	}
	names := make([]string, 0, len(pids))
	for n := range pids {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		dir := fmt.Sprintf("/proc/%d/root/etc/cni/net.d", pids[n])
		if _, err := os.Stat(filepath.Join(dir, master)); err == nil {
			continue
		}
		src, err := podNetworkConf(dir, master)
		if err != nil {
			return fmt.Errorf("node %s: %w", n, err)
		}
		f, err := os.Open(filepath.Join(dir, src))
		if err != nil {
			return err
		}
		err = atomicfile.Write(filepath.Join(dir, master), f, 0o644)
		f.Close()
		if err != nil {
			return err
		}
		m.subj.Ledger.Add(cozystack.Change{Kind: "node", Object: "every node's /etc/cni/net.d", What: fmt.Sprintf("the pod network's %s also written as %s", src, master), Why: "the chart's multusMasterCNI names a CNI the offline cluster does not run"})
	}
	return nil
}

// podNetworkConf is the node's pod network conflist: the first one by name
// that is not Multus's own.
func podNetworkConf(dir, master string) (string, error) {
	es, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	for _, e := range es {
		n := e.Name()
		if e.Type().IsRegular() && (strings.HasSuffix(n, ".conflist") || strings.HasSuffix(n, ".conf")) && !strings.Contains(n, "multus") && n != master {
			return n, nil
		}
	}
	return "", fmt.Errorf("no pod network conflist in %s to stand for %s", dir, master)
}

// keptOnCopy is the control's subject: a copy of the release whose multus
// template stages whatever stageCniPlugins says (in the run's work dir).
func (m *Multus) keptOnCopy() (*cozystack.Release, error) {
	if m.keptOn != nil {
		return m.keptOn, nil
	}
	dir, err := os.MkdirTemp(m.cfg.WorkDir, "vcf-release-kept-on-")
	if err != nil {
		return nil, err
	}
	c, err := m.subj.Release.CopyTo(dir)
	if err != nil {
		return nil, err
	}
	p := c.Path(cozystack.MultusChart + "/templates/multus-daemonset-thick.yml")
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	edited := stagingIf.ReplaceAllString(string(b), "{{- if true }}")
	if edited == string(b) {
		return nil, fmt.Errorf("%s: no `if has $stageCniPlugins (list \"true\" ...)` to make unconditional", p)
	}
	if err := os.WriteFile(p, []byte(edited), 0o644); err != nil {
		return nil, err
	}
	m.keptOn = c
	return c, nil
}

var stagingIf = regexp.MustCompile(`\{\{-?\s*if\s+has\s+\$stageCniPlugins\s+\(list\s+"true"[^}]*\}\}`)

// failingStagerIn applies failingStager to the stager's init container of
// a rendered DaemonSet (none rendered: nothing to break).
func failingStagerIn(o *unstructured.Unstructured) error {
	cs, _, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "initContainers")
	if err != nil {
		return err
	}
	for i, c := range cs {
		cm, _ := c.(map[string]any)
		if cm["name"] != stager.InitContainerName {
			continue
		}
		var ct corev1.Container
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(cm, &ct); err != nil {
			return err
		}
		if err := failingStager(&ct); err != nil {
			return err
		}
		if cs[i], err = runtime.DefaultUnstructuredConverter.ToUnstructured(&ct); err != nil {
			return err
		}
	}
	return unstructured.SetNestedSlice(o.Object, cs, "spec", "template", "spec", "initContainers")
}

// failingStager is the stager of a control that fails its container
// (Control.StagerFailsContainer): its script runs
// unchanged in a subshell, then the container exits 1 when the script left
// a termination message, i.e. reported a plugin it could not write. That
// is the design the guide rejects ("failing it instead would leave the
// node unable to start any pod that goes through CNI"). The script must
// be the shell's -c argument, as a chart writes one.
func failingStager(c *corev1.Container) error {
	msg := c.TerminationMessagePath
	if msg == "" {
		msg = corev1.TerminationMessagePathDefault
	}
	wrap := func(script string) string {
		return "(\n" + script + "\n)\nrc=$?\n[ ! -s " + msg + " ] || exit 1\nexit $rc\n"
	}
	cmd := c.Command
	switch {
	case len(cmd) == 3 && cmd[1] == "-c":
		c.Command = []string{cmd[0], cmd[1], wrap(cmd[2])}
	case len(cmd) == 2 && cmd[1] == "-c" && len(c.Args) > 0:
		c.Args = append([]string{wrap(c.Args[0])}, c.Args[1:]...)
	default:
		return fmt.Errorf("%s runs %q %q, not a shell's -c script to wrap", c.Name, cmd, c.Args)
	}
	return nil
}

// initContainer is the named init container of the DaemonSet in objs.
func initContainer(objs []*unstructured.Unstructured, name string) (*corev1.Container, string, error) {
	for _, o := range objs {
		if o.GetKind() != "DaemonSet" {
			continue
		}
		var ds appsv1.DaemonSet
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &ds); err != nil {
			return nil, "", err
		}
		for i := range ds.Spec.Template.Spec.InitContainers {
			c := ds.Spec.Template.Spec.InitContainers[i]
			if c.Name == name {
				return &c, cniBinVolume(&ds.Spec.Template.Spec), nil
			}
		}
	}
	return nil, "", nil
}

func manifestOf(objs []*unstructured.Unstructured) string {
	var b strings.Builder
	for _, o := range objs {
		y, err := yaml.Marshal(o.Object)
		if err != nil {
			continue
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return b.String()
}
