package cozystack

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// stagingSection is the guide's section that releases before staging do
// not ship.
const stagingSection = "Staging the reference CNI plugins"

// A copy with staging dropped is a release as v1.6.x ships it: it renders,
// with no install-cni-plugins and no stageCniPlugins, its Dockerfile has no
// plugin stage, and its guide's steps are still read.
func TestDropStaging(t *testing.T) {
	c, err := subject(t).CopyTo(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.DropStaging(); err != nil {
		t.Fatal(err)
	}
	if err := c.DropGuideSection(stagingSection); err != nil {
		t.Fatal(err)
	}
	img, err := c.MultusImage()
	if err != nil {
		t.Fatalf("a Dockerfile without a plugin stage: %v", err)
	}
	if img.Stages() || img.PluginsVersion != "" || img.MultusVersion == "" {
		t.Errorf("the multus image without its plugin stage: %+v", img)
	}
	p, m, err := c.StagingOn("isp-full-generic", Unset, nil)
	if err != nil {
		t.Fatalf("the copy must render: %v", err)
	}
	if _, ok := p.MultusValues["stageCniPlugins"]; ok {
		t.Errorf("the platform still hands multus stageCniPlugins: %v", p.MultusValues)
	}
	if ics := m.InitContainers(); slices.Contains(ics, "install-cni-plugins") || len(ics) == 0 {
		t.Errorf("init containers: %v", ics)
	}
	g, err := c.Guide()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(g.Text, stagingSection) || g.Says("It installs 14 of the upstream reference plugins") {
		t.Error("the guide still has its staging section")
	}
	if !strings.Contains(g.Text, "## Step 1") || !strings.Contains(g.Text, "## Prerequisites") {
		t.Error("dropping the section dropped its neighbours")
	}
	if _, err := g.NAD(); err != nil {
		t.Errorf("the steps after the dropped section: %v", err)
	}
	if err := c.DropStaging(); err == nil {
		t.Error("dropping staging twice must find nothing to drop, and say so")
	}
}

// Half a plugin stage is a Dockerfile the suite cannot read: bad input
// naming the file, not a release without staging.
func TestMultusImageHalfAStage(t *testing.T) {
	c, err := subject(t).CopyTo(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dockerfile := c.Path(MultusImageDir + "/Dockerfile")
	b, err := os.ReadFile(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	noTar := strings.ReplaceAll(string(b), "-C /cni-plugins", "-C /elsewhere")
	if err := os.WriteFile(dockerfile, []byte(noTar), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.MultusImage(); err == nil || !strings.Contains(err.Error(), dockerfile) || !strings.Contains(err.Error(), "CNI_PLUGINS_VERSION=") {
		t.Errorf("a Dockerfile with ARG CNI_PLUGINS_VERSION and no tar into /cni-plugins: %v", err)
	}
}
