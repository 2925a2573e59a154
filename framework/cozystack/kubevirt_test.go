package cozystack

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

func iaas(t *testing.T, r *Release, l *Ledger) *IaaS {
	t.Helper()
	p, err := r.RenderIaaS("isp-full-generic", l)
	if err != nil {
		t.Fatalf("%v (chart: %s)", err, ChartError(err))
	}
	return p
}

// The platform hands KubeVirt its own resources.cpuAllocationRatio, and
// every chart the _cluster of its cozystack-values Secret.
func TestIaaS(t *testing.T) {
	r := subject(t)
	p := iaas(t, r, nil)
	c, err := r.LoadChart(PlatformChart)
	if err != nil {
		t.Fatal(err)
	}
	ratio, _, _ := unstructured.NestedFieldNoCopy(c.Values, "resources", "cpuAllocationRatio")
	if ratio == nil || !reflect.DeepEqual(p.KubeVirtValues, map[string]any{"cpuAllocationRatio": ratio}) {
		t.Errorf("Package %s values %v; the platform's resources.cpuAllocationRatio is %v", KubeVirtPackage, p.KubeVirtValues, ratio)
	}
	if p.Cluster["bundle-name"] != "isp-full-generic" {
		t.Errorf("_cluster %v", p.Cluster)
	}
}

func kubeVirt(t *testing.T) (*KubeVirt, *kubevirtv1.KubeVirt) {
	t.Helper()
	r := subject(t)
	var l Ledger
	kv, err := r.RenderKubeVirt(iaas(t, r, &l), &l)
	if err != nil {
		t.Fatalf("%v (chart: %s)", err, ChartError(err))
	}
	typed, err := As[kubevirtv1.KubeVirt](kv.CR)
	if err != nil {
		t.Fatal(err)
	}
	return kv, typed
}

func TestKubeVirtCR(t *testing.T) {
	kv, cr := kubeVirt(t)
	if rel := kv.Render.Release; rel.Name != "kubevirt" || rel.Namespace != "cozy-kubevirt" || cr.Namespace != "cozy-kubevirt" || cr.Name != "kubevirt" {
		t.Errorf("release %s/%s, CR %s/%s", rel.Namespace, rel.Name, cr.Namespace, cr.Name)
	}
	cfg := cr.Spec.Configuration
	if cfg.EvictionStrategy == nil || *cfg.EvictionStrategy != kubevirtv1.EvictionStrategyLiveMigrate {
		t.Errorf("evictionStrategy %v", cfg.EvictionStrategy)
	}
	if cfg.VMRolloutStrategy == nil || *cfg.VMRolloutStrategy != kubevirtv1.VMRolloutStrategyLiveUpdate {
		t.Errorf("vmRolloutStrategy %v", cfg.VMRolloutStrategy)
	}
	// KubeVirt deploys no instancetypes: the suite applies the release's.
	if d := cfg.CommonInstancetypesDeployment; d == nil || d.Enabled == nil || *d.Enabled {
		t.Errorf("commonInstancetypesDeployment %+v", d)
	}
	dev := cfg.DeveloperConfiguration
	if dev == nil || dev.UseEmulation || dev.CPUAllocationRatio != 10 {
		t.Fatalf("developerConfiguration %+v", dev)
	}
	if want := []string{"HotplugVolumes", "ExpandDisks", "LiveMigration", "AutoResourceLimitsGate", "CPUManager", "GPU", "VMExport"}; !reflect.DeepEqual(dev.FeatureGates, want) {
		t.Errorf("featureGates %v, want %v", dev.FeatureGates, want)
	}
	if m := cr.Spec.WorkloadUpdateStrategy.WorkloadUpdateMethods; !reflect.DeepEqual(m, []kubevirtv1.WorkloadUpdateMethod{kubevirtv1.WorkloadUpdateMethodLiveMigrate, kubevirtv1.WorkloadUpdateMethodEvict}) {
		t.Errorf("workloadUpdateMethods %v", m)
	}
}

// WithEmulation changes a copy, in useEmulation and the obsolete CPU
// models (kvm64 no longer among them), and says so, each in the ledger.
func TestWithEmulation(t *testing.T) {
	kv, _ := kubeVirt(t)
	before := kv.CR.DeepCopy()
	var l Ledger
	out := WithEmulation(kv.CR, &l)
	if !reflect.DeepEqual(kv.CR.Object, before.Object) {
		t.Fatal("the rendered CR was changed")
	}
	typed, err := As[kubevirtv1.KubeVirt](out)
	if err != nil || !typed.Spec.Configuration.DeveloperConfiguration.UseEmulation {
		t.Fatalf("useEmulation not set: %v", err)
	}
	if m := typed.Spec.Configuration.ObsoleteCPUModels; !m["qemu64"] || m["kvm64"] || len(m) != len(EmulatedObsoleteCPUModels) {
		t.Errorf("obsoleteCPUModels %v, want KubeVirt's default without kvm64", m)
	}
	unstructured.RemoveNestedField(out.Object, "spec", "configuration", "developerConfiguration", "useEmulation")
	unstructured.RemoveNestedField(out.Object, "spec", "configuration", "obsoleteCPUModels")
	if !reflect.DeepEqual(out.Object, before.Object) {
		t.Error("WithEmulation changed more than useEmulation and obsoleteCPUModels")
	}
	cs := l.Changes()
	if len(cs) != 2 || cs[0].Kind != "value" || cs[0].Object != "KubeVirt cozy-kubevirt/kubevirt" || !strings.Contains(cs[0].What, "useEmulation: true") || !strings.Contains(cs[1].What, "without kvm64") {
		t.Errorf("ledger %+v", cs)
	}
}

// As refuses a field the API type does not have.
func TestAsStrict(t *testing.T) {
	kv, _ := kubeVirt(t)
	o := kv.CR.DeepCopy()
	_ = unstructured.SetNestedField(o.Object, "x", "spec", "configuration", "noSuchField")
	if _, err := As[kubevirtv1.KubeVirt](o); err == nil || !strings.Contains(err.Error(), "noSuchField") {
		t.Errorf("got %v", err)
	}
}
