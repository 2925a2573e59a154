// Package cnibin judges a node's /opt/cni/bin against the stager's image
// (CLAIMS.md STG-01): "It installs 14 of the upstream reference plugins",
// each the image's copy, mode 0755. The lab and the cluster both assert it
// with HoldTheFourteen, so the claim is as strict wherever it is proved.
package cnibin

import (
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/onsi/gomega/format"
	"github.com/onsi/gomega/types"

	"github.com/cozystack/vlan-conformance/framework/failures"
	"github.com/cozystack/vlan-conformance/framework/stager"
)

// Image is the stager's image's /cni-plugins: a regular file's name -> the
// sha256 of its content.
type Image map[string]string

// Mode is what every staged plugin must be, so that any user can run it.
const Mode fs.FileMode = 0o755

// HoldTheFourteen matches a directory listing (map[string]stager.File,
// name -> entry) holding each of the 14 staged plugins as a regular file,
// byte-identical to image's copy, mode 0755. Other entries are the node's
// own (loopback, flannel, ...) and do not matter unless
// AndNothingElseWritten says so.
func HoldTheFourteen(image Image) *Matcher {
	return &Matcher{image: image, dir: "/opt/cni/bin"}
}

// Matcher is HoldTheFourteen's matcher.
type Matcher struct {
	image   Image
	dir     string
	written []string
	exact   bool
	context string
}

// AndNothingElseWritten adds that the run wrote exactly the 14: each of
// them (a plugin kept from before was not staged) and no other name.
func (m *Matcher) AndNothingElseWritten(written []string) *Matcher {
	c := *m
	c.written, c.exact = slices.Clone(written), true
	return &c
}

// In names the directory the listing is of, as a failure shows it
// ("kind-worker:/opt/cni/bin").
func (m *Matcher) In(dir string) *Matcher {
	c := *m
	c.dir = dir
	return &c
}

// Showing puts context (a run's table and log) after the offending names,
// so a failure's first line still says what is wrong.
func (m *Matcher) Showing(context string) *Matcher {
	c := *m
	c.context = context
	return &c
}

var _ types.GomegaMatcher = (*Matcher)(nil)

func (m *Matcher) Match(actual any) (bool, error) {
	p, err := m.problems(actual)
	return len(p) == 0, err
}

func (m *Matcher) FailureMessage(actual any) string {
	p, err := m.problems(actual)
	if err != nil {
		return err.Error()
	}
	msg := fmt.Sprintf("%s must hold the 14 staged plugins, each the image's copy, mode %04o%s; %d wrong:\n  %s",
		m.dir, uint32(Mode), m.andWritten(), len(p), strings.Join(p, "\n  "))
	if m.context != "" {
		msg += "\n" + m.context
	}
	return msg
}

func (m *Matcher) NegatedFailureMessage(actual any) string {
	return fmt.Sprintf("%s must not hold the 14 staged plugins as the image's copies, mode %04o%s, but does:\n%s",
		m.dir, uint32(Mode), m.andWritten(), format.Object(actual, 1))
}

func (m *Matcher) andWritten() string {
	if m.exact {
		return ", written by the run, which wrote nothing else"
	}
	return ""
}

// problems is one line per offending name, naming what is wrong with it.
func (m *Matcher) problems(actual any) ([]string, error) {
	files, ok := actual.(map[string]stager.File)
	if !ok {
		return nil, fmt.Errorf("HoldTheFourteen expects a map[string]stager.File (a directory listing), got:\n%s", format.Object(actual, 1))
	}
	var out []string
	for _, name := range stager.StagedPlugins {
		if p := m.problem(name, files); p != "" {
			out = append(out, name+": "+p)
		}
	}
	if m.exact {
		for _, name := range m.written {
			if !stager.IsStaged(name) {
				out = append(out, name+": written, but "+failures.NothingButTheFourteen+"; "+m.offered(name))
			}
		}
	}
	return out, nil
}

func (m *Matcher) problem(name string, files map[string]stager.File) string {
	want, carried := m.image[name]
	f, present := files[name]
	var wrong []string
	if !carried {
		wrong = append(wrong, "the image carries no /cni-plugins/"+name)
	}
	switch {
	case !present:
		wrong = append(wrong, "absent")
	case f.Kind != "file":
		wrong = append(wrong, fmt.Sprintf("a %s, not a regular file", kind(f)))
	case carried && f.Hash != want:
		wrong = append(wrong, fmt.Sprintf("sha256 %.12s (%s), the image's copy is %.12s", f.Hash, identity(f), want))
	}
	if present && f.Perm != Mode {
		wrong = append(wrong, fmt.Sprintf("mode %04o, not %04o", uint32(f.Perm), uint32(Mode)))
	}
	if m.exact && !slices.Contains(m.written, name) {
		wrong = append(wrong, "not written by the run")
	}
	return strings.Join(wrong, "; ")
}

func (m *Matcher) offered(name string) string {
	if _, ok := m.image[name]; ok {
		return "the image offers it at /cni-plugins/" + name
	}
	return "the image does not offer it"
}

func kind(f stager.File) string {
	if f.Kind == "" {
		return "entry of unknown kind"
	}
	return f.Kind
}

// identity is what the listing knows of where the bytes came from: a
// lab's listing names the release, a node's only the size.
func identity(f stager.File) string {
	if f.Version != "" || f.Pristine {
		return f.Describe()
	}
	return fmt.Sprintf("%d bytes", f.Size)
}
