package main

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/cozystack/vlan-conformance/framework/claims"
	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/cozystack"
	"github.com/cozystack/vlan-conformance/framework/report"
)

// A release whose guide dropped a claim's sentence gets no verdict on it.
func TestGuideThatDroppedASentenceGetsNoVerdict(t *testing.T) {
	rel, err := cozystack.Open("../../../shared/subjects/cozystack")
	if err != nil {
		t.Skip("no Cozystack subset beside this checkout")
	}
	dir := t.TempDir()
	c, err := rel.CopyTo(dir)
	if err != nil {
		t.Fatal(err)
	}
	var arp01 claims.Claim
	for _, cl := range claims.All {
		if cl.ID == "ARP-01" {
			arp01 = cl
		}
	}
	g := c.Path(cozystack.GuidePath)
	b, _ := os.ReadFile(g)
	edited := strings.ReplaceAll(string(b), "generates a fresh guest MAC", "keeps the guest MAC")
	if edited == string(b) {
		t.Fatal("the guide has no ARP-01 sentence to drop")
	}
	os.WriteFile(g, []byte(edited), 0o644)
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	cfg := config.Register(fs)
	fs.Parse([]string{"--cozystack=" + dir, "--plugin-dir=/nonexistent"})
	cfg.Validate() // the plugin dir's error is not this test's
	if cfg.Subject() == nil {
		t.Fatal("the copy did not open as a release")
	}
	vs := guideVerdicts(cfg, []report.Verdict{{Claim: arp01, Verdict: "passed"}, {Claim: claims.All[0], Verdict: "passed"}})
	if vs[0].Verdict != GuideSilent || !strings.Contains(vs[0].Reason, "passed") {
		t.Errorf("ARP-01: %q (%s)", vs[0].Verdict, vs[0].Reason)
	}
	if vs[1].Verdict != "passed" {
		t.Errorf("%s lost its verdict: %q", claims.All[0].ID, vs[1].Verdict)
	}
}
