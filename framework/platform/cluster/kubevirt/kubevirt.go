// Package kubevirt is KubeVirt on the cluster tier: the operator from its
// release manifest, the KubeVirt CR (software emulation where KVM is not
// usable, found by running a test guest), and its readiness.
package kubevirt

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/cozystack"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/kube"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/plan"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/wait"
	"github.com/cozystack/vlan-conformance/framework/subject"
)

// Where the KubeVirt CR lives once applied.
const (
	Namespace = "kubevirt"
	Name      = "kubevirt"
)

// Manifest is the pinned KubeVirt operator release manifest.
func Manifest(cl *config.ClusterConfig) kube.Manifest {
	return kube.Manifest{Component: "kubevirt-operator", Version: cl.KubeVirtVersion, File: "kubevirt-operator.yaml",
		URL: "https://github.com/kubevirt/kubevirt/releases/download/" + cl.KubeVirtVersion + "/kubevirt-operator.yaml"}
}

// CR is the KubeVirt custom resource the suite applies: software
// emulation when KVM is not usable, images never pulled when present (the
// offline lane preloads them), a drain live-migrating VMs as Cozystack's
// CR has it (evict, when set, is the strategy instead).
func CR(emulation bool, evict string) *kubevirtv1.KubeVirt {
	strategy := kubevirtv1.EvictionStrategyLiveMigrate
	if evict != "" {
		strategy = kubevirtv1.EvictionStrategy(evict)
	}
	cr := &kubevirtv1.KubeVirt{
		TypeMeta:   metav1.TypeMeta{APIVersion: "kubevirt.io/v1", Kind: "KubeVirt"},
		ObjectMeta: metav1.ObjectMeta{Name: Name, Namespace: Namespace, Labels: kube.Owned()},
		Spec: kubevirtv1.KubeVirtSpec{
			ImagePullPolicy: corev1.PullIfNotPresent,
			Configuration: kubevirtv1.KubeVirtConfiguration{
				DeveloperConfiguration: &kubevirtv1.DeveloperConfiguration{UseEmulation: emulation},
				EvictionStrategy:       &strategy,
			},
		},
	}
	if emulation {
		cr.Spec.Configuration.ObsoleteCPUModels = cozystack.EmulatedObsoleteCPUModels
	}
	return cr
}

// Emulation decides KubeVirt's useEmulation.
func Emulation(cl *config.ClusterConfig) (bool, string) {
	switch cl.Emulation {
	case "on":
		return true, "--kubevirt-emulation=on"
	case "off":
		return false, "--kubevirt-emulation=off"
	}
	if cl.DryRun {
		return true, "--kubevirt-emulation=auto decides at run time by running a test guest on /dev/kvm; shown as if KVM were unusable"
	}
	ok, why := KVMUsable(3 * time.Second)
	if ok {
		// Without useEmulation every launcher pod requests
		// devices.kubevirt.io/vhost-net, which virt-handler offers only
		// where /dev/vhost-net exists: no VM would ever be scheduled.
		if _, err := os.Stat("/dev/vhost-net"); err != nil {
			return true, "--kubevirt-emulation=auto: " + why + ", but there is no /dev/vhost-net (CONFIG_VHOST_NET), which KubeVirt's launcher requests unless it emulates"
		}
	}
	return !ok, "--kubevirt-emulation=auto: " + why
}

// Plan adds the operator, the CR and the wait for it; under a release
// (subj) the CR is the one its kubevirt chart renders (ReleaseCR), and its
// instancetypes and preferences are applied before any VM. evict, when
// set, is the evictionStrategy the run's control puts in the CR
// (controls.Control.EvictionStrategy).
func Plan(p *plan.Plan, cl *config.ClusterConfig, subj *subject.Subject, k *kube.Clients, timeout time.Duration, evict string) {
	m := Manifest(cl)
	p.Add("apply", "KubeVirt operator "+m.Describe(cl.ManifestsDir), nil, func(ctx context.Context) error {
		b, err := m.Load(ctx, cl.ManifestsDir)
		if err != nil {
			return err
		}
		objs, err := kube.Decode(b)
		if err != nil {
			return err
		}
		return k.Apply.Apply(ctx, objs)
	})
	emulation, why := Emulation(cl)
	if subj != nil && subj.KubeVirt != nil {
		cr := ReleaseCR(subj, emulation, why, evict)
		p.Add("apply", fmt.Sprintf("the KubeVirt CR chart %s renders (useEmulation: %v: %s; namespace %s)", cozystack.KubeVirtChart, emulation, why, Namespace), cr.Object, func(ctx context.Context) error {
			return k.Apply.Apply(ctx, []*unstructured.Unstructured{cr})
		})
	} else {
		cr := CR(emulation, evict)
		p.Add("apply", "the KubeVirt CR (useEmulation: "+fmt.Sprint(emulation)+": "+why+"; evictionStrategy: "+string(*cr.Spec.Configuration.EvictionStrategy)+")", cr, func(ctx context.Context) error {
			return k.Apply.ApplyTyped(ctx, cr)
		})
	}
	p.Wait(AvailableStage(k, timeout))
	p.Wait(SubresourcesStage(k, timeout))
	if subj != nil && subj.Instancetypes != nil {
		objs := append(append([]*unstructured.Unstructured{}, subj.Instancetypes.Instancetypes...), subj.Instancetypes.Preferences...)
		p.Add("apply", fmt.Sprintf("chart %s as rendered: %d cluster instancetypes and %d preferences (the vm-instance chart looks up the ones a VM names)", cozystack.InstanceTypes, len(subj.Instancetypes.Instancetypes), len(subj.Instancetypes.Preferences)), nil, func(ctx context.Context) error {
			return k.Apply.Apply(ctx, objs)
		})
	}
}

// ReleaseCR is the release's KubeVirt CR with what the lane must change,
// each change in the ledger: useEmulation where the nodes give no usable
// KVM, and the namespace of the upstream operator the lane installs
// (Cozystack's own operator package runs it in the CR's namespace); and
// evict, when set, as the evictionStrategy (a control's).
func ReleaseCR(subj *subject.Subject, emulation bool, why, evict string) *unstructured.Unstructured {
	rendered := subj.KubeVirt.CR
	cr := rendered.DeepCopy()
	if emulation {
		cr = cozystack.WithEmulation(cr, subj.Ledger)
	} else {
		subj.Ledger.Add(cozystack.Change{Kind: "value", Object: "KubeVirt " + rendered.GetNamespace() + "/" + rendered.GetName(), What: "useEmulation left unset", Why: why})
	}
	obj := fmt.Sprintf("KubeVirt %s/%s", rendered.GetNamespace(), rendered.GetName())
	if cr.GetNamespace() != Namespace {
		subj.Ledger.Add(cozystack.Change{Kind: "patch", Object: obj, What: "metadata.namespace: " + cr.GetNamespace() + " → " + Namespace, Why: "the lane installs KubeVirt's upstream operator manifest, which runs in " + Namespace + "; virt-operator serves the CR of its own namespace only"})
		cr.SetNamespace(Namespace)
	}
	if evict != "" {
		was, _, _ := unstructured.NestedString(cr.Object, "spec", "configuration", "evictionStrategy")
		_ = unstructured.SetNestedField(cr.Object, evict, "spec", "configuration", "evictionStrategy")
		subj.Ledger.Add(cozystack.Change{Kind: "patch", Object: obj, What: "spec.configuration.evictionStrategy: " + was + " → " + evict, Why: "the run's negative control breaks what a drain does to a VM"})
	}
	subj.Ledger.Add(cozystack.Change{Kind: "patch", Object: obj, What: "rendered → applied, in full", Why: "the rows above and nothing else", Diff: cmp.Diff(rendered.Object, cr.Object)})
	return cr
}

// AvailableStage waits for the KubeVirt CR wherever it is (kubevirt
// upstream, cozy-kubevirt in Cozystack) to be Available.
func AvailableStage(k *kube.Clients, timeout time.Duration) wait.Stage {
	return wait.Stage{Name: "kubevirt", What: "the KubeVirt CR Available", Timeout: timeout, Check: func(ctx context.Context) (bool, string, error) {
		list, err := k.KubeVirt.KubevirtV1().KubeVirts(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "listing KubeVirt CRs: " + err.Error(), nil
		}
		if len(list.Items) == 0 {
			return false, "no KubeVirt CR found in any namespace", nil
		}
		kv := list.Items[0]
		for _, c := range kv.Status.Conditions {
			if c.Type == kubevirtv1.KubeVirtConditionAvailable {
				return c.Status == corev1.ConditionTrue, fmt.Sprintf("phase %s, Available=%s (%s: %s)", kv.Status.Phase, c.Status, c.Reason, c.Message), nil
			}
		}
		return false, fmt.Sprintf("phase %q, no Available condition yet", kv.Status.Phase), nil
	}}
}

// SubresourceAPIService is virt-api's aggregated API: the serial console
// the specs log in through is one of its subresources.
const SubresourceAPIService = "v1.subresources.kubevirt.io"

// SubresourcesStage waits for the API server to report virt-api's
// aggregated API Available. The KubeVirt CR turns Available when its
// deployments are ready, which is not the same: until the API server can
// reach virt-api through its Service, every console request gets "503
// service unavailable". Seen in a cold CI run here: the CR Available and the
// APIService not, "bad status from https://<virt-api ClusterIP>/...: 404"
// for six minutes; the stage names that in its error instead of each VM
// failing at its console.
func SubresourcesStage(k *kube.Clients, timeout time.Duration) wait.Stage {
	return wait.Stage{Name: "kubevirt-api", What: "the APIService " + SubresourceAPIService + " Available (virt-api reachable from the API server)", Timeout: timeout, Check: func(ctx context.Context) (bool, string, error) {
		raw, err := k.Raw(ctx, "/apis/apiregistration.k8s.io/v1/apiservices/"+SubresourceAPIService)
		if err != nil {
			return false, "reading the APIService: " + err.Error(), nil
		}
		return apiServiceAvailable(raw)
	}}
}

// apiServiceAvailable reads an APIService's Available condition (the
// aggregator's types are not worth a module for one field).
func apiServiceAvailable(raw []byte) (bool, string, error) {
	var as struct {
		Status struct {
			Conditions []struct{ Type, Status, Reason, Message string }
		}
	}
	if err := json.Unmarshal(raw, &as); err != nil {
		return false, "", fmt.Errorf("APIService %s: %w", SubresourceAPIService, err)
	}
	for _, c := range as.Status.Conditions {
		if c.Type == "Available" {
			return c.Status == "True", fmt.Sprintf("Available=%s (%s: %s)", c.Status, c.Reason, c.Message), nil
		}
	}
	return false, "no Available condition yet", nil
}
