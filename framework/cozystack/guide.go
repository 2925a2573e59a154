package cozystack

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cozystack/vlan-conformance/framework/claims"
	"sigs.k8s.io/yaml"
)

// Guide is the guide the specs take their inputs from: the release's
// docs/vm-external-vlan.md, or the page --guide names (the website's, or a
// copy), so what is tested is what it says.
type Guide struct {
	Path   string  // absolute
	Source string  // FromRelease or FromFlag
	Title  string  // the front matter's title ("" when it has none)
	SHA256 string  // hex, of the file's bytes, front matter included
	Text   string  // what follows the front matter
	Blocks []Block // fenced code blocks, in order
}

// Where a guide comes from (Guide.Source).
const (
	FromRelease = "release" // the checkout's GuidePath
	FromFlag    = "--guide" // the file --guide names
)

// GuideFile is the guide's file name, in a release and on the website
// (content/en/docs/<version>/networking/).
const GuideFile = "vm-external-vlan.md"

// Block is one fenced code block of the guide.
type Block struct {
	Line    int    // of the opening fence, in the file, from 1
	Lang    string // the info string's first word ("" when none)
	Content string
	Heading string // the nearest heading above it
	Step    int    // n under a "Step n ..." or "n. ..." heading (and its sub-headings), else 0
}

// Guide reads the release's guide; an error wrapping fs.ErrNotExist means
// the release ships none.
func (r *Release) Guide() (*Guide, error) {
	return ReadGuide(r.Path(GuidePath), FromRelease)
}

// Origin names the guide as the report does: its path and where it came
// from, so that a reader knows which text the verdicts rest on.
func (g *Guide) Origin() string {
	switch g.Source {
	case FromRelease:
		return GuidePath + " as the release ships it"
	case FromFlag:
		o := g.Path + ", given by " + FromFlag
		if g.Title != "" {
			o += fmt.Sprintf(" (title %q)", g.Title)
		}
		return o
	}
	return g.Path
}

// FindGuide is the guide file --guide names: path itself, a markdown
// file, or the one GuideFile under the directory path. A directory with
// several (a website checkout, one page per version) is ambiguous.
func FindGuide(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, errors.Unwrap(err))
	}
	if !fi.IsDir() {
		if ext := strings.ToLower(filepath.Ext(abs)); ext != ".md" && ext != ".markdown" {
			return "", fmt.Errorf("%s: not a markdown file (want the guide's %s, or a directory holding it)", path, GuideFile)
		}
		return abs, nil
	}
	var found []string
	err = filepath.WalkDir(abs, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && p != abs && strings.HasPrefix(d.Name(), "."):
			return filepath.SkipDir // .git, .cache
		case !d.IsDir() && d.Name() == GuideFile:
			found = append(found, p)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("%s: no %s in this directory or below", path, GuideFile)
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("%s: %d guides, pass one of them: %s", path, len(found), strings.Join(found, ", "))
}

// ReadGuide reads and parses the guide at path; an empty guide is an error.
func ReadGuide(path, source string) (*Guide, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("the guide: %w", err)
	}
	if !utf8.Valid(b) {
		return nil, fmt.Errorf("the guide %s: not text", path)
	}
	g, err := ParseGuide(path, b)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(g.Text) == "" {
		return nil, fmt.Errorf("the guide %s: empty", path)
	}
	g.Source = source
	return g, nil
}

var (
	fence   = regexp.MustCompile("^( {0,3})(`{3,}|~{3,})\\s*([^`\\s]*)")
	heading = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)(\s+#+)?\s*$`)
	// The release's guide numbers its steps "Step 1 — ...", the
	// website's "1. ...".
	stepRe = regexp.MustCompile(`(?i)^(?:step\s+(\d+)\b|(\d+)[.)]\s)`)
)

// frontMatter splits Hugo's YAML front matter ("---" lines around it, at
// the very top, as the website's pages have) off b: its title, the text
// after it, and how many lines it took, so that blocks keep the file's
// own line numbers.
func frontMatter(path string, b []byte) (title, text string, lines int, err error) {
	s := strings.TrimPrefix(string(b), "\ufeff")
	ls := strings.SplitAfter(s, "\n")
	if strings.TrimRight(ls[0], " \r\n") != "---" {
		return "", s, 0, nil
	}
	for i := 1; i < len(ls); i++ {
		if t := strings.TrimRight(ls[i], " \r\n"); t != "---" && t != "..." {
			continue
		}
		var fm struct {
			Title string `json:"title"`
		}
		if err := yaml.Unmarshal([]byte(strings.Join(ls[1:i], "")), &fm); err != nil {
			return "", "", 0, fmt.Errorf("the guide %s: its front matter (lines 1-%d): %w", path, i+1, err)
		}
		return fm.Title, strings.Join(ls[i+1:], ""), i + 1, nil
	}
	return "", "", 0, fmt.Errorf("the guide %s: its front matter (\"---\" on line 1) is never closed", path)
}

// ParseGuide splits a guide into its front matter's title and its fenced
// blocks (CommonMark fences; ATX headings only, which is what the guide
// uses).
func ParseGuide(path string, b []byte) (*Guide, error) {
	sum := sha256.Sum256(b)
	title, text, skipped, err := frontMatter(path, b)
	if err != nil {
		return nil, err
	}
	g := &Guide{Path: path, Title: title, SHA256: hex.EncodeToString(sum[:]), Text: text}
	var cur *Block
	var closer, indent string
	head, step, stepLevel := "", 0, 0
	for i, line := range strings.Split(strings.TrimSuffix(g.Text, "\n"), "\n") {
		if cur != nil {
			if t := strings.TrimSpace(line); strings.HasPrefix(t, closer) && strings.Trim(t, closer[:1]) == "" && len(line)-len(strings.TrimLeft(line, " ")) < 4 {
				g.Blocks = append(g.Blocks, *cur)
				cur = nil
				continue
			}
			cur.Content += strings.TrimPrefix(line, indent) + "\n"
			continue
		}
		if m := fence.FindStringSubmatch(line); m != nil {
			indent, closer = m[1], m[2]
			cur = &Block{Line: skipped + i + 1, Lang: m[3], Heading: head, Step: step}
			continue
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			head = m[2]
			level := len(m[1])
			if s := stepRe.FindStringSubmatch(head); s != nil {
				step, _ = strconv.Atoi(s[1] + s[2])
				stepLevel = level
			} else if level <= stepLevel {
				step, stepLevel = 0, 0
			}
		}
	}
	if cur != nil { // an unclosed fence runs to the end
		g.Blocks = append(g.Blocks, *cur)
	}
	return g, nil
}

// Step are the blocks of step n, in order.
func (g *Guide) Step(n int) []Block {
	var out []Block
	for _, b := range g.Blocks {
		if b.Step == n {
			out = append(out, b)
		}
	}
	return out
}

// Says tells whether the guide says fragment (claims.Says: verbatim up to
// whitespace and markup; "[...]" or "…" stands for any text).
func (g *Guide) Says(fragment string) bool { return claims.Says(g.Text, fragment) }

// yamlDocs are the guide's YAML blocks' documents, each with its block;
// blocks that do not parse are named in bad.
func (g *Guide) yamlDocs() (docs []*unstructured.Unstructured, from []Block, bad []string) {
	for _, b := range g.Blocks {
		if b.Lang != "yaml" && b.Lang != "yml" {
			continue
		}
		ds, err := decode(b.Content)
		if err != nil {
			bad = append(bad, fmt.Sprintf("line %d: %v", b.Line, err))
			continue
		}
		for _, d := range ds {
			docs, from = append(docs, d), append(from, b)
		}
	}
	return docs, from, bad
}

// pick is the one candidate, preferring those of step when several are.
func pick(what string, step int, idx []int, from []Block, bad []string) (int, error) {
	if len(idx) > 1 {
		var in []int
		for _, i := range idx {
			if from[i].Step == step {
				in = append(in, i)
			}
		}
		idx = in
	}
	switch {
	case len(idx) == 1:
		return idx[0], nil
	case len(idx) == 0 && len(bad) > 0:
		return 0, fmt.Errorf("the guide has no %s block (YAML blocks that do not parse: %s)", what, strings.Join(bad, "; "))
	case len(idx) == 0:
		return 0, fmt.Errorf("the guide has no %s block", what)
	}
	return 0, fmt.Errorf("the guide has %d %s blocks in step %d", len(idx), what, step)
}

// GuideNAD is the NetworkAttachmentDefinition the guide has the user create.
type GuideNAD struct {
	Name, Namespace string // Namespace "" when the block has none
	Config          string // spec.config, verbatim
	Block           Block
}

// NAD is step 2's NetworkAttachmentDefinition.
func (g *Guide) NAD() (*GuideNAD, error) {
	docs, from, bad := g.yamlDocs()
	var idx []int
	for i, d := range docs {
		if d.GetKind() == "NetworkAttachmentDefinition" {
			idx = append(idx, i)
		}
	}
	i, err := pick("NetworkAttachmentDefinition", 2, idx, from, bad)
	if err != nil {
		return nil, err
	}
	cfg, _, _ := unstructured.NestedString(docs[i].Object, "spec", "config")
	if cfg == "" {
		return nil, fmt.Errorf("the guide's NetworkAttachmentDefinition (line %d) has no spec.config", from[i].Line)
	}
	return &GuideNAD{Name: docs[i].GetName(), Namespace: docs[i].GetNamespace(), Config: cfg, Block: from[i]}, nil
}

// vmValueKeys mark a bare YAML block as vm-instance values.
var vmValueKeys = []string{"instanceType", "instanceProfile", "disks", "networks", "subnets", "cloudInit"}

// GuideVM is the vm-instance application of the guide's step 3.
type GuideVM struct {
	// Name and Namespace are the manifest's metadata; "" when the guide
	// gives bare values.
	Name, Namespace string
	Values          map[string]any
	Block           Block
}

// VMValues are step 3's vm-instance values: the spec of a VMInstance
// manifest, or a bare block of values.
func (g *Guide) VMValues() (*GuideVM, error) {
	docs, from, bad := g.yamlDocs()
	var idx []int
	for i, d := range docs {
		if d.GetKind() == "VMInstance" {
			idx = append(idx, i)
			continue
		}
		for _, k := range vmValueKeys {
			if _, ok := d.Object[k]; ok && d.GetKind() == "" && d.GetAPIVersion() == "" {
				idx = append(idx, i)
				break
			}
		}
	}
	i, err := pick("vm-instance values", 3, idx, from, bad)
	if err != nil {
		return nil, err
	}
	d := docs[i]
	if d.GetKind() != "VMInstance" {
		return &GuideVM{Values: d.Object, Block: from[i]}, nil
	}
	spec, _, _ := unstructured.NestedMap(d.Object, "spec")
	return &GuideVM{Name: d.GetName(), Namespace: d.GetNamespace(), Values: spec, Block: from[i]}, nil
}

// UserData is the values' cloudInit: the userData the chart puts in the
// VM's cloud-init Secret ("" when none).
func (v *GuideVM) UserData() string {
	s, _ := v.Values["cloudInit"].(string)
	return s
}

// NetplanFile is a netplan file the userData writes (write_files).
type NetplanFile struct {
	Path, Permissions, Content string
	Config                     map[string]any // Content parsed
}

// Netplan are the netplan files of the userData's write_files (none when
// it has no #cloud-config).
func (v *GuideVM) Netplan() ([]NetplanFile, error) {
	ud := v.UserData()
	if !strings.HasPrefix(strings.TrimSpace(ud), "#cloud-config") {
		return nil, nil
	}
	var cc struct {
		WriteFiles []struct {
			Path, Content, Encoding string
			Permissions             any // "0600", or a number when unquoted
		} `json:"write_files"`
	}
	if err := yaml.Unmarshal([]byte(ud), &cc); err != nil {
		return nil, fmt.Errorf("the guide's cloud-config: %w", err)
	}
	var out []NetplanFile
	for _, f := range cc.WriteFiles {
		if !strings.HasPrefix(f.Path, "/etc/netplan/") {
			continue
		}
		if f.Encoding != "" && f.Encoding != "text/plain" {
			return nil, fmt.Errorf("the guide's cloud-config writes %s with encoding %s, which the suite does not read", f.Path, f.Encoding)
		}
		n := NetplanFile{Path: f.Path, Content: f.Content}
		if f.Permissions != nil {
			n.Permissions = fmt.Sprint(f.Permissions)
		}
		if err := yaml.Unmarshal([]byte(f.Content), &n.Config); err != nil {
			return nil, fmt.Errorf("the guide's %s: %w", f.Path, err)
		}
		out = append(out, n)
	}
	return out, nil
}

// Addresses are the static addresses the file gives each interface
// (ethernets, bridges, vlans, bonds).
func (n NetplanFile) Addresses() map[string][]string {
	out := map[string][]string{}
	net, _ := n.Config["network"].(map[string]any)
	for _, section := range []string{"ethernets", "bridges", "vlans", "bonds"} {
		ifs, _ := net[section].(map[string]any)
		for name, c := range ifs {
			m, _ := c.(map[string]any)
			as, _ := m["addresses"].([]any)
			for _, a := range as {
				if s, ok := a.(string); ok {
					out[name] = append(out[name], s)
				}
			}
		}
	}
	return out
}

// UserDataAt is the guide's userData with its one static address (the
// netplan of step 3, 203.0.113.10/24 in the guide) replaced by addr: each
// VM of a run needs its own address, and nothing else of the guide's
// cloud-config changes. A guide whose netplan gives no address, or more
// than one, or whose userData names it more than once, cannot be used so,
// and says why.
func (v *GuideVM) UserDataAt(addr string) (string, error) {
	old, _, err := v.Address()
	if err != nil {
		return "", err
	}
	ud := v.UserData()
	if n := strings.Count(ud, old); n != 1 {
		return "", fmt.Errorf("the guide's step 3 userData (line %d) names its address %s %d times; the suite replaces exactly one", v.Block.Line, old, n)
	}
	return strings.Replace(ud, old, addr, 1), nil
}

// Address is the one static address the netplan of step 3 gives, and the
// interface it gives it to (enp2s0 in the guide).
func (v *GuideVM) Address() (addr, nic string, err error) {
	files, err := v.Netplan()
	if err != nil {
		return "", "", err
	}
	var found []string
	for _, f := range files {
		for name, as := range f.Addresses() {
			found = append(found, as...)
			if len(as) > 0 {
				nic = name
			}
		}
	}
	if len(found) != 1 {
		return "", "", fmt.Errorf("the guide's step 3 netplan (line %d) gives %d static addresses %v; the suite replaces exactly one with each VM's own", v.Block.Line, len(found), found)
	}
	return found[0], nic, nil
}
