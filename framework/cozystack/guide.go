package cozystack

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Guide is docs/vm-external-vlan.md as the release ships it: the specs
// take their inputs from its blocks, so what is tested is what it says.
type Guide struct {
	Path   string // absolute
	SHA256 string // hex, of the file's bytes
	Text   string
	Blocks []Block // fenced code blocks, in order
}

// Block is one fenced code block of the guide.
type Block struct {
	Line    int    // of the opening fence, from 1
	Lang    string // the info string's first word ("" when none)
	Content string
	Heading string // the nearest heading above it
	Step    int    // n under a "Step n ..." heading (and its sub-headings), else 0
}

// Guide reads the release's guide.
func (r *Release) Guide() (*Guide, error) {
	p := r.Path(GuidePath)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("the guide: %w", err)
	}
	return ParseGuide(p, b), nil
}

var (
	fence   = regexp.MustCompile("^( {0,3})(`{3,}|~{3,})\\s*([^`\\s]*)")
	heading = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)(\s+#+)?\s*$`)
	stepRe  = regexp.MustCompile(`(?i)^step\s+(\d+)\b`)
)

// ParseGuide splits a guide into its fenced blocks (CommonMark fences;
// ATX headings only, which is what the guide uses).
func ParseGuide(path string, b []byte) *Guide {
	sum := sha256.Sum256(b)
	g := &Guide{Path: path, SHA256: hex.EncodeToString(sum[:]), Text: string(b)}
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
			cur = &Block{Line: i + 1, Lang: m[3], Heading: head, Step: step}
			continue
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			head = m[2]
			level := len(m[1])
			if s := stepRe.FindStringSubmatch(head); s != nil {
				step, _ = strconv.Atoi(s[1])
				stepLevel = level
			} else if level <= stepLevel {
				step, stepLevel = 0, 0
			}
		}
	}
	if cur != nil { // an unclosed fence runs to the end
		g.Blocks = append(g.Blocks, *cur)
	}
	return g
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

var (
	mdLink    = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	emphOpen  = regexp.MustCompile(`(^|[^\pL\pN*_])[*_]+`)
	emphClose = regexp.MustCompile(`[*_]+($|[^\pL\pN*_])`)
)

// normalise drops what markdown adds to prose (links' targets, backticks,
// emphasis) and collapses whitespace, so that a sentence matches however
// the guide wraps or marks it up.
func normalise(s string) string {
	s = mdLink.ReplaceAllString(s, "$1")
	s = strings.NewReplacer("`", "", "**", "", "__", "").Replace(s)
	s = emphOpen.ReplaceAllString(s, "$1")
	s = emphClose.ReplaceAllString(s, "$1")
	return strings.Join(strings.Fields(s), " ")
}

// Says tells whether the guide still says fragment, verbatim up to
// whitespace and markup; "[...]" or "…" in fragment stands for any text.
func (g *Guide) Says(fragment string) bool {
	text := normalise(g.Text)
	at, matched := 0, false
	for _, part := range strings.Split(strings.ReplaceAll(fragment, "…", "[...]"), "[...]") {
		part = normalise(part)
		if part == "" {
			continue
		}
		i := strings.Index(text[at:], part)
		if i < 0 {
			return false
		}
		at += i + len(part)
		matched = true
	}
	return matched
}

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
