package certify

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cozystack/vlan-conformance/framework/claims"
	"github.com/cozystack/vlan-conformance/framework/report"
)

const product = `vendor: Example Networks
product: EX-100 top of rack
cozystack: v1.6.1
nodeOS: Talos v1.11.3
nics:
  - model: Ethernet Controller X710
    driver: i40e
    firmware: "9.20"
notApplicable:
  VLAN-13: our nodes get br100 at install; no macvlan consumer ever holds the sub-interface
`

func write(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "product.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReadAProductFile(t *testing.T) {
	p, err := Read(write(t, product))
	if err != nil {
		t.Fatal(err)
	}
	if p.Vendor != "Example Networks" || len(p.NICs) != 1 || p.NICs[0].Driver != "i40e" || p.NotApplicable["VLAN-13"] == "" {
		t.Fatalf("read %+v", p)
	}
}

// Each mistake of a product file is named, with the file.
func TestAProductFileIsRefusedForEachMistake(t *testing.T) {
	for name, tc := range map[string]struct{ edit, want string }{
		"an unknown field":             {"vendor: Example Networks\nvendr: x\n", `unknown field "vendr"`},
		"no vendor":                    {"vendor: \"\"\n", "vendor: missing"},
		"a claim the catalogue lacks":  {"notApplicable:\n  VLAN-99: why\n", "VLAN-99 is no claim of the catalogue"},
		"a claim of the lab only":      {"notApplicable:\n  VLAN-15: why\n", "VLAN-15 is proven in the lab only"},
		"a declaration with no reason": {"notApplicable:\n  VLAN-13: \"\"\n", "VLAN-13: a reason is required"},
	} {
		t.Run(name, func(t *testing.T) {
			content := product
			key, _, _ := strings.Cut(tc.edit, ":")
			// Replace the field edited, keep the rest.
			var kept []string
			skip := false
			for _, line := range strings.Split(content, "\n") {
				if strings.HasPrefix(line, key+":") {
					skip = true
					continue
				}
				if skip && strings.HasPrefix(line, " ") {
					continue
				}
				skip = false
				kept = append(kept, line)
			}
			path := write(t, strings.Join(kept, "\n")+"\n"+tc.edit)
			_, err := Read(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("got %v, want an error naming %s and saying %q", err, path, tc.want)
			}
		})
	}
}

// allPassed is a run in which every certified claim passed.
func allPassed() map[string]report.Verdict {
	v := map[string]report.Verdict{}
	for _, c := range claims.All {
		if Certifies(c) {
			v[c.ID] = report.Verdict{Claim: c, Verdict: "passed"}
		}
	}
	return v
}

// A skip is a failure unless declared not applicable; a declaration never
// excuses a failure; a claim the run never reached has no verdict.
func TestEveryClaimNeedsAVerdict(t *testing.T) {
	p := Product{Vendor: "v", Product: "p", Cozystack: "v1.6.1", NodeOS: "Talos", NotApplicable: map[string]string{"VLAN-13": "br100 from install", "ARP-04": "our gateway ignores gratuitous ARP by policy"}}
	if _, ok := Judge(p, allPassed()); !ok {
		t.Fatal("a run that passed every claim was not certified")
	}
	for name, tc := range map[string]struct {
		id        string
		verdict   report.Verdict
		certified bool
		why       string
	}{
		"skipped":                       {"VLAN-02", report.Verdict{Verdict: "skipped", Reason: "untagged trunk"}, false, "a skip is a failure"},
		"partly skipped":                {"VLAN-08", report.Verdict{Verdict: "passed (1 of 2 specs; skipped: untagged trunk)"}, false, "a skip is a failure"},
		"not run":                       {"ARP-02", report.Verdict{Verdict: "not run"}, false, "no verdict"},
		"skipped, declared":             {"VLAN-13", report.Verdict{Verdict: "skipped", Reason: "no consumer"}, true, "not applicable: br100 from install"},
		"failed, declared":              {"ARP-04", report.Verdict{Verdict: "FAILED", Reason: "no gratuitous ARP seen"}, false, "does not excuse a failure"},
		"failed":                        {"VLAN-01", report.Verdict{Verdict: "FAILED", Reason: "no echo reply"}, false, "failed: no echo reply"},
		"passed although declared":      {"VLAN-13", report.Verdict{Verdict: "passed"}, true, "although declared"},
		"absent from the run's verdict": {"NODE-01", report.Verdict{}, false, "no verdict"},
	} {
		t.Run(name, func(t *testing.T) {
			v := allPassed()
			if tc.verdict.Verdict == "" {
				delete(v, tc.id)
			} else {
				v[tc.id] = tc.verdict
			}
			out, ok := Judge(p, v)
			if ok != tc.certified {
				t.Fatalf("certified %v, want %v (failed: %v)", ok, tc.certified, Failed(out))
			}
			for _, o := range out {
				if o.Claim.ID == tc.id && (o.Certified != tc.certified || !strings.Contains(o.Why, tc.why)) {
					t.Fatalf("%s: certified %v, %q; want %v, saying %q", tc.id, o.Certified, o.Why, tc.certified, tc.why)
				}
			}
		})
	}
}

// The lab's own claims are not asked of a vendor's cluster.
func TestTheLabsClaimsAreNotCertified(t *testing.T) {
	out, _ := Judge(Product{}, allPassed())
	for _, o := range out {
		if o.Claim.ID == "VLAN-15" {
			t.Fatal("VLAN-15, proven in the lab only, was judged")
		}
	}
	if len(out) == 0 {
		t.Fatal("nothing judged")
	}
}

// The README's example product file reads as it says.
func TestTheExampleProductFileReads(t *testing.T) {
	p, err := Read("../../docs/product.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if p.NotApplicable["VLAN-13"] == "" || len(p.NICs) != 1 {
		t.Fatalf("read %+v", p)
	}
}
