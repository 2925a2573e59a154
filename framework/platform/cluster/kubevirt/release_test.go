package kubevirt

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cozystack/vlan-conformance/framework/config/configtest"
)

// The KubeVirt CR applied is the release's, with useEmulation (where the
// nodes give no KVM) and the operator's namespace as the only changes,
// both in the ledger.
func TestReleaseCR(t *testing.T) {
	cfg := configtest.ClusterRelease(t, "../../../..")
	subj := cfg.Subject()
	for _, emulation := range []bool{true, false} {
		cr := ReleaseCR(subj, emulation, "test")
		if cr.GetNamespace() != Namespace || cr.GetName() != subj.KubeVirt.CR.GetName() {
			t.Errorf("applied as %s/%s", cr.GetNamespace(), cr.GetName())
		}
		got, found, _ := unstructured.NestedBool(cr.Object, "spec", "configuration", "developerConfiguration", "useEmulation")
		if got != emulation || found != emulation {
			t.Errorf("emulation %v: useEmulation %v (set: %v)", emulation, got, found)
		}
		undone := cr.DeepCopy()
		undone.SetNamespace(subj.KubeVirt.CR.GetNamespace())
		unstructured.RemoveNestedField(undone.Object, "spec", "configuration", "developerConfiguration", "useEmulation")
		if d := cmp.Diff(subj.KubeVirt.CR.Object, undone.Object); d != "" {
			t.Errorf("emulation %v: more than the two changes:\n%s", emulation, d)
		}
	}
	var rows []string
	for _, c := range subj.Ledger.Changes() {
		rows = append(rows, c.Object+": "+c.What)
	}
	all := strings.Join(rows, "\n")
	for _, want := range []string{"useEmulation: true", "useEmulation left unset", "metadata.namespace: cozy-kubevirt → kubevirt", "rendered → applied, in full"} {
		if !strings.Contains(all, want) {
			t.Errorf("no ledger row with %q:\n%s", want, all)
		}
	}
}
