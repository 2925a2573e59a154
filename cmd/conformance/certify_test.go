package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/cozystack"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/suitejob"
	"github.com/cozystack/vlan-conformance/suites/labels"
)

// Bad input is refused with one clear error and exit 2 before certify
// reaches the cluster: its own flags, and the run's after --, checked as
// the run would check them.
func TestCertifyRefusesBadInputBeforeTheCluster(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("not read before the input is valid"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--kubeconfig=" + kubeconfig}, "--image"},
		{[]string{"--image=i"}, "--kubeconfig: the cluster to certify is required"},
		{[]string{"--image=i", "--kubeconfig=/nonexistent"}, `--kubeconfig "/nonexistent"`},
		{[]string{"--image=i", "--kubeconfig=" + kubeconfig, "--", "--report-dir=x"}, "--report-dir is certify's to set"},
		{[]string{"--image=i", "--kubeconfig=" + kubeconfig, "--", "--workload=pod"}, "certify runs VMs"},
		{[]string{"--image=i", "--kubeconfig=" + kubeconfig, "--", "--gateway=10.0.0.1"}, "--gateway"},
		{[]string{"--image=i", "--kubeconfig=" + kubeconfig, "--", "--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"--image=i", "--kubeconfig=" + kubeconfig, "--timeout=0s"}, "--timeout"},
	} {
		var stdout, stderr bytes.Buffer
		code := certifyCommand(&stdout, &stderr, tc.args)
		if code != config.ExitBadInput || !strings.Contains(stderr.String(), tc.want) || !strings.Contains(stderr.String(), "nothing was created") {
			t.Errorf("certify %q: exit %d, %q; want exit 2 naming %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}

// --print-manifests needs no cluster and creates nothing: it prints.
func TestPrintManifestsNeedsNoCluster(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := certifyCommand(&stdout, &stderr, []string{"--image=localhost/vcf/conformance:x", "--print-manifests", "--", "--gateway=203.0.113.1"}); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"kind: Job", "kind: ClusterRole\n", "- --gateway=203.0.113.1", "image: localhost/vcf/conformance:x"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("the manifests lack %q:\n%s", want, stdout.String())
		}
	}
}

// The Job's container writes its results and done whatever the run did,
// its log and JUnit report under go-runner's names,
// passes the run's exit code on, hands E2E_FOCUS and E2E_SKIP to it as one
// label filter, and holds the results until they are fetched.
func TestTheJobWritesItsResultsWhenTheRunFails(t *testing.T) {
	dir := t.TempDir()
	// The run: it records its arguments in its report, and fails.
	program := filepath.Join(t.TempDir(), "conformance")
	script := "#!/bin/sh\nfor a; do case $a in --report-dir=*) r=${a#--report-dir=};; esac; done\nmkdir -p $r\necho \"$@\" > $r/args\necho '<testsuites/>' > $r/junit.xml\nexit 1\n"
	if err := os.WriteFile(program, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("E2E_FOCUS", "NODE-01")
	t.Setenv("E2E_SKIP", "arp")
	var stdout, stderr syncBuffer
	ended := make(chan int, 1)
	go func() {
		j := inCluster{program: program, dir: dir, image: "localhost/vcf/conformance:x", args: []string{"--gateway=203.0.113.1"}, hold: time.Minute}
		ended <- j.run(context.Background(), &stdout, &stderr)
	}()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(stdout.String(), suitejob.Ready); {
		if time.Now().After(deadline) {
			t.Fatalf("the job never said its results are ready: %q %q", stdout.String(), stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case code := <-ended:
		t.Fatalf("the job ended (%d) before its results were fetched", code)
	case <-time.After(200 * time.Millisecond):
	}
	var tarball, errs bytes.Buffer
	if code := results(dir, &tarball, &errs); code != 0 {
		t.Fatalf("results: exit %d: %s", code, errs.String())
	}
	select {
	case code := <-ended:
		if code != 1 {
			t.Errorf("the job exited %d, want the run's 1", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the job still holds its results after they were fetched")
	}
	done, err := os.ReadFile(filepath.Join(dir, "done"))
	if err != nil || string(done) != filepath.Join(dir, suitejob.Tarball) {
		t.Errorf("done holds %q (%v), want the tarball's path", done, err)
	}
	got := t.TempDir()
	if err := suitejob.Unpack(&tarball, got); err != nil {
		t.Fatal(err)
	}
	if code, err := suitejob.ReadExitCode(got); err != nil || code != 1 {
		t.Errorf("the results' exit code %d (%v), want 1", code, err)
	}
	// go-runner's names beside done, which Hydrophone copies out; the
	// log in the tarball too.
	if b, err := os.ReadFile(filepath.Join(dir, junit)); err != nil || string(b) != "<testsuites/>\n" {
		t.Errorf("%s holds %q (%v), want the run's junit.xml", junit, b, err)
	}
	for _, log := range []string{filepath.Join(dir, e2eLog), filepath.Join(got, e2eLog)} {
		if b, err := os.ReadFile(log); err != nil || !strings.Contains(string(b), "job: conformance run --tier=cluster") {
			t.Errorf("%s holds %q (%v), want the job's output", log, b, err)
		}
	}
	// The Ginkgo CLI's last lines, by which Hydrophone sees the run end.
	if !strings.Contains(stdout.String(), "Ginkgo ran 1 suite in ") || !strings.Contains(stdout.String(), "Test Suite Failed\n") {
		t.Errorf("the job's output does not end as the Ginkgo CLI's does: %q", stdout.String())
	}
	args, _ := os.ReadFile(filepath.Join(got, "args"))
	for _, want := range []string{"--kubeconfig=in-cluster", "--node-agent-image=localhost/vcf/conformance:x", "--gateway=203.0.113.1", "--ginkgo.label-filter=((NODE-01) && !(arp)) && !stager"} {
		if !strings.Contains(string(args), want) {
			t.Errorf("the run was given %q: no %q", args, want)
		}
	}
}

// The label the Job leaves out is the stager harness's own.
func TestTheJobLeavesOutTheStagerHarnessByItsLabel(t *testing.T) {
	if !slices.Contains(labels.Stager, stagerLabel) {
		t.Errorf("the Job leaves out %q; the stager harness's specs carry %v", stagerLabel, labels.Stager)
	}
}

// --sonobuoy-plugin prints the plugin, needing no cluster either.
func TestSonobuoyPluginNeedsNoCluster(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := certifyCommand(&stdout, &stderr, []string{"--image=localhost/vcf/conformance:x", "--sonobuoy-plugin", "--focus=NODE-01", "--", "--gateway=203.0.113.1"}); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"sonobuoy-config:", "driver: Job", "result-format: junit", "- --gateway=203.0.113.1", "value: NODE-01"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("the plugin lacks %q:\n%s", want, stdout.String())
		}
	}
}

// The run's --cozystack and --guide name files of this machine: certify
// carries them in, as the run reads them (the release with its commit and
// its charts' links, the guide file), and points the flags at them.
func TestCertifyCarriesTheReleaseAndTheGuideIn(t *testing.T) {
	rel := t.TempDir()
	for name, content := range map[string]string{
		"SOURCE":                                                 "commit: 3c780acd417f086f8f18d040d0d7020ff55d3ba3\n",
		cozystack.PlatformChart + "/Chart.yaml":                  "name: platform\n",
		cozystack.MultusChart + "/Chart.yaml":                    "name: multus\n",
		cozystack.MultusImageDir + "/Dockerfile":                 "FROM scratch\n",
		"packages/library/cozy-lib/Chart.yaml":                   "name: cozy-lib\n",
		cozystack.VMInstance + "/Chart.yaml":                     "name: vm-instance\n",
		"packages/apps/unread/Chart.yaml":                        "name: unread\n",
		"site/content/en/docs/networking/" + cozystack.GuideFile: "# the guide\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(rel, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(rel, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(rel, cozystack.VMInstance, "charts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../library/cozy-lib", filepath.Join(rel, cozystack.VMInstance, "charts", "cozy-lib")); err != nil {
		t.Fatal(err)
	}
	args, inputs, err := carry([]string{"--gateway=203.0.113.1", "--cozystack=" + rel, "--guide", filepath.Join(rel, "site")})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--gateway=203.0.113.1", "--cozystack=" + suitejob.InputsDir + "/cozystack", "--guide", suitejob.InputsDir + "/guide/" + cozystack.GuideFile}
	if !slices.Equal(args, want) {
		t.Errorf("the run's flags %q, want %q", args, want)
	}
	got := t.TempDir()
	if err := suitejob.UnpackInputs(bytes.NewReader(inputs), got); err != nil {
		t.Fatal(err)
	}
	r, err := cozystack.Open(filepath.Join(got, "cozystack"))
	if err != nil || r.Commit != "3c780acd417f086f8f18d040d0d7020ff55d3ba3" {
		t.Fatalf("the carried release: %+v, %v", r, err)
	}
	if b, err := os.ReadFile(filepath.Join(got, "cozystack", cozystack.VMInstance, "charts", "cozy-lib", "Chart.yaml")); err != nil || string(b) != "name: cozy-lib\n" {
		t.Errorf("the chart's link to its library: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(got, "cozystack", "packages/apps/unread")); err == nil {
		t.Error("a chart the suite does not read was carried in")
	}
	if b, err := os.ReadFile(filepath.Join(got, "guide", cozystack.GuideFile)); err != nil || string(b) != "# the guide\n" {
		t.Errorf("the carried guide: %q, %v", b, err)
	}

	if args, inputs, err := carry([]string{"--gateway=203.0.113.1"}); err != nil || inputs != nil || len(args) != 1 {
		t.Errorf("no file flags: %q, %d bytes, %v; want the flags as they are and nothing carried", args, len(inputs), err)
	}
	var stdout, stderr bytes.Buffer
	if code := certifyCommand(&stdout, &stderr, []string{"--image=i", "--sonobuoy-plugin", "--", "--gateway=203.0.113.1", "--cozystack=" + rel}); code != config.ExitBadInput || !strings.Contains(stderr.String(), "a plugin carries no files") {
		t.Errorf("--sonobuoy-plugin with --cozystack: exit %d, %q; want 2", code, stderr.String())
	}
}

// --product judges the results certify copied out by the certification
// profile, keeping its verdict beside them; a wrong product file is bad
// input before anything is created, as is one certify would never judge.
func TestCertifyJudgesTheResultsByTheProductFile(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	product := filepath.Join(dir, "product.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	for name, body := range map[string]string{
		kubeconfig: "not read before the input is valid",
		product:    "vendor: Example Networks\nproduct: EX-100\ncozystack: v1.6.1\nnodeOS: Talos v1.11.3\n",
		bad:        "vendor: x\n",
	} {
		if err := os.WriteFile(name, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{
		{"--image=i", "--kubeconfig=" + kubeconfig, "--product=" + bad},
		{"--image=i", "--print-manifests", "--product=" + product},
	} {
		var stdout, stderr bytes.Buffer
		if code := certifyCommand(&stdout, &stderr, args); code != config.ExitBadInput || !strings.Contains(stderr.String(), "--product") {
			t.Errorf("certify %q: exit %d, %q; want 2 naming --product", args, code, stderr.String())
		}
	}
	// A focused run's results: NODE-01 passed, the rest never ran.
	reportDir := filepath.Join(dir, "certify")
	if err := os.MkdirAll(filepath.Join(reportDir, "results"), 0o755); err != nil {
		t.Fatal(err)
	}
	junit := `<testsuites><testsuite><testcase name="[It] x [NODE-01]" status="passed"></testcase></testsuite></testsuites>`
	if err := os.WriteFile(filepath.Join(reportDir, "results", "junit.xml"), []byte(junit), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if code := judge(&out, product, reportDir); code != 1 {
		t.Errorf("a run that left claims without a verdict: exit %d, want 1\n%s", code, out.String())
	}
	kept, err := os.ReadFile(filepath.Join(reportDir, "certification.txt"))
	if err != nil || !strings.Contains(string(kept), "NOT CERTIFIED") || !strings.Contains(string(kept), "NODE-01  certified") {
		t.Errorf("certification.txt: %v\n%s", err, kept)
	}
	if b, err := os.ReadFile(filepath.Join(reportDir, "product.yaml")); err != nil || !strings.Contains(string(b), "EX-100") {
		t.Errorf("the product file judged by is not beside the results: %q, %v", b, err)
	}
}
