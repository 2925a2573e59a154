package cozystack

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func guide(t *testing.T) *Guide {
	t.Helper()
	g, err := subject(t).Guide()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestGuideAsShipped(t *testing.T) {
	g := guide(t)
	b, err := os.ReadFile(g.Path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if g.SHA256 != hex.EncodeToString(sum[:]) || g.Text != string(b) || !strings.HasSuffix(g.Path, GuidePath) || g.Source != FromRelease || g.Origin() != GuidePath+" as the release ships it" {
		t.Fatalf("the guide read is not the file: %s %s", g.Path, g.SHA256)
	}
	// One YAML block per numbered step; the opt-out block precedes them.
	for _, s := range []int{1, 2, 3} {
		if bs := g.Step(s); len(bs) != 1 || bs[0].Lang != "yaml" || !strings.HasPrefix(bs[0].Heading, "Step ") {
			t.Errorf("step %d: blocks %+v", s, bs)
		}
	}
	if bs := g.Step(0); len(bs) == 0 || bs[0].Heading != "Staging the reference CNI plugins" || !strings.Contains(bs[0].Content, "stageCniPlugins: false") {
		t.Errorf("the blocks outside the steps: %+v", bs)
	}
}

// Step 2's NAD, read off the guide, is the bridge step 1 creates.
func TestGuideNAD(t *testing.T) {
	g := guide(t)
	nad, err := g.NAD()
	if err != nil {
		t.Fatal(err)
	}
	if nad.Name != "vlan100" || nad.Namespace != "tenant-example" || nad.Block.Step != 2 {
		t.Fatalf("%+v", nad)
	}
	var cfg map[string]any
	if err := json.Unmarshal([]byte(nad.Config), &cfg); err != nil {
		t.Fatalf("spec.config is not JSON: %v\n%s", err, nad.Config)
	}
	if cfg["type"] != "bridge" || cfg["bridge"] != "br100" || !reflect.DeepEqual(cfg["ipam"], map[string]any{}) {
		t.Fatalf("spec.config: %v", cfg)
	}
	step1, _ := decode(g.Step(1)[0].Content)
	if len(step1) != 1 {
		t.Fatalf("step 1's block: %+v", g.Step(1))
	}
	bridges, _ := step1[0].Object["network"].(map[string]any)["bridges"].(map[string]any)
	if _, ok := bridges[cfg["bridge"].(string)]; !ok {
		t.Fatalf("the NAD's bridge %v is not one step 1 creates: %v", cfg["bridge"], bridges)
	}
}

// Step 3's values attach the VM to step 2's NAD with an address in step
// 1's subnet, written by netplan from the userData.
func TestGuideVMValues(t *testing.T) {
	g := guide(t)
	v, err := g.VMValues()
	if err != nil {
		t.Fatal(err)
	}
	nad, _ := g.NAD()
	if v.Block.Step != 3 || v.Name != "" || v.Namespace != "" {
		t.Fatalf("step 3 is no longer bare values: %+v", v)
	}
	if v.Values["instanceType"] != "u1.medium" || v.Values["instanceProfile"] != "ubuntu" {
		t.Errorf("instancetype and preference: %v", v.Values)
	}
	if want := []any{map[string]any{"name": nad.Name}}; !reflect.DeepEqual(v.Values["networks"], want) {
		t.Errorf("networks %v, want %v", v.Values["networks"], want)
	}
	if !strings.HasPrefix(v.UserData(), "#cloud-config\n") || !strings.Contains(v.UserData(), "netplan apply") {
		t.Errorf("userData: %q", v.UserData())
	}
	files, err := v.Netplan()
	if err != nil || len(files) != 1 {
		t.Fatalf("netplan files %+v: %v", files, err)
	}
	f := files[0]
	if f.Path != "/etc/netplan/60-vlan100.yaml" || f.Permissions != "0600" {
		t.Errorf("%+v", f)
	}
	addrs := f.Addresses()
	if len(addrs) != 1 || len(addrs["enp2s0"]) != 1 {
		t.Fatalf("addresses %v", addrs)
	}
	guest := netip.MustParsePrefix(addrs["enp2s0"][0])
	if !netip.MustParsePrefix("203.0.113.0/24").Contains(guest.Addr()) || guest.Addr() == netip.MustParseAddr("203.0.113.2") {
		t.Errorf("the guest's %s is not a free address of step 1's VLAN", guest)
	}
}

func TestGuideSays(t *testing.T) {
	g := guide(t)
	for _, s := range []string{
		"it works with a Linux bridge and the bridge CNI plugin, and it does not work with macvlan.",
		"Because KubeVirt puts the guest's MAC on the wire — not the macvlan child's",
		"staging adds the ten it does not carry and rewrites the four that overlap with the same upstream version (v1.9.1 on both sides)",
		"k3s keeps its own copies under /var/lib/rancher/k3s/data/cni [...] so /opt/cni/bin there can lack even bridge",
		"The   node's default route\n must stay on the management interface.",
		"KubeVirt user guide, Interfaces and Networks",
	} {
		if !g.Says(s) {
			t.Errorf("the guide does not say %q", s)
		}
	}
	for _, s := range []string{"", "it works with macvlan", "so /opt/cni/bin there can lack even bridge [...] k3s keeps its own copies"} {
		if g.Says(s) {
			t.Errorf("the guide says %q", s)
		}
	}
}

// A guide whose step 3 is a VMInstance manifest, with the fences and
// headings the parser must get right.
func TestParseGuideManifest(t *testing.T) {
	text := "# T\n## Step 2 — NAD\n### Details\n~~~yaml\napiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: v7\nspec:\n  config: '{\"type\":\"bridge\"}'\n~~~\n" +
		"## Step 3 — VM\n````markdown\n```yaml\nkind: NetworkAttachmentDefinition\n```\n````\n" +
		"  ```yaml\n  apiVersion: apps.cozystack.io/v1alpha1\n  kind: VMInstance\n  metadata:\n    name: vm1\n    namespace: tenant-x\n  spec:\n    networks:\n    - name: v7\n  ```\n" +
		"## Gotchas\n```sh\nnetplan apply\n"
	g, err := ParseGuide("x.md", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range g.Blocks {
		got = append(got, strings.Join([]string{b.Lang, b.Heading, string(rune('0' + b.Step))}, "|"))
	}
	want := []string{"yaml|Details|2", "markdown|Step 3 — VM|3", "yaml|Step 3 — VM|3", "sh|Gotchas|0"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("blocks %v, want %v", got, want)
	}
	if g.Blocks[2].Content[:11] != "apiVersion:" || g.Blocks[3].Content != "netplan apply\n" {
		t.Fatalf("contents %q %q", g.Blocks[2].Content, g.Blocks[3].Content)
	}
	nad, err := g.NAD()
	if err != nil || nad.Name != "v7" || nad.Namespace != "" || nad.Config != `{"type":"bridge"}` {
		t.Fatalf("%+v %v", nad, err)
	}
	app, err := g.VMApp()
	if err != nil {
		t.Fatal(err)
	}
	if rel := app.Release(); rel.Name != "vm-instance-vm1" || rel.Namespace != "tenant-x" || !reflect.DeepEqual(app.Values["networks"], []any{map[string]any{"name": "v7"}}) {
		t.Fatalf("%+v", app)
	}
	broken, err := ParseGuide("y.md", []byte("## Step 3\n```yaml\nfoo: [\n```\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := broken.VMValues(); err == nil || !strings.Contains(err.Error(), "do not parse") {
		t.Fatalf("a broken block: %v", err)
	}
}

// Each VM gets the guide's userData at its own address, nothing else
// changed; a netplan the suite cannot give one address is refused.
func TestUserDataAt(t *testing.T) {
	v, err := guide(t).VMValues()
	if err != nil {
		t.Fatal(err)
	}
	old, nic, err := v.Address()
	if err != nil {
		t.Fatal(err)
	}
	if nic != "enp2s0" {
		t.Errorf("the guide's VLAN NIC: %q", nic)
	}
	ud, err := v.UserDataAt("198.51.100.7/24")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(ud, old) || strings.Replace(ud, "198.51.100.7/24", old, 1) != v.UserData() {
		t.Errorf("not the guide's userData with %s replaced:\n%s", old, ud)
	}
	two := &GuideVM{Values: map[string]any{"cloudInit": strings.Replace(v.UserData(), "- "+old, "- "+old+"\n              - 192.0.2.9/24", 1)}}
	if _, err := two.UserDataAt("198.51.100.7/24"); err == nil || !strings.Contains(err.Error(), "gives 2 static addresses") {
		t.Errorf("two addresses: %v", err)
	}
	none := &GuideVM{Values: map[string]any{"cloudInit": "#cloud-config\nruncmd: [true]\n"}}
	if _, err := none.UserDataAt("198.51.100.7/24"); err == nil || !strings.Contains(err.Error(), "gives 0 static addresses") {
		t.Errorf("no address: %v", err)
	}
}

// websitePage is a page as the website ships the guide: Hugo front matter,
// then steps numbered "1." rather than "Step 1 —" (a sketch of its shape,
// not its text).
const websitePage = `---
title: "Attaching a VM to an External VLAN"
linkTitle: "VM External VLAN"
weight: 35
---

Point a bridge-type NetworkAttachmentDefinition at it.

## 2. NetworkAttachmentDefinition

` + "```yaml" + `
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: vlan100
  namespace: tenant-example
spec:
  config: '{"type":"bridge","bridge":"br100","ipam":{}}'
` + "```" + `

## 3. Attach the VM

` + "```yaml" + `
instanceType: u1.medium
networks:
  - name: vlan100
` + "```" + `
`

// The front matter is not the guide's text: its title is kept, and the
// blocks after it keep the file's own line numbers.
func TestParseGuideFrontMatter(t *testing.T) {
	g, err := ParseGuide("page.md", []byte(websitePage))
	if err != nil {
		t.Fatal(err)
	}
	if g.Title != "Attaching a VM to an External VLAN" {
		t.Errorf("title %q", g.Title)
	}
	if strings.Contains(g.Text, "linkTitle") || !strings.HasPrefix(g.Text, "\nPoint a bridge-type") || !g.Says("Point a bridge-type NetworkAttachmentDefinition at it") {
		t.Errorf("the text after the front matter: %q", g.Text)
	}
	lines := strings.Split(websitePage, "\n")
	if len(g.Blocks) != 2 {
		t.Fatalf("blocks %+v", g.Blocks)
	}
	for i, want := range []int{2, 3} {
		b := g.Blocks[i]
		if !strings.HasPrefix(lines[b.Line-1], "```yaml") || b.Step != want {
			t.Errorf("block %d: line %d is %q, step %d (want a fence, step %d)", i, b.Line, lines[b.Line-1], b.Step, want)
		}
	}
	if g.Blocks[0].Line != 11 {
		t.Errorf("the NAD's fence is on the file's line 11, not %d", g.Blocks[0].Line)
	}
	if nad, err := g.NAD(); err != nil || nad.Block.Line != 11 {
		t.Errorf("the NAD: %+v, %v", nad, err)
	}
	if _, err := ParseGuide("open.md", []byte("---\ntitle: x\n\n# Guide\n")); err == nil || !strings.Contains(err.Error(), "never closed") {
		t.Errorf("front matter never closed: %v", err)
	}
	if _, err := ParseGuide("bad.md", []byte("---\ntitle: [\n---\n# Guide\n")); err == nil || !strings.Contains(err.Error(), "front matter (lines 1-3)") {
		t.Errorf("front matter that is not YAML: %v", err)
	}
	// The release's guide has none: nothing is taken off it.
	if g, err := ParseGuide("plain.md", []byte("# Guide\n\n---\n\ntext\n")); err != nil || g.Title != "" || !strings.HasPrefix(g.Text, "# Guide") {
		t.Errorf("a guide without front matter: %+v, %v", g, err)
	}
}

// --guide names a markdown file, or a directory holding exactly one guide.
func TestFindGuide(t *testing.T) {
	write := func(p, text string) string {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	site := t.TempDir()
	next := write(filepath.Join(site, "content/en/docs/next/networking", GuideFile), websitePage)
	v16 := write(filepath.Join(site, "content/en/docs/v1.6/networking", GuideFile), websitePage)
	write(filepath.Join(site, ".git/x", GuideFile), websitePage) // not the website's pages
	copyMD := write(filepath.Join(t.TempDir(), "copy.md"), websitePage)
	notMD := write(filepath.Join(t.TempDir(), "guide.txt"), websitePage)

	for _, tc := range []struct{ arg, want string }{
		{filepath.Dir(next), next}, // the version's networking/ directory
		{copyMD, copyMD},           // a copy, under any name
		{next, next},
	} {
		if got, err := FindGuide(tc.arg); err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %s", tc.arg, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		arg  string
		want []string
	}{
		{site, []string{"2 guides, pass one of them", next, v16}},
		{t.TempDir(), []string{"no " + GuideFile}},
		{filepath.Join(site, "missing"), []string{"missing: no such file or directory"}},
		{notMD, []string{"not a markdown file"}},
	} {
		_, err := FindGuide(tc.arg)
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v; want it to say %q", tc.arg, err, w)
			}
		}
	}
}

// A guide with nothing after its front matter is no guide; a release
// without one says so with fs.ErrNotExist.
func TestReadGuideRefusesAnEmptyGuide(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, GuideFile)
	os.WriteFile(empty, []byte("---\ntitle: x\n---\n\n  \n"), 0o644)
	if _, err := ReadGuide(empty, FromFlag); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("an empty guide: %v", err)
	}
	if _, err := (&Release{Dir: dir}).Guide(); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a release without a guide: %v", err)
	}
	g, err := ReadGuide(writeTemp(t, websitePage), FromFlag)
	if err != nil || g.Source != FromFlag || !strings.Contains(g.Origin(), "given by --guide") || !strings.Contains(g.Origin(), g.Title) {
		t.Errorf("a guide given by --guide: %+v, %v", g, err)
	}
}

func writeTemp(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), GuideFile)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
