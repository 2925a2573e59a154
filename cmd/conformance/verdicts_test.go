package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cozystack/vlan-conformance/framework/claims"
)

// The CI log's closing table: a claim passed on VMs is proven on "vm", one
// with no guest passed in a cluster lane on "node";
// one that passed only in the lab is "lab" and counted among the claims
// with no VM verdict; a part whose JUnit is missing is said not to have
// run.
func TestVerdictsTable(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("<testsuites><testsuite>"+body+"</testsuite></testsuites>"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	lab := write("lab.xml", `<testcase name="[It] a [VLAN-01] x" status="passed"></testcase><testcase name="[It] b [ARP-01] y" status="passed"></testcase><testcase name="[It] c [VLAN-15] z" status="passed"></testcase>`)
	// VLAN-04's spec attaches pods in the VM lane too: its pass there is a pod's.
	// STG-04's spec runs the stager container-less in any lane: a node's claim.
	vm := write("vm.xml", `<testcase name="[It] a [VLAN-01] x" status="passed"></testcase><testcase name="[It] b [ARP-01] y" status="skipped"><skipped message="skip: no gateway here"></skipped></testcase><testcase name="[It] d [VLAN-04] w" status="passed"></testcase><testcase name="[It] e [STG-04] v" status="passed"></testcase>`)
	var b strings.Builder
	if code := verdicts(&b, []string{"lab=" + lab, "vm=" + vm, "pod=" + filepath.Join(dir, "none.xml")}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	out := b.String()
	for _, want := range []string{
		"not run: pod (",
		"VLAN-01  vm      passed | passed |",
		"ARP-01   lab     skipped | passed | vm: skip: no gateway here",
		"VLAN-04  pod     passed | not run |",
		"STG-04   node    passed | not run |",
		"NO VM VERDICT FROM THIS RUN for ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	noVM := out[strings.Index(out, "NO VM VERDICT"):]
	if strings.Contains(noVM, "VLAN-01 ") {
		t.Errorf("VLAN-01 passed on VMs, yet listed without a VM verdict:\n%s", out)
	}
	if !strings.Contains(noVM, "VLAN-04 ") {
		t.Errorf("VLAN-04 passed on the VM lane's pods, yet not listed without a VM verdict:\n%s", out)
	}
	if strings.Contains(noVM, "VLAN-15") {
		t.Errorf("VLAN-15 has no guest (lab only), yet listed without a VM verdict:\n%s", out)
	}
	if code := verdicts(&b, []string{"vmware=" + vm}); code != 2 {
		t.Errorf("an unknown workload: exit %d, want 2", code)
	}
}

// --certify judges the cluster parts against the product file: every
// claim a cluster can prove passed, or declared not applicable; a skip
// is a failure; a wrong product file, or no cluster part, is bad input.
func TestVerdictsCertify(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	product := write("product.yaml", "vendor: Example Networks\nproduct: EX-100\ncozystack: v1.6.1\nnodeOS: Talos v1.11.3\nnotApplicable:\n  VLAN-13: br100 from install\n")
	var all, skipped strings.Builder
	for _, c := range claims.All {
		if c.Tier == "lab" {
			continue
		}
		tc := `<testcase name="[It] x [` + c.ID + `]" status="passed"></testcase>`
		all.WriteString(tc)
		switch c.ID {
		case "VLAN-02":
			skipped.WriteString(`<testcase name="[It] x [VLAN-02]" status="skipped"><skipped message="skip: untagged trunk"></skipped></testcase>`)
		case "VLAN-13":
			skipped.WriteString(`<testcase name="[It] x [VLAN-13]" status="skipped"><skipped message="skip: no consumer"></skipped></testcase>`)
		default:
			skipped.WriteString(tc)
		}
	}
	passed := write("passed.xml", "<testsuites><testsuite>"+all.String()+"</testsuite></testsuites>")
	skips := write("skips.xml", "<testsuites><testsuite>"+skipped.String()+"</testsuite></testsuites>")

	var b strings.Builder
	if code := verdicts(&b, []string{"--certify=" + product, "vm=" + passed}); code != 0 {
		t.Fatalf("every claim passed: exit %d\n%s", code, b.String())
	}
	if !strings.Contains(b.String(), "CERTIFIED: every one of the") {
		t.Errorf("no CERTIFIED line:\n%s", b.String())
	}
	b.Reset()
	if code := verdicts(&b, []string{"--certify=" + product, "vm=" + skips}); code != 1 {
		t.Fatalf("VLAN-02 skipped: exit %d, want 1\n%s", code, b.String())
	}
	for _, want := range []string{"NOT CERTIFIED: 1 of the", "VLAN-02  NOT       skipped | a skip is a failure", "VLAN-13  certified skipped | not applicable: br100 from install"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in:\n%s", want, b.String())
		}
	}
	bad := write("bad.yaml", "vendor: x\n")
	if code := verdicts(&b, []string{"--certify=" + bad, "vm=" + passed}); code != 2 {
		t.Errorf("a product file without product, cozystack, nodeOS: exit %d, want 2", code)
	}
	if code := verdicts(&b, []string{"--certify=" + product, "lab=" + passed}); code != 2 {
		t.Errorf("the lab's run certified: exit %d, want 2", code)
	}
}
