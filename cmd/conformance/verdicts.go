package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/cozystack/vlan-conformance/framework/certify"
	"github.com/cozystack/vlan-conformance/framework/claims"
	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/report"
)

// Workloads a claim can be proven on, the strongest first: KubeVirt's own
// VMs speak for the guide; pods attached by Multus for the CNI path; the
// lab for the kernel objects and the replica of KubeVirt's binding. A
// claim with no guest (STG-, VLAN-15) passed in a cluster lane is proven
// on "node", whatever the lane's workload.
var workloadOrder = []string{"vm", "pod", "lab"}

// verdicts is `conformance verdicts WORKLOAD=JUNIT...`: the table a CI log
// ends with. Each claim of the catalogue, its verdict in each part that
// ran, the strongest workload it passed on this run, and why not where it
// passed on none. A part whose JUnit is missing did not run; it says so.
// The last line names the claims with no VM verdict from this run.
//
// With --certify=PRODUCT (the vendor's product file, framework/certify)
// the table is followed by the certification of the cluster parts' run:
// exit 1 when a claim is not certified, 2 when the product file is wrong.
func verdicts(w io.Writer, args []string) int {
	parts := map[string][]report.TestCase{}
	var ran, missing, given []string
	var product *certify.Product
	for _, a := range args {
		path, ok := strings.CutPrefix(a, "--certify=")
		if !ok {
			given = append(given, a)
			continue
		}
		p, err := certify.Read(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "conformance verdicts: %v\n", err)
			return config.ExitBadInput
		}
		product = &p
	}
	for _, a := range given {
		workload, path, ok := strings.Cut(a, "=")
		if !ok || !slices.Contains(workloadOrder, workload) {
			fmt.Fprintf(os.Stderr, "conformance verdicts: %q: want WORKLOAD=JUNIT, WORKLOAD one of %v\n", a, workloadOrder)
			return config.ExitBadInput
		}
		cases, err := report.ReadJUnit(path)
		if err != nil {
			missing = append(missing, fmt.Sprintf("%s (%s: %v)", workload, path, err))
			continue
		}
		parts[workload] = cases
		ran = append(ran, workload)
	}
	table := map[string]map[string]report.Verdict{}
	for workload, cases := range parts {
		for _, v := range report.Verdicts(cases, "") {
			if table[v.Claim.ID] == nil {
				table[v.Claim.ID] = map[string]report.Verdict{}
			}
			table[v.Claim.ID][workload] = v
		}
	}
	var cols []string
	for _, wl := range workloadOrder {
		if _, ok := parts[wl]; ok {
			cols = append(cols, wl)
		}
	}
	fmt.Fprintf(w, "=== claims and the workload each was proven on in this run (%s)\n", strings.Join(ran, ", "))
	for _, m := range missing {
		fmt.Fprintf(w, "    not run: %s\n", m)
	}
	fmt.Fprintf(w, "  (proven on node: a claim about the nodes' /opt/cni/bin, the charts or a staged directory, proven by that lane whatever its workload)\n")
	fmt.Fprintf(w, "  %-8s %-7s %s\n", "claim", "proven", strings.Join(cols, " | ")+" | why not")
	var noVM []string
	for _, c := range claims.All {
		row := table[c.ID]
		proven, why := "none", ""
		var cells []string
		for _, wl := range cols {
			v := row[wl]
			cells = append(cells, short(v.Verdict))
			if proven == "none" && strings.HasPrefix(v.Verdict, "passed") {
				proven = wl
				switch {
				case wl == "lab":
				case !guestClaim(c):
					// Its spec reads the nodes, the charts or a staged
					// directory, whatever the lane's workload.
					proven = "node"
				case wl == "vm" && c.Pods:
					proven = "pod" // its spec attached pods in the VM lane too
				}
			}
		}
		// Why not on the stronger workloads than the one it was proven on
		// (all of them when none).
		for _, wl := range cols {
			if wl == proven || proven == "node" {
				break
			}
			if r := row[wl].Reason; r != "" {
				why = wl + ": " + r
				break
			}
		}
		if proven != "vm" && guestClaim(c) {
			noVM = append(noVM, c.ID)
		}
		fmt.Fprintf(w, "  %-8s %-7s %s | %s\n", c.ID, proven, strings.Join(cells, " | "), firstLineOf(why))
	}
	guests := 0
	for _, c := range claims.All {
		if guestClaim(c) {
			guests++
		}
	}
	if len(noVM) > 0 {
		fmt.Fprintf(w, "NO VM VERDICT FROM THIS RUN for %d of the %d guest claims (VLAN-*, ARP-*): %s\n", len(noVM), guests, strings.Join(noVM, " "))
	}
	if product != nil {
		return certification(w, *product, table)
	}
	return 0
}

// certification prints the certification of the cluster parts' verdicts
// (a vendor's cluster is judged, never the lab's replica): a claim failed
// in one part failed; else one passed in a part passed; else the verdict
// of the strongest part that has one.
func certification(w io.Writer, p certify.Product, table map[string]map[string]report.Verdict) int {
	run := map[string]report.Verdict{}
	for id, row := range table {
		for _, wl := range []string{"vm", "pod"} {
			v, ok := row[wl]
			if !ok {
				continue
			}
			if cur, seen := run[id]; !seen || v.Verdict == "FAILED" || (cur.Verdict != "FAILED" && v.Verdict == "passed") {
				run[id] = v
			}
		}
	}
	if len(run) == 0 {
		fmt.Fprintf(os.Stderr, "conformance verdicts --certify: no cluster part (vm=JUNIT or pod=JUNIT) was read: certification judges a cluster's run, not the lab's\n")
		return config.ExitBadInput
	}
	out, ok := certify.Judge(p, run)
	fmt.Fprintf(w, "=== certification: %s %s on Cozystack %s, %s", p.Vendor, p.Product, p.Cozystack, p.NodeOS)
	for _, n := range p.NICs {
		fmt.Fprintf(w, "; NIC %s (%s, firmware %s)", n.Model, n.Driver, n.Firmware)
	}
	fmt.Fprintln(w)
	for _, o := range out {
		mark := "certified"
		if !o.Certified {
			mark = "NOT"
		}
		fmt.Fprintf(w, "  %-8s %-9s %s | %s\n", o.Claim.ID, mark, short(o.Verdict), firstLineOf(o.Why))
	}
	if !ok {
		failed := certify.Failed(out)
		fmt.Fprintf(w, "NOT CERTIFIED: %d of the %d claims: %s\n", len(failed), len(out), strings.Join(failed, " "))
		return 1
	}
	fmt.Fprintf(w, "CERTIFIED: every one of the %d claims passed or is declared not applicable (%d declared)\n", len(out), len(p.NotApplicable))
	return 0
}

// guestClaim: a claim about what a guest on the VLAN sees, which a VM of
// the VM lane proves for KubeVirt (the STG claims are about the nodes'
// /opt/cni/bin and the charts, whatever the workload; a lab-only claim
// has no guest).
func guestClaim(c claims.Claim) bool {
	return (strings.HasPrefix(c.ID, "VLAN-") || strings.HasPrefix(c.ID, "ARP-")) && c.Tier != "lab"
}

func short(v string) string {
	switch {
	case v == "":
		return "-"
	case strings.HasPrefix(v, "passed ("):
		return "passed*"
	}
	return v
}

func firstLineOf(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 140 {
		s = s[:140] + "..."
	}
	return s
}
