// Package labels defines, once, the Ginkgo labels lanes select by: one per
// area, one per claim ID (the selftest runner focuses a control's claim with
// --ginkgo.label-filter=<ID>).
package labels

import . "github.com/onsi/ginkgo/v2"

var (
	Datapath = Label("datapath")
	Stager   = Label("stager")
	ARP      = Label("arp")
	Cluster  = Label("cluster") // claims only a cluster can prove (suites/cluster)
)

// Claim is the label of one claim, e.g. Claim("VLAN-03").
func Claim(id string) Labels { return Label(id) }
