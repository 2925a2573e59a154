package cozystack

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// subject is the verbatim Cozystack subset the brief provides, if present.
func subject(t *testing.T) *Release {
	t.Helper()
	dir := os.Getenv("VCF_COZYSTACK")
	if dir == "" {
		dir = "../../../shared/subjects/cozystack"
	}
	r, err := Open(dir)
	if err != nil {
		t.Skipf("no Cozystack checkout to render (%v); set VCF_COZYSTACK", err)
	}
	return r
}

func TestPlatformResolvesStaging(t *testing.T) {
	r := subject(t)
	for _, s := range []Staging{Unset, StagingValue(true), StagingValue(false), StagingValue("yes"), StagingValue("Off"), StagingValue("maybe")} {
		var l Ledger
		p, m, err := r.StagingOn("isp-full-generic", s, &l)
		if err != nil {
			t.Logf("%s: %v (chart: %s)", s, err, ChartError(err))
			continue
		}
		t.Logf("%s: multus values %v; init containers %v; lookups %v", s, p.MultusValues, m.InitContainers(), p.Render.Lookups)
	}
}

func TestMultusImageFromDockerfile(t *testing.T) {
	img, err := subject(t).MultusImage()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", img)
	if len(img.Plugins) == 0 || img.PluginsVersion == "" {
		t.Fatal("nothing read")
	}
}

// The control's edit makes a typo resolve to false, and nothing else.
func TestBreakTypoToFalse(t *testing.T) {
	r := subject(t)
	c, err := r.CopyTo(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.StagingOn("isp-full-generic", StagingValue("maybe"), nil); err == nil {
		t.Fatal("the copy resolves a typo before it is broken")
	}
	if err := c.BreakTypoToFalse(); err != nil {
		t.Fatal(err)
	}
	p, _, err := c.StagingOn("isp-full-generic", StagingValue("maybe"), nil)
	if err != nil {
		t.Fatalf("the broken copy still fails: %v", err)
	}
	if p.MultusValues["stageCniPlugins"] != false {
		t.Fatalf("the broken copy resolves a typo to %v", p.MultusValues["stageCniPlugins"])
	}
	if p, _, err := c.StagingOn("isp-full-generic", Unset, nil); err != nil || p.MultusValues["stageCniPlugins"] != true {
		t.Fatalf("the broken copy changed the unset default: %v %v", p, err)
	}
}

// A build's provenance matches the Dockerfile it followed, and a build
// without the release's patches is refused, naming what differs.
func TestCheckProvenance(t *testing.T) {
	img, err := subject(t).MultusImage()
	if err != nil {
		t.Fatal(err)
	}
	want, err := img.Provenance()
	if err != nil {
		t.Fatal(err)
	}
	write := func(m map[string]string) string {
		var b strings.Builder
		for k, v := range m {
			b.WriteString(k + "=" + v + "\n")
		}
		p := filepath.Join(t.TempDir(), "multus.provenance")
		os.WriteFile(p, []byte(b.String()), 0o644)
		return p
	}
	if err := img.CheckProvenance(write(want)); err != nil {
		t.Fatalf("the release's own provenance: %v", err)
	}
	unpatched := map[string]string{}
	for k, v := range want {
		unpatched[k] = v
	}
	unpatched["patches"] = ""
	if err := img.CheckProvenance(write(unpatched)); err == nil || !strings.Contains(err.Error(), "patches") {
		t.Fatalf("an unpatched build: %v", err)
	}
	if os.Getenv("VCF_MULTUS_PROVENANCE") != "" {
		if err := img.CheckProvenance(os.Getenv("VCF_MULTUS_PROVENANCE")); err != nil {
			t.Fatal(err)
		}
	}
}
