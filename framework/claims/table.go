package claims

import (
	"fmt"
	"strings"
)

// Table renders the claims as the README's markdown table: one row per
// claim, in report order, with the files whose specs name it (specs maps
// an ID to them). The README's table is this output, between markers
// (`make docs` rewrites it; a unit test fails when it is stale).
func Table(specs map[string][]string) string {
	var b strings.Builder
	b.WriteString("| claim | tier | what the guide says | specs |\n|---|---|---|---|\n")
	for _, c := range All {
		tier := c.Tier
		if tier == "" {
			tier = "all"
		}
		var files []string
		for _, f := range specs[c.ID] {
			files = append(files, "`"+f+"`")
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", c.ID, tier, strings.ReplaceAll(c.Sentence, "|", `\|`), strings.Join(files, ", "))
	}
	return b.String()
}
