package claims_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/cozystack/vlan-conformance/framework/claims"
	"github.com/cozystack/vlan-conformance/framework/controls"
)

var specClaimRE = regexp.MustCompile(`labels\.Claim\("([A-Z]+-\d\d)"\)`)

// Every claim has a spec (a labels.Claim in suites/) and a negative control,
// or a written exemption the report prints; every spec and control names a
// claim of the catalogue.
func TestEveryClaimHasASpecAndAControlOrAnExemption(t *testing.T) {
	specs := map[string]int{}
	err := filepath.WalkDir("../../suites", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".go" {
			return err
		}
		b, err := os.ReadFile(path)
		for _, m := range specClaimRE.FindAllSubmatch(b, -1) {
			specs[string(m[1])]++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	controlled := map[string][]string{}
	for _, c := range controls.All() {
		controlled[c.Claim] = append(controlled[c.Claim], c.ID)
		if c.Expect == "" {
			t.Errorf("control %s declares no expected failure message", c.ID)
		}
	}
	known := map[string]bool{}
	for _, c := range claims.All {
		known[c.ID] = true
		if specs[c.ID] == 0 {
			t.Errorf("%s: no spec carries labels.Claim(%q)", c.ID, c.ID)
		}
		switch {
		case len(controlled[c.ID]) == 0 && c.Exemption == "":
			t.Errorf("%s: no negative control and no written exemption", c.ID)
		case len(controlled[c.ID]) > 0 && c.Exemption != "":
			t.Errorf("%s: has controls %v and an exemption: drop the exemption", c.ID, controlled[c.ID])
		}
	}
	for id := range specs {
		if !known[id] {
			t.Errorf("a spec names %s, which is not in the catalogue", id)
		}
	}
	for id, cs := range controlled {
		if !known[id] {
			t.Errorf("controls %v name %s, which is not in the catalogue", cs, id)
		}
	}
}

// Every quote is in the guide the brief gives (seed 000), word for word
// once markdown is set aside, and names a claim of the catalogue.
func TestQuotesAreTheGuidesWords(t *testing.T) {
	b, err := os.ReadFile("../../../shared/seeds/000_424c5aba06eeae91.txt")
	if err != nil {
		t.Skip("the seed guide is not beside this checkout")
	}
	n := 0
	for _, c := range claims.All {
		if c.Quote == "" {
			continue
		}
		n++
		if !claims.Says(string(b), c.Quote) {
			t.Errorf("%s: %q is not in the guide", c.ID, c.Quote)
		}
	}
	if n == 0 {
		t.Fatal("no claim has a quote")
	}
}
