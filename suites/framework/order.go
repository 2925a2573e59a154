package framework

import . "github.com/onsi/ginkgo/v2"

// The order of the lane's containers, whatever the seed's order of the
// rest (SpecPriority):
//
//  1. BootsNoGuest: the containers that boot no guest and hold back no
//     other node's boots, while the ARP container's first guests boot
//     ahead (Prestart): they wait for no boot, and the chain after them
//     starts with its first boots under way.
//  2. LongestChain: the ARP container, whose re-creations and restarts
//     come one after another, the lane's longest chain; the other
//     containers' guests boot ahead beside it.
//  3. The rest, in the seed's order, each taking guests booted ahead.
//  4. Last: a container whose spec waits for work an earlier one handed
//     on (HandOn), which runs beside the rest: ARP-07's restarts of the
//     ARP container's guest.
//
// The containers that roll Multus out (Disrupts) are among the rest: run
// first, beside the ARP container's three first boots under TCG, STG-09's
// roll-outs took 198 s instead of 20-29 s (measured), where at the lane's
// end they cost about a minute of idle cores. Measured at 717a77f with
// six guests booting ahead (bench of its child): every boot ahead was done
// before the chain, and the 176 s of containers after it booted nothing,
// so whatever of them waits for no guest goes before it.
var (
	BootsNoGuest = SpecPriority(2)
	LongestChain = SpecPriority(1)
	Last         = SpecPriority(-1)
)
