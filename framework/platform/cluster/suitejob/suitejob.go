// Package suitejob is the suite run inside the cluster it certifies
// (issue 25, `conformance certify`): a Job of the suite's own image whose
// service account is bound to a ClusterRole granting what a run asks of
// the API, rule by rule. Nothing of the machine certify runs on takes
// part: the run reaches the nodes through the node agent it deploys from
// the same image, and hands its results back as one tarball.
//
//	conformance certify ─create─▶ vcf-certify: ServiceAccount, Job ─▶ pod: conformance job
//	  │                           ClusterRole, ClusterRoleBinding        ├─ the release and guide unpacked (inputs)
//	  │                           ConfigMap of the inputs                └─ conformance run --kubeconfig=in-cluster
//	  │◀─ its log, followed (progress) ─────────────────────────────────      ├─ vcf-node-agent on every node
//	  │◀─ pods/exec `conformance results`: the tarball ─────────────────      └─ tarball and done, on failure too
//	  └─ deletes all of it
package suitejob

import (
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/vlan-conformance/framework/platform/cluster/kube"
)

const (
	// Namespace holds the Job and its service account; certify deletes it
	// at the end, and the next certify one a killed run left.
	Namespace = "vcf-certify"
	// Name is the Job, its container, the service account, the
	// ClusterRole and its binding.
	Name = "vcf-conformance"
	// binary is the driver's path in the suite's image (images/conformance).
	binary = "/conformance"
	// ResultsDir is where the run in the pod writes its report, the
	// tarball and done (go-runner's and Sonobuoy's convention: done names
	// the tarball). $SONOBUOY_RESULTS_DIR overrides it.
	ResultsDir = "/tmp/results"
	// Tarball is the results' file name in ResultsDir.
	Tarball = "vcf-conformance-results.tar.gz"
	// Ready starts the log line the pod prints once the tarball is
	// written: certify then fetches it.
	Ready = "vcf-conformance: results ready: "
	// Grace is the run's pod's to remove what it made once stopped (the
	// Job deleted, its deadline): the run's own Ctrl-C path.
	Grace = 6 * time.Minute
	// InputsDir is where the pod unpacks the files certify carried in
	// (Options.Inputs): the run's file flags name paths under it.
	InputsDir = "/tmp/inputs"
	// InputsLimit bounds the packed inputs: a ConfigMap holds at most
	// 1 MiB, its metadata included.
	InputsLimit = 1<<20 - 16<<10
	// inputsFile is the packed inputs' key in the ConfigMap, and its file
	// where the pod mounts it.
	inputsFile  = "inputs.tar.gz"
	inputsMount = "/inputs"
)

// Options are what certify asks of the Job.
type Options struct {
	Image string   // the suite's image (make conformance-image); also the node agent's
	Args  []string // `conformance run` flags for the run in the cluster
	// Focus and Skip are Ginkgo label filters (E2E_FOCUS, E2E_SKIP):
	// claim IDs and areas, e.g. "NODE-01 || VLAN-02".
	Focus, Skip string
	// Deadline bounds the Job (activeDeadlineSeconds); Hold how long its
	// pod keeps the results for certify once written.
	Deadline, Hold time.Duration
	// Inputs are the files of this machine the run reads (the release,
	// the guide), packed (PackInputs) as they go under InputsDir; nil: none.
	Inputs []byte
}

// Objects are the manifests of one in-cluster run.
type Objects struct {
	Namespace      *corev1.Namespace
	ServiceAccount *corev1.ServiceAccount
	Role           *rbacv1.ClusterRole
	Binding        *rbacv1.ClusterRoleBinding
	Inputs         *corev1.ConfigMap // nil without Options.Inputs
	Job            *batchv1.Job
}

// All lists them in the order they are created.
func (o Objects) All() []runtime.Object {
	all := []runtime.Object{o.Namespace, o.ServiceAccount, o.Role, o.Binding}
	if o.Inputs != nil {
		all = append(all, o.Inputs)
	}
	return append(all, o.Job)
}

// YAML is the objects as one multi-document manifest, for kubectl apply.
func (o Objects) YAML() ([]byte, error) {
	var b strings.Builder
	for i, obj := range o.All() {
		y, err := yaml.Marshal(obj)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(y)
	}
	return []byte(b.String()), nil
}

// Rules are what a run asks of the API, each for the spec or stage that
// asks it (docs/cluster-tier.md lists them). Found by running with them:
// a rule taken away is a Forbidden error in the run's log.
func Rules() []rbacv1.PolicyRule {
	rule := func(group string, resources, verbs []string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: resources, Verbs: verbs}
	}
	read := []string{"get", "list", "watch"}
	owns := []string{"get", "list", "watch", "create", "patch", "delete"}
	return []rbacv1.PolicyRule{
		// The tenant namespaces the specs make, the agent's, and the
		// sweep of those a killed run left (by kube.OwnedLabel).
		rule("", []string{"namespaces"}, owns),
		// The nodes the VLAN is cabled to, and their readiness.
		rule("", []string{"nodes"}, read),
		// The specs' pods and VM launchers, their events for a failed
		// spec's dump, the agent's pods asked through exec.
		rule("", []string{"pods"}, owns),
		rule("", []string{"pods/exec"}, []string{"create", "get"}),
		rule("", []string{"pods/log"}, []string{"get"}),
		// ARP-05 drains a VM's node as kubectl drain does: an eviction.
		rule("", []string{"pods/eviction"}, []string{"create"}),
		rule("", []string{"events"}, read),
		// The guests' cloud-init userData.
		rule("", []string{"secrets"}, owns),
		// The Service the release's vm-instance chart makes for each VM.
		rule("", []string{"services"}, owns),
		// The vendor's Multus DaemonSet read; the node agent's made.
		rule("apps", []string{"daemonsets"}, owns),
		// The specs' NetworkAttachmentDefinitions.
		rule("k8s.cni.cncf.io", []string{"network-attachment-definitions"}, owns),
		// The guide's VMs, their instances and migrations (ARP-05);
		// KubeVirt's own CR read for its version and readiness.
		rule("kubevirt.io", []string{"virtualmachines", "virtualmachineinstances", "virtualmachineinstancemigrations"}, owns),
		rule("kubevirt.io", []string{"kubevirts"}, read),
		// The guests' serial consoles; a VM stopped at once before it is
		// deleted, and ARP-07's stop/start and restart, as virtctl does them.
		rule("subresources.kubevirt.io", []string{"virtualmachineinstances/console"}, []string{"get"}),
		rule("subresources.kubevirt.io", []string{"virtualmachines/stop", "virtualmachines/start", "virtualmachines/restart"}, []string{"update"}),
		// Whether KubeVirt's subresource API is served.
		rule("apiregistration.k8s.io", []string{"apiservices"}, []string{"get"}),
	}
}

// Render is the manifests of one run. The Job's pod runs as nobody with
// every capability dropped: what needs a node is the agent's, which the
// run deploys with its own namespace and security context
// (nodeagent.Render).
func Render(o Options) Objects {
	owned := kube.Owned()
	// Not kube.OwnedLabel: the run's sweep deletes the namespaces a killed
	// run left by that label, and the run is in this one. Certify removes
	// it by name. The Job's pod meets the restricted profile: the
	// namespace enforces it.
	ns := &corev1.Namespace{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: Namespace, Labels: map[string]string{
			"app.kubernetes.io/part-of":          "vlan-conformance",
			"pod-security.kubernetes.io/enforce": "restricted",
		}},
	}
	meta := func(namespace string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: Name, Namespace: namespace, Labels: owned}
	}
	env := []corev1.EnvVar{
		{Name: "VCF_IMAGE", Value: o.Image}, // the agent's image: the run's own
		{Name: "E2E_FOCUS", Value: o.Focus},
		{Name: "E2E_SKIP", Value: o.Skip},
	}
	no, yes, nobody := false, true, int64(65534)
	deadline := int64(o.Deadline.Seconds())
	backoff := int32(0)
	grace := int64(Grace.Seconds())
	scratch := func(name, path string) (corev1.Volume, corev1.VolumeMount) {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			corev1.VolumeMount{Name: name, MountPath: path}
	}
	tmpV, tmpM := scratch("tmp", "/tmp")
	runV, runM := scratch("run", "/run") // the machine's run lock (fabric.LockFile)
	// The run's own files under its working directory (the cluster's
	// kubeconfig and manifests, .cache/ as on a machine).
	cacheV, cacheM := scratch("cache", "/work/.cache")
	job := []string{binary, "job", fmt.Sprintf("--hold=%s", o.Hold)}
	mounts, volumes := []corev1.VolumeMount{tmpM, runM, cacheM}, []corev1.Volume{tmpV, runV, cacheV}
	var inputs *corev1.ConfigMap
	if o.Inputs != nil {
		inputs = &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: meta(Namespace),
			BinaryData: map[string][]byte{inputsFile: o.Inputs},
		}
		volumes = append(volumes, corev1.Volume{Name: "inputs", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: Name}}}})
		mounts = append(mounts, corev1.VolumeMount{Name: "inputs", MountPath: inputsMount, ReadOnly: true})
		job = append(job, "--inputs="+inputsMount+"/"+inputsFile)
	}
	args := append(append(job, "--"), o.Args...)
	return Objects{
		Namespace: ns,
		ServiceAccount: &corev1.ServiceAccount{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta: meta(Namespace),
		},
		Role: &rbacv1.ClusterRole{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
			ObjectMeta: meta(""),
			Rules:      Rules(),
		},
		Binding: &rbacv1.ClusterRoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			ObjectMeta: meta(""),
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: Name},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: Name, Namespace: Namespace}},
		},
		Inputs: inputs,
		Job: &batchv1.Job{
			TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
			ObjectMeta: meta(Namespace),
			Spec: batchv1.JobSpec{
				BackoffLimit:          &backoff, // a run is a verdict: never retried behind certify's back
				ActiveDeadlineSeconds: &deadline,
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/name": Name}},
					Spec: corev1.PodSpec{
						ServiceAccountName:            Name,
						RestartPolicy:                 corev1.RestartPolicyNever,
						TerminationGracePeriodSeconds: &grace,
						SecurityContext: &corev1.PodSecurityContext{
							RunAsNonRoot: &yes, RunAsUser: &nobody, RunAsGroup: &nobody,
							SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
						},
						Containers: []corev1.Container{{
							Name:            Name,
							Image:           o.Image,
							ImagePullPolicy: corev1.PullIfNotPresent,
							Command:         args,
							Env:             env,
							VolumeMounts:    mounts,
							SecurityContext: &corev1.SecurityContext{
								Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
								ReadOnlyRootFilesystem:   &yes,
								AllowPrivilegeEscalation: &no,
							},
						}},
						Volumes: volumes,
					},
				},
			},
		},
	}
}

// LabelFilter is the Ginkgo label filter of E2E_FOCUS and E2E_SKIP (go-
// runner's names; here label filters, not regular expressions): "" when
// both are empty.
func LabelFilter(focus, skip string) string {
	focus, skip = strings.TrimSpace(focus), strings.TrimSpace(skip)
	switch {
	case focus != "" && skip != "":
		return "(" + focus + ") && !(" + skip + ")"
	case skip != "":
		return "!(" + skip + ")"
	}
	return focus
}
