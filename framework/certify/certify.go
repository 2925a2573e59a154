// Package certify is the certification profile (issue 25): a vendor's run
// against its own cluster certifies the setup only when every claim the
// cluster can prove has a verdict and passed. A skip is a failure unless
// the vendor's product file declares the claim not applicable, with a
// reason; a declaration never excuses a failure.
package certify

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/cozystack/vlan-conformance/framework/claims"
	"github.com/cozystack/vlan-conformance/framework/report"
)

// Product is the vendor's product file: what was certified, on what, and
// the claims it declares not applicable. It travels with the results.
type Product struct {
	Vendor    string `json:"vendor"`
	Product   string `json:"product"`
	Cozystack string `json:"cozystack"` // the release certified, as its tag or commit
	NodeOS    string `json:"nodeOS"`
	NICs      []NIC  `json:"nics,omitempty"`
	// NotApplicable is claim ID -> why the setup cannot be asked it.
	NotApplicable map[string]string `json:"notApplicable,omitempty"`
}

// NIC is the uplink's network card as `ethtool -i` names it.
type NIC struct {
	Model    string `json:"model"`
	Driver   string `json:"driver"`
	Firmware string `json:"firmware"`
}

// Read reads and checks a product file: unknown fields, missing identity,
// a claim the catalogue does not have or the cluster cannot prove, and a
// declaration without a reason are each an error naming the file.
func Read(path string) (Product, error) {
	var p Product
	b, err := os.ReadFile(path)
	if err != nil {
		return p, fmt.Errorf("product file: %w", err)
	}
	if err := yaml.UnmarshalStrict(b, &p); err != nil {
		return p, fmt.Errorf("product file %s: %w", path, err)
	}
	if err := p.check(); err != nil {
		return p, fmt.Errorf("product file %s: %w", path, err)
	}
	return p, nil
}

func (p Product) check() error {
	var errs []error
	for field, v := range map[string]string{"vendor": p.Vendor, "product": p.Product, "cozystack": p.Cozystack, "nodeOS": p.NodeOS} {
		if strings.TrimSpace(v) == "" {
			errs = append(errs, fmt.Errorf("%s: missing", field))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(p.NotApplicable)) {
		c, ok := claims.ByID(id)
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("notApplicable: %s is no claim of the catalogue", id))
		case !Certifies(c):
			errs = append(errs, fmt.Errorf("notApplicable: %s is proven in the lab only, never on a cluster: it needs no declaration", id))
		case strings.TrimSpace(p.NotApplicable[id]) == "":
			errs = append(errs, fmt.Errorf("notApplicable: %s: a reason is required", id))
		}
	}
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return errors.Join(errs...)
}

// Certifies tells whether a claim is asked of a vendor's cluster: every
// claim but those only the lab can prove.
func Certifies(c claims.Claim) bool { return c.Tier != "lab" }

// Outcome is one claim's certification verdict.
type Outcome struct {
	Claim     claims.Claim
	Verdict   string // the run's verdict on it (report.Verdict.Verdict)
	Certified bool
	Why       string // why it is not certified, or the vendor's reason where declared not applicable
}

// Judge gives every certified claim its outcome from the run's verdicts
// (claim ID -> verdict; a claim absent did not run), and whether the
// whole setup is certified.
func Judge(p Product, verdicts map[string]report.Verdict) (out []Outcome, certified bool) {
	certified = true
	for _, c := range claims.All {
		if !Certifies(c) {
			continue
		}
		v, ran := verdicts[c.ID]
		o := Outcome{Claim: c, Verdict: "not run"}
		if ran {
			o.Verdict = v.Verdict
		}
		reason, declared := p.NotApplicable[c.ID]
		switch {
		case ran && v.Verdict == "passed":
			o.Certified = true
			if declared {
				o.Why = "passed, although declared not applicable (" + reason + ")"
			}
		case ran && v.Verdict == "FAILED":
			o.Why = "failed: " + v.Reason
			if declared {
				o.Why += " (declared not applicable, but a declaration does not excuse a failure)"
			}
		case declared:
			o.Certified = true
			o.Why = "not applicable: " + reason
		case !ran || v.Verdict == "not run":
			o.Why = "no verdict: the run did not reach it"
			if ran && v.Reason != "" {
				o.Why += " (" + v.Reason + ")"
			}
		default: // skipped, or passed with some of its specs skipped
			o.Why = "a skip is a failure unless the product file declares the claim not applicable: " + v.Verdict
			if v.Reason != "" && !strings.Contains(v.Verdict, v.Reason) {
				o.Why += ": " + v.Reason
			}
		}
		certified = certified && o.Certified
		out = append(out, o)
	}
	return out, certified
}

// Failed lists the IDs of the outcomes not certified.
func Failed(out []Outcome) []string {
	var ids []string
	for _, o := range out {
		if !o.Certified {
			ids = append(ids, o.Claim.ID)
		}
	}
	return ids
}
