package suitejob

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/vlan-conformance/framework/platform/cluster/kube"
)

// The run in the cluster has nothing of a node: it runs as nobody, every
// capability dropped, on a read-only root, in the pod network, as its own
// service account, which the binding grants the role. It is never retried:
// a run is a verdict.
func TestTheJobRunsAsNobodyWithNothingOfANode(t *testing.T) {
	o := Render(Options{Image: "localhost/vcf/conformance:x", Args: []string{"--gateway=203.0.113.1"}, Focus: "NODE-01", Deadline: time.Hour, Hold: time.Minute})
	pod := o.Job.Spec.Template.Spec
	if pod.HostNetwork || pod.HostPID || pod.HostIPC {
		t.Errorf("the Job's pod shares the node's namespaces: network %v, PID %v, IPC %v", pod.HostNetwork, pod.HostPID, pod.HostIPC)
	}
	if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != 65534 {
		t.Errorf("the Job's pod runs as %+v: want nobody, never root", sc)
	}
	c := pod.Containers[0]
	if sc := c.SecurityContext; sc == nil || sc.Privileged != nil && *sc.Privileged || len(sc.Capabilities.Add) > 0 ||
		!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation {
		t.Errorf("the container's security context is %+v: want every capability dropped, none added, a read-only root, no escalation", sc)
	}
	if c.Image != "localhost/vcf/conformance:x" || !slices.Equal(c.Command[:4], []string{"/conformance", "job", "--hold=1m0s", "--"}) || c.Command[4] != "--gateway=203.0.113.1" {
		t.Errorf("the container runs %s %q", c.Image, c.Command)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if env["VCF_IMAGE"] != c.Image || env["E2E_FOCUS"] != "NODE-01" {
		t.Errorf("the container's environment is %v: want the agent's image its own, and E2E_FOCUS", env)
	}
	if pod.ServiceAccountName != o.ServiceAccount.Name || o.Binding.Subjects[0].Name != o.ServiceAccount.Name ||
		o.Binding.Subjects[0].Namespace != o.Namespace.Name || o.Binding.RoleRef.Name != o.Role.Name {
		t.Errorf("the pod's service account %s is not the one the binding grants %s: %+v", pod.ServiceAccountName, o.Role.Name, o.Binding)
	}
	if *o.Job.Spec.BackoffLimit != 0 || *o.Job.Spec.ActiveDeadlineSeconds != 3600 {
		t.Errorf("the Job is retried %d times, its deadline %d s: want never, 3600", *o.Job.Spec.BackoffLimit, *o.Job.Spec.ActiveDeadlineSeconds)
	}
	// The run's own sweep deletes namespaces by the suite's label: the one
	// it runs in must not carry it.
	if _, ok := o.Namespace.Labels[kube.OwnedLabel]; ok {
		t.Errorf("namespace %s carries %s: the run's sweep would delete the namespace it runs in", o.Namespace.Name, kube.OwnedLabel)
	}
	y, err := o.YAML()
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Job"} {
		if !strings.Contains(string(y), "\nkind: "+kind+"\n") {
			t.Errorf("the manifests have no %s:\n%s", kind, y)
		}
	}
}

// The role names what it grants: no wildcard, nothing that grants more
// (RBAC objects, impersonation, escalation), no node proxy.
func TestTheRoleGrantsNoWildcardAndNoWayToMore(t *testing.T) {
	for _, r := range Rules() {
		for _, s := range slices.Concat(r.APIGroups, r.Resources, r.Verbs) {
			if strings.Contains(s, "*") {
				t.Errorf("rule %+v has a wildcard", r)
			}
		}
		for _, v := range r.Verbs {
			if v == "escalate" || v == "bind" || v == "impersonate" {
				t.Errorf("rule %+v grants %s", r, v)
			}
		}
		for _, res := range r.Resources {
			if strings.HasPrefix(res, "nodes/") || strings.Contains(res, "roles") || strings.Contains(res, "rolebindings") {
				t.Errorf("rule %+v grants %s", r, res)
			}
		}
	}
}

func TestE2EFocusAndSkipAreOneLabelFilter(t *testing.T) {
	for _, tc := range []struct{ focus, skip, want string }{
		{"", "", ""},
		{"NODE-01 || VLAN-02", "", "NODE-01 || VLAN-02"},
		{"", "arp", "!(arp)"},
		{"datapath", "VLAN-09", "(datapath) && !(VLAN-09)"},
	} {
		if got := LabelFilter(tc.focus, tc.skip); got != tc.want {
			t.Errorf("E2E_FOCUS %q, E2E_SKIP %q: %q, want %q", tc.focus, tc.skip, got, tc.want)
		}
	}
}

// What the pod packs certify unpacks whole; a tarball naming a path
// outside the results is refused.
func TestResultsComeBackWhole(t *testing.T) {
	src := t.TempDir()
	files := map[string]string{"junit.xml": "<testsuites/>", ExitCode: "1\n", "artifacts/VLAN-02/trunk.pcap": "\xd4\xc3\xb2\xa1"}
	for name, content := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(src, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A link a run leaves is not a result.
	if err := os.Symlink("../artifacts", filepath.Join(src, "artifacts", "again")); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Pack(src, &b); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	if err := Unpack(&b, dst); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if got, err := os.ReadFile(filepath.Join(dst, name)); err != nil || string(got) != content {
			t.Errorf("%s came back as %q (%v), want %q", name, got, err, content)
		}
	}
	if _, err := os.Lstat(filepath.Join(dst, "artifacts", "again")); err == nil {
		t.Error("a link came back among the results")
	}
	// The inputs keep a chart's link to a library chart.
	b.Reset()
	if err := PackInputs(src, &b); err != nil {
		t.Fatal(err)
	}
	inputs := t.TempDir()
	if err := UnpackInputs(bytes.NewReader(b.Bytes()), inputs); err != nil {
		t.Fatal(err)
	}
	if link, err := os.Readlink(filepath.Join(inputs, "artifacts", "again")); err != nil || link != "../artifacts" {
		t.Errorf("the link came back as %q (%v), want ../artifacts", link, err)
	}
	if err := Unpack(bytes.NewReader(b.Bytes()), t.TempDir()); err == nil || !strings.Contains(err.Error(), "is a link") {
		t.Errorf("results holding a link: %v, want refused", err)
	}
	if code, err := ReadExitCode(dst); err != nil || code != 1 {
		t.Errorf("exit code %d (%v), want 1", code, err)
	}

	var evil bytes.Buffer
	gz := gzip.NewWriter(&evil)
	tw := tar.NewWriter(gz)
	tw.WriteHeader(&tar.Header{Name: "../escaped", Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
	tw.Write([]byte("x"))
	tw.Close()
	gz.Close()
	out := t.TempDir()
	if err := Unpack(&evil, filepath.Join(out, "results")); err == nil || !strings.Contains(err.Error(), "outside") {
		t.Errorf("a tarball naming ../escaped: %v, want refused", err)
	}
	if _, err := os.Stat(filepath.Join(out, "escaped")); err == nil {
		t.Error("../escaped was written outside the results")
	}
	for _, target := range []string{"../..", "/etc"} {
		evil.Reset()
		gz = gzip.NewWriter(&evil)
		tw = tar.NewWriter(gz)
		tw.WriteHeader(&tar.Header{Name: "dir/link", Linkname: target, Typeflag: tar.TypeSymlink})
		tw.Close()
		gz.Close()
		if err := UnpackInputs(&evil, filepath.Join(out, "results")); err == nil || !strings.Contains(err.Error(), "outside") {
			t.Errorf("a tarball linking to %s: %v, want refused", target, err)
		}
	}
}

// The files certify carries in go in a ConfigMap the Job mounts, read
// only, and the pod is told where to find them.
func TestTheInputsGoInAConfigMapTheJobMounts(t *testing.T) {
	if o := Render(Options{Image: "i", Deadline: time.Hour}); o.Inputs != nil || len(o.All()) != 5 {
		t.Errorf("without inputs: a ConfigMap %v, %d objects; want none, 5", o.Inputs, len(o.All()))
	}
	o := Render(Options{Image: "i", Deadline: time.Hour, Inputs: []byte("packed"), Args: []string{"--cozystack=" + InputsDir + "/cozystack"}})
	if o.Inputs == nil || string(o.Inputs.BinaryData[inputsFile]) != "packed" || o.Inputs.Namespace != Namespace {
		t.Fatalf("the inputs' ConfigMap: %+v", o.Inputs)
	}
	pod := o.Job.Spec.Template.Spec
	c := pod.Containers[0]
	if !slices.Contains(c.Command, "--inputs="+inputsMount+"/"+inputsFile) || c.Command[len(c.Command)-1] != "--cozystack="+InputsDir+"/cozystack" {
		t.Errorf("the pod runs %q: want --inputs before --, the run's flags after", c.Command)
	}
	mounted := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == inputsMount && m.ReadOnly })
	fromMap := slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool {
		return v.ConfigMap != nil && v.ConfigMap.Name == o.Inputs.Name
	})
	if !mounted || !fromMap {
		t.Errorf("mounts %+v, volumes %+v: want the ConfigMap read only at %s", c.VolumeMounts, pod.Volumes, inputsMount)
	}
	if _, err := SonobuoyPlugin(Options{Image: "i", Inputs: []byte("packed")}); err == nil {
		t.Error("a Sonobuoy plugin was rendered with inputs it cannot carry")
	}
}

// The Sonobuoy plugin is the Job's run: the same image, command and
// security, but it exits once its results are written, and Sonobuoy reads
// the JUnit report its done file's tarball holds.
func TestTheSonobuoyPluginIsTheJobsRun(t *testing.T) {
	o := Options{Image: "localhost/vcf/conformance:x", Args: []string{"--gateway=203.0.113.1"}, Deadline: time.Hour, Hold: time.Minute}
	y, err := SonobuoyPlugin(o)
	if err != nil {
		t.Fatal(err)
	}
	var p sonobuoyPlugin
	if err := yaml.UnmarshalStrict(y, &p); err != nil {
		t.Fatalf("%v:\n%s", err, y)
	}
	if p.Config.Driver != "Job" || p.Config.ResultFormat != "junit" || !slices.Equal(p.Config.ResultFiles, []string{"junit.xml"}) {
		t.Errorf("sonobuoy-config %+v: want a Job plugin reading junit.xml", p.Config)
	}
	job := Render(o).Job.Spec.Template.Spec.Containers[0]
	if p.Spec.Image != job.Image || !slices.Equal(p.Spec.Command[3:], job.Command[3:]) || p.Spec.Command[2] != "--hold=0s" {
		t.Errorf("the plugin runs %s %q; the Job %s %q: want the same run, not held", p.Spec.Image, p.Spec.Command, job.Image, job.Command)
	}
	if sc := p.Spec.SecurityContext; sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || *sc.RunAsUser != 65534 || len(sc.Capabilities.Add) > 0 {
		t.Errorf("the plugin's container runs as %+v: want nobody, nothing added", sc)
	}
	mounts := map[string]string{}
	for _, m := range p.Spec.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	if mounts["results"] != SonobuoyResults || len(p.ExtraVolumes) != len(p.Spec.VolumeMounts)-1 {
		t.Errorf("mounts %v, extra volumes %d: want Sonobuoy's results at %s and a volume for each other mount", mounts, len(p.ExtraVolumes), SonobuoyResults)
	}
}

// Remove deletes what certify made and what a run killed past its grace
// left (a namespace with the suite's label), and nothing else. The API is
// client-go's fake (no cluster here): it deletes at once.
func TestRemoveLeavesNothingOfTheRun(t *testing.T) {
	o := Render(Options{Image: "i", Deadline: time.Hour, Hold: time.Minute})
	tenant := kube.RenderNamespace("tenant-datapath")
	vendor := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cozy-multus"}}
	k := &kube.Clients{Kube: fake.NewClientset(o.Namespace, o.ServiceAccount, o.Role, o.Binding, o.Job, tenant, vendor)}
	var progress bytes.Buffer
	if err := Remove(context.Background(), k, &progress); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	nss, _ := k.Kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	var left []string
	for _, ns := range nss.Items {
		left = append(left, ns.Name)
	}
	if !slices.Equal(left, []string{"cozy-multus"}) {
		t.Errorf("namespaces left: %v, want the vendor's alone", left)
	}
	if _, err := k.Kube.RbacV1().ClusterRoles().Get(ctx, Name, metav1.GetOptions{}); err == nil {
		t.Error("the ClusterRole is left")
	}
	if _, err := k.Kube.RbacV1().ClusterRoleBindings().Get(ctx, Name, metav1.GetOptions{}); err == nil {
		t.Error("the ClusterRoleBinding is left")
	}
	if !strings.Contains(progress.String(), "tenant-datapath") {
		t.Errorf("certify did not say it deleted what the run left: %q", progress.String())
	}
}

// The node agent's image is the runner's own, found in the pod by the
// go-runner contract's E2E_FOCUS: in certify's Job, and in a pod like
// Hydrophone's, whose second container (the results' busybox) has none.
func TestTheRunnersImageIsTheContainerCarryingE2EFocus(t *testing.T) {
	job := Render(Options{Image: "localhost/vcf/conformance:x", Deadline: time.Hour})
	hydrophone := corev1.PodSpec{Containers: []corev1.Container{
		{Name: "conformance-container", Image: "localhost/vcf/conformance:y", Env: []corev1.EnvVar{{Name: "E2E_FOCUS"}, {Name: "E2E_SKIP"}}},
		{Name: "output-container", Image: "busybox"},
	}}
	for _, tc := range []struct {
		spec corev1.PodSpec
		want string
	}{
		{job.Job.Spec.Template.Spec, "localhost/vcf/conformance:x"},
		{hydrophone, "localhost/vcf/conformance:y"},
	} {
		got, err := runnerImage(&corev1.Pod{Spec: tc.spec})
		if err != nil || got != tc.want {
			t.Errorf("runnerImage: %q, %v; want %q", got, err, tc.want)
		}
	}
	if got, err := runnerImage(&corev1.Pod{Spec: corev1.PodSpec{Containers: hydrophone.Containers[1:]}}); err == nil {
		t.Errorf("a pod with no runner gave image %q", got)
	}
}
