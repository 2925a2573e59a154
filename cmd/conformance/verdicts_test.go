package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
