package kubevirt

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cozystack/vlan-conformance/framework/config/configtest"
)

// The KubeVirt CR applied is the release's, with useEmulation and the
// obsolete CPU models emulation needs (where the nodes give no KVM) and
// the operator's namespace as the only changes, each in the ledger.
func TestReleaseCR(t *testing.T) {
	_, subj := configtest.ClusterRelease(t, "../../../..")
	for _, emulation := range []bool{true, false} {
		cr := ReleaseCR(subj, emulation, "test", "")
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
		_, obsolete, _ := unstructured.NestedMap(undone.Object, "spec", "configuration", "obsoleteCPUModels")
		if obsolete != emulation {
			t.Errorf("emulation %v: obsoleteCPUModels set: %v", emulation, obsolete)
		}
		unstructured.RemoveNestedField(undone.Object, "spec", "configuration", "obsoleteCPUModels")
		if d := cmp.Diff(subj.KubeVirt.CR.Object, undone.Object); d != "" {
			t.Errorf("emulation %v: more than the three changes:\n%s", emulation, d)
		}
	}
	var rows []string
	for _, c := range subj.Ledger.Changes() {
		rows = append(rows, c.Object+": "+c.What)
	}
	all := strings.Join(rows, "\n")
	for _, want := range []string{"useEmulation: true", "obsoleteCPUModels: KubeVirt's default list without kvm64", "useEmulation left unset", "metadata.namespace: cozy-kubevirt → kubevirt", "rendered → applied, in full"} {
		if !strings.Contains(all, want) {
			t.Errorf("no ledger row with %q:\n%s", want, all)
		}
	}
}

// A control's evictionStrategy replaces the release's, in the ledger; the
// suite's own CR drains by live migration as Cozystack's does, unless a
// control says otherwise.
func TestEvictionStrategyUnderAControl(t *testing.T) {
	_, subj := configtest.ClusterRelease(t, "../../../..")
	cr := ReleaseCR(subj, true, "test", "None")
	if got, _, _ := unstructured.NestedString(cr.Object, "spec", "configuration", "evictionStrategy"); got != "None" {
		t.Errorf("evictionStrategy %q, want None", got)
	}
	var rows []string
	for _, c := range subj.Ledger.Changes() {
		rows = append(rows, c.What)
	}
	if all := strings.Join(rows, "\n"); !strings.Contains(all, "evictionStrategy: LiveMigrate → None") {
		t.Errorf("no ledger row for the control's evictionStrategy:\n%s", all)
	}
	for evict, want := range map[string]string{"": "LiveMigrate", "None": "None"} {
		if got := string(*CR(true, evict).Spec.Configuration.EvictionStrategy); got != want {
			t.Errorf("own CR under %q: evictionStrategy %s, want %s", evict, got, want)
		}
	}
}
