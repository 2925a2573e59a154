package stager

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cozystack/vlan-conformance/framework/image"
	"github.com/cozystack/vlan-conformance/framework/image/imagetest"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// The container-less run itself: root of its own, security context as
// written, termination message, and no mount left behind.
func TestStageRunsAsTheManifestSays(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	repo := filepath.Join("..", "..")
	release, older := filepath.Join(repo, "bin", "cni", "v1.9.1"), filepath.Join(repo, "bin", "cni", "v1.6.2")
	if _, err := os.Stat(filepath.Join(older, "bridge")); err != nil {
		t.Skip("plugins not built (make plugins)")
	}
	manifest := filepath.Join(t.TempDir(), "probe.yaml")
	script := `grep -E '^(CapEff|CapBnd|CapInh|NoNewPrivs|Uid|Gid):' /proc/self/status; ls /; ls /cni-plugins | wc -l; readlink -f /bin/sh; echo probe-message > /dev/termination-log; touch /host/opt/cni/bin/probe; echo on-stderr >&2`
	if err := os.WriteFile(manifest, []byte(`apiVersion: apps/v1
kind: DaemonSet
spec:
  template:
    spec:
      initContainers:
      - name: install-cni-plugins
        command: [/bin/sh, -c]
        args: ["`+script+`"]
        securityContext: {runAsUser: 0, allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
        volumeMounts: [{name: cnibin, mountPath: /host/opt/cni/bin}]
      volumes: [{name: cnibin, hostPath: {path: /opt/cni/bin}}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	harness, err := NewHarness(Options{Manifest: manifest, Release: release, OlderRelease: older, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := harness.Close(); err != nil {
			t.Error(err)
		}
	}()
	n, err := harness.Prepare(Scenario{Name: "probe", Faults: []Fault{FullFS(1 << 20)}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := harness.Stage(context.Background(), n)
	if err != nil {
		t.Fatalf("Stage: %v\nlog:\n%s", err, res.Log)
	}
	t.Logf("log:\n%s", res.Log)
	for _, want := range []string{"CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "CapInh:\t0000000000000000", "NoNewPrivs:\t1", "Uid:\t0\t0\t0\t0", "cni-plugins", "host", "14\n", "/usr/bin/dash", "on-stderr"} {
		if !strings.Contains(res.Log, want) {
			t.Errorf("log lacks %q", want)
		}
	}
	if res.ExitCode != 0 || res.TerminationMessage != "probe-message\n" {
		t.Errorf("exit %d, termination message %q", res.ExitCode, res.TerminationMessage)
	}
	if c := res.Change("probe"); c.Verdict != Added {
		t.Errorf("probe: %s, want added", c.Verdict)
	}
	if err := n.Close(); err != nil {
		t.Error(err)
	}
	// Only this harness's: other runs on the machine may hold stager mounts.
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mi), n.base) {
		t.Errorf("mounts left behind:\n%s", mi)
	}
}

// The release's pinned image without /cni-plugins (--image-archive) is run
// as it is: the node sees no /cni-plugins, and the guide's script says
// why it stages nothing.
func TestHarnessRunsAPinnedImageWithoutPluginsDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	t.Cleanup(func() { _ = DropImageCache() })
	repo := filepath.Join("..", "..")
	release, older := filepath.Join(repo, "bin", "cni", "v1.9.1"), filepath.Join(repo, "bin", "cni", "v1.6.2")
	if _, err := os.Stat(filepath.Join(older, "bridge")); err != nil {
		t.Skip("plugins not built (make plugins)")
	}
	img := imagetest.Image(t, [2]string{"usr/src/multus-cni/bin/multus-daemon", "m"})
	archive := imagetest.Layout(t, filepath.Join(t.TempDir(), "oci"), func(lp layout.Path) error { return lp.AppendImage(img) })
	a, err := image.ReadArchive(archive)
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := a.Pin(pinnedRepo + "@" + imagetest.Digest(t, img))
	if err != nil {
		t.Fatal(err)
	}
	harness, err := NewHarness(Options{Manifest: filepath.Join(repo, DefaultManifest), Pinned: pinned, Release: release, OlderRelease: older, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := harness.Close(); err != nil {
			t.Error(err)
		}
	}()
	if !harness.Image.NoPluginsDir || !strings.Contains(harness.Image.String(), pinned.Ref) {
		t.Fatalf("the harness's image: %s", harness.Image)
	}
	n, err := harness.Prepare(Scenario{Name: "pinned"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := harness.Stage(context.Background(), n)
	if err != nil {
		t.Fatalf("Stage: %v\nlog:\n%s", err, res.Log)
	}
	if !slices.Contains(res.LogLines(), "no /cni-plugins in this image; skipping staging") || res.ExitCode != 0 {
		t.Errorf("exit %d, log:\n%s\nwant the guide's skip line and exit 0", res.ExitCode, res.Log)
	}
}
