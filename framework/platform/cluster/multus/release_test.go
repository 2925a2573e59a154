package multus

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/config/configtest"
	"github.com/cozystack/vlan-conformance/framework/cozystack"
)

const localImage = configtest.LocalMultusImage

// releaseMultus is a Multus of a kind cluster whose subject is the
// verbatim Cozystack subset (skipped when it is not beside the checkout).
func releaseMultus(t *testing.T, extra ...string) *Multus {
	t.Helper()
	return New(configtest.ClusterRelease(t, "../../../..", extra...), nil, nil)
}

// What is applied is the chart's render with only the image references
// changed, every one of them in the ledger, plus the namespace.
func TestReleaseObjectsChangeOnlyImages(t *testing.T) {
	m := releaseMultus(t)
	objs, err := m.releaseObjects(cozystack.Unset)
	if err != nil {
		t.Fatal(err)
	}
	rendered := m.cfg.Subject().Multus.Render.Objects
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
	for _, c := range m.cfg.Subject().Ledger.Changes() {
		if c.Kind == "image" && strings.Contains(c.What, "→ "+localImage) {
			images++
		}
	}
	if images != 3 { // kube-multus, install-multus-binary, install-cni-plugins
		t.Errorf("%d image rewrites in the ledger, want 3:\n%s", images, m.cfg.Subject().Ledger.Markdown())
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
	}{{nil, false}, {[]string{"--control=" + config.CtlStagingKeptOn}, true}} {
		m := releaseMultus(t, tc.args...)
		objs, err := m.releaseObjects(cozystack.StagingValue(false))
		if err != nil {
			t.Fatal(err)
		}
		c, _, err := initContainer(objs, stagerContainer)
		if err != nil {
			t.Fatal(err)
		}
		if (c != nil) != tc.want {
			t.Errorf("%v: install-cni-plugins present %v with stageCniPlugins false, want %v", tc.args, c != nil, tc.want)
		}
	}
}
