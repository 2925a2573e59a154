// Package wire holds the specs' capture steps: record the frames crossing a
// point while an action runs, keeping the pcap as the claim's evidence. A
// negative check ("nothing answered") means something only if its probe was
// seen leaving: these are the captures that show it.
package wire

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	. "github.com/onsi/gomega"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/hops"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/suites/skip"
)

// Start records frames at a point into the pcap at path (a claim's
// artifact: framework's Artifact).
func Start(at evidence.Point, path string) *evidence.Capture {
	c, err := evidence.StartCapture(at, path)
	skip.IfNotObservable(err)
	ExpectWithOffset(1, err).NotTo(HaveOccurred(), "capturing on %s", at)
	return c
}

// Stop ends a capture and returns what it saw.
func Stop(c *evidence.Capture) evidence.Frames {
	time.Sleep(100 * time.Millisecond) // let the last replies land
	frames, err := c.Stop()
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return frames
}

// While records frames at a point while action runs.
func While(ctx context.Context, at evidence.Point, path string, action func()) evidence.Frames {
	c := Start(at, path)
	action()
	return Stop(c)
}

// Egress is the point nearest to the guest where its frames can be seen
// leaving: its own VLAN NIC, or, where the guest cannot be watched (a VM in
// a cluster), the trunk of its node.
func Egress(p platform.Platform, g platform.Guest) evidence.Point {
	// A point the guest has but the suite failed to find is a failure,
	// not a reason to look elsewhere.
	if at := g.VLANPoint(); at.Iface != "" || (at.Err != nil && !errors.Is(at.Err, evidence.ErrNotObservable)) {
		return at
	}
	return p.Trunk(g.Node())
}

// WhereItStopped follows a request from src to dst (named target in the
// line) along path (hops.Path, hops.NodePath) while send runs
// (hops.Follow), and says in one line where it, or its reply, stopped:
// what a failed ping claim reports next to its failure. Each hop's
// capture is the claim's hop-N.pcap (artifact names a claim's evidence
// file: framework's Artifact).
func WhereItStopped(p platform.Platform, path []hops.Hop, src, dst netip.Addr, target string, artifact func(string) string, send func()) string {
	pcap := func(i int) string { return artifact(fmt.Sprintf("hop-%d.pcap", i)) }
	return hops.Follow(path, pcap, src, dst, send).Where(trunkTag(p), target)
}

// trunkTag is the tag the guest's frames must carry on the trunk: the
// VLAN's, or none on an access-mode trunk (a kind lane without 8021q).
func trunkTag(p platform.Platform) int {
	if a, ok := platform.As[platform.AccessTrunk](p); ok {
		if untagged, _ := a.Untagged(); untagged {
			return 0
		}
	}
	return p.Config().VLAN
}
