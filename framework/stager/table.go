package stager

import (
	"fmt"
	"strings"
)

// Counts tallies the verdicts of a run.
func (r Result) Counts() map[Verdict]int {
	out := map[Verdict]int{}
	for _, c := range r.Changes {
		out[c.Verdict]++
	}
	return out
}

// Table renders the per-file before/after table in Markdown: every name,
// the version it carried, whether the name points at another inode, and
// the verdict.
func (r Result) Table() string {
	var b strings.Builder
	b.WriteString("| file | before | after | inode changed? | verdict |\n")
	b.WriteString("|---|---|---|---|---|\n")
	for _, c := range r.Changes {
		before, after := "—", "—"
		if c.Before != nil {
			before = c.Before.Describe()
		}
		if c.After != nil {
			after = c.After.Describe()
			if c.After.Kind == "file" {
				after += fmt.Sprintf(", %04o", uint32(c.After.Perm))
			}
		}
		inode := "—"
		if c.Before != nil && c.After != nil {
			inode = "no"
			if c.InodeChanged() {
				inode = fmt.Sprintf("yes (%d → %d", c.Before.Ino, c.After.Ino)
				if c.Held.Held && !c.Held.Linked {
					inode += "; old inode unlinked"
				}
				if c.Held.Held && c.Held.ContentKept {
					inode += ", still reads its old bytes"
				}
				inode += ")"
			} else if c.Verdict == RewrittenInPlace && c.Held.Held && !c.Held.ContentKept {
				inode = "no (its bytes were rewritten)"
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", c.Name, before, after, inode, c.Verdict)
	}
	return b.String()
}

// Report is a Markdown account of the run: settings, counts, table, log and
// termination message.
func (r Result) Report(title string, ic InitContainer) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", title)
	fmt.Fprintf(&b, "- subject: `%s` of %s (%s)\n", InitContainerName, ic.Workload, ic.Source)
	sc := r.Scenario
	if sc.Layout.Title != "" {
		fmt.Fprintf(&b, "- node layout: %s (%s)", sc.Layout.Title, sc.Layout.Name)
		if sc.Layout.Guide != "" {
			fmt.Fprintf(&b, " — the guide: \"%s\"", sc.Layout.Guide)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "- image: %s\n", r.Image)
	for _, f := range sc.Faults {
		fmt.Fprintf(&b, "- fault: %s\n", f)
	}
	fmt.Fprintf(&b, "- ran as: %s\n", r.Security)
	fmt.Fprintf(&b, "- exit code: %d, in %s\n", r.ExitCode, r.Duration.Round(1e6))
	counts := r.Counts()
	fmt.Fprintf(&b, "- added %d, replaced %d, rewritten in place %d, removed %d, untouched %d\n",
		counts[Added], counts[Replaced], counts[RewrittenInPlace], counts[Removed], counts[Untouched])
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "- note: %s\n", n)
	}
	b.WriteString("\n")
	b.WriteString(r.Table())
	b.WriteString("\n## Log (`kubectl logs --container " + InitContainerName + "`)\n\n```\n")
	b.WriteString(r.Log)
	if !strings.HasSuffix(r.Log, "\n") && r.Log != "" {
		b.WriteString("\n")
	}
	b.WriteString("```\n\n## Termination message\n\n```\n")
	b.WriteString(r.TerminationMessage)
	if !strings.HasSuffix(r.TerminationMessage, "\n") && r.TerminationMessage != "" {
		b.WriteString("\n")
	}
	b.WriteString("```\n")
	return b.String()
}
