package cozystack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/cozystack/vlan-conformance/framework/atomicfile"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Change is one thing the suite did to what the release renders or ships:
// a value it set, an object it faked for a lookup, an image reference it
// rewrote, a patch it applied. Nothing may differ without one.
type Change struct {
	Kind   string // "value", "lookup", "image", "patch", "node", "subject"
	Object string // what it applies to, e.g. "DaemonSet cozy-multus/cozy-multus"
	What   string // the change itself
	Why    string
	Diff   string // for patches: a unified diff of the rendered and the applied object
}

// Ledger collects the run's changes, in the order they were made.
type Ledger struct {
	changes []Change
	file    string // where every Add is saved (Persist); "" = memory only
}

// Add records a change; an identical one is recorded once.
func (l *Ledger) Add(c Change) {
	for _, o := range l.changes {
		if o.Kind == c.Kind && o.Object == c.Object && o.What == c.What {
			return
		}
	}
	l.changes = append(l.changes, c)
	l.save()
}

// Persist saves the ledger to path now and after every Add: the changes
// a suite process makes (a cluster it builds) reach the driver's report
// even when that process is stopped.
func (l *Ledger) Persist(path string) error {
	l.file = path
	return l.save()
}

func (l *Ledger) save() error {
	if l.file == "" {
		return nil
	}
	b, err := json.MarshalIndent(l.changes, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(l.file, bytes.NewReader(b), 0o644)
}

// Merge adds the changes saved by Persist in the files matching glob (the
// run's other processes).
func (l *Ledger) Merge(glob string) error {
	files, err := filepath.Glob(glob)
	if err != nil {
		return err
	}
	sort.Strings(files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var cs []Change
		if err := json.Unmarshal(b, &cs); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		for _, c := range cs {
			l.Add(c)
		}
	}
	return nil
}

// Changes are the recorded changes.
func (l *Ledger) Changes() []Change { return append([]Change(nil), l.changes...) }

// Markdown is the report's section body: one row per change, then the
// diffs.
func (l *Ledger) Markdown() string {
	if len(l.changes) == 0 {
		return "Nothing: every object was applied as the release renders it.\n"
	}
	var b strings.Builder
	b.WriteString("| kind | object | change | why |\n|---|---|---|---|\n")
	cs := l.Changes()
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].Kind < cs[j].Kind })
	for _, c := range cs {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", c.Kind, cell(c.Object), cell(c.What), cell(c.Why))
	}
	for _, c := range cs {
		if c.Diff != "" {
			fmt.Fprintf(&b, "\n%s, %s:\n\n```diff\n%s```\n", c.Object, c.What, c.Diff)
		}
	}
	return b.String()
}

func cell(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ") }
