package multus

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cozystack/vlan-conformance/framework/config/configtest"
	"github.com/cozystack/vlan-conformance/framework/cozystack"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/node"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/plan"
	"github.com/cozystack/vlan-conformance/framework/stager"
)

const localImage = configtest.LocalMultusImage

// releaseMultus is a Multus of a kind cluster whose subject is the
// verbatim Cozystack subset (skipped when it is not beside the checkout).
func releaseMultus(t *testing.T, extra ...string) *Multus {
	t.Helper()
	cfg, s := configtest.ClusterRelease(t, "../../../..", extra...)
	return New(cfg, s, nil, nil)
}

// What is applied is the chart's render with only the image references
// changed, every one of them in the ledger, plus the namespace.
func TestReleaseObjectsChangeOnlyImages(t *testing.T) {
	m := releaseMultus(t)
	objs, err := m.releaseObjects(cozystack.Unset)
	if err != nil {
		t.Fatal(err)
	}
	rendered := m.subj.Multus.Render.Objects
	if objs[0].GetKind() != "Namespace" || objs[0].GetName() != "cozy-multus" {
		t.Fatalf("first object %s %s, want the chart's namespace", objs[0].GetKind(), objs[0].GetName())
	}
	if len(objs) != len(rendered)+1 {
		t.Fatalf("%d objects applied, the chart rendered %d", len(objs), len(rendered))
	}
	for i, r := range rendered {
		a := objs[i+1]
		if r.GetKind() != "DaemonSet" {
			if d := cmp.Diff(r.Object, a.Object); d != "" {
				t.Errorf("%s %s changed:\n%s", r.GetKind(), r.GetName(), d)
			}
			continue
		}
		// Put the rendered images back: nothing else may differ.
		restored := a.DeepCopy()
		for _, field := range []string{"initContainers", "containers"} {
			want, _, _ := unstructured.NestedSlice(r.Object, "spec", "template", "spec", field)
			got, _, _ := unstructured.NestedSlice(restored.Object, "spec", "template", "spec", field)
			for j := range got {
				if img := got[j].(map[string]any)["image"]; img != localImage {
					t.Errorf("%s %v: image %v, want %s", field, got[j].(map[string]any)["name"], img, localImage)
				}
				got[j].(map[string]any)["image"] = want[j].(map[string]any)["image"]
			}
			unstructured.SetNestedSlice(restored.Object, got, "spec", "template", "spec", field)
		}
		if d := cmp.Diff(r.Object, restored.Object); d != "" {
			t.Errorf("the DaemonSet differs beyond its images:\n%s", d)
		}
	}
	images := 0
	for _, c := range m.subj.Ledger.Changes() {
		if c.Kind == "image" && strings.Contains(c.What, "→ "+localImage) {
			images++
		}
	}
	if images != 3 { // kube-multus, install-multus-binary, install-cni-plugins
		t.Errorf("%d image rewrites in the ledger, want 3:\n%s", images, m.subj.Ledger.Markdown())
	}
	if got := masterCNI(objs); got != "05-cilium.conflist" {
		t.Errorf("multusMasterCNI %q", got)
	}
}

// STG-09's cluster control: the broken copy keeps install-cni-plugins
// with staging off; the release itself drops it.
func TestStagingKeptOnCopy(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{{nil, false}, {[]string{"--control=STG-09/staging-kept-on"}, true}} {
		m := releaseMultus(t, tc.args...)
		objs, err := m.releaseObjects(cozystack.StagingValue(false))
		if err != nil {
			t.Fatal(err)
		}
		c, _, err := initContainer(objs, stager.InitContainerName)
		if err != nil {
			t.Fatal(err)
		}
		if (c != nil) != tc.want {
			t.Errorf("%v: install-cni-plugins present %v with stageCniPlugins false, want %v", tc.args, c != nil, tc.want)
		}
	}
}

// STG-11's cluster control, run by a real shell: the release's script
// unchanged, then exit 1 when it left a termination message; its own exit
// code otherwise.
func TestFailingStager(t *testing.T) {
	for _, tc := range []struct {
		script string
		want   int
	}{
		{"echo 'failed to install: vlan' > \"$MSG\"; exit 0", 1},
		{"echo staged; exit 0", 0},
		{"set -eu; false", 1},
		{"exit 3", 3},
	} {
		msg := filepath.Join(t.TempDir(), "termination-log")
		c := corev1.Container{Name: stager.InitContainerName, Command: []string{"sh", "-c", tc.script}, TerminationMessagePath: msg}
		if err := failingStager(&c); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(c.Command[0], c.Command[1:]...)
		cmd.Env = append(os.Environ(), "MSG="+msg)
		err := cmd.Run()
		got := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			got = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%q wrapped: exit %d, want %d\n%s", tc.script, got, tc.want, c.Command[2])
		}
	}
	if err := failingStager(&corev1.Container{Name: "x", Command: []string{"/install"}}); err == nil {
		t.Error("a container that runs no shell script was wrapped")
	}
}

// The control changes the release's stager container and nothing else of
// the DaemonSet.
func TestFailingStagerInRelease(t *testing.T) {
	plain, err := releaseMultus(t).releaseObjects(cozystack.Unset)
	if err != nil {
		t.Fatal(err)
	}
	broken, err := releaseMultus(t, "--control=STG-11/stager-fails-its-container").releaseObjects(cozystack.Unset)
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := initContainer(plain, stager.InitContainerName)
	if err != nil || p == nil {
		t.Fatalf("the release renders no %s: %v", stager.InitContainerName, err)
	}
	b, _, err := initContainer(broken, stager.InitContainerName)
	if err != nil || b == nil {
		t.Fatalf("the control's render has no %s: %v", stager.InitContainerName, err)
	}
	if !strings.Contains(b.Command[2], p.Command[2]) || !strings.HasSuffix(b.Command[2], "exit $rc\n") {
		t.Errorf("the control's script does not wrap the release's:\n%s", b.Command[2])
	}
	b.Command = p.Command
	if d := cmp.Diff(p, b); d != "" {
		t.Errorf("the control changed more than the script (-release +control):\n%s", d)
	}
}

// The plan's phases, in order.
func phases(m *Multus, nodes ...string) []string {
	var p plan.Plan
	m.Plan(&p, nodes, &node.Set{})
	var out []string
	for _, s := range p.Steps {
		out = append(out, s.Phase)
	}
	return out
}

// A release that stages puts the plugins on the nodes itself; one without
// staging leaves them to node provisioning, which the installer stands
// for, on every node before Multus.
func TestReleaseWithoutStagingInstallsThePluginsOnTheNodes(t *testing.T) {
	if got := strings.Join(phases(releaseMultus(t), "n1", "n2"), " "); got != "apply wait" {
		t.Errorf("a release that stages: %s", got)
	}
	rel := configtest.ReleaseWithoutStaging(t, "../../../..")
	m := releaseMultus(t, "--cozystack="+rel.Dir, "--plugin-dir=../../../config/testdata")
	if got := strings.Join(phases(m, "n1", "n2"), " "); got != "node node apply wait" {
		t.Errorf("a release without staging: %s", got)
	}
}
