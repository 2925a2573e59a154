package datapath

import (
	"context"
	"time"

	. "github.com/onsi/gomega"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/suites/skip"
)

func startCapture(at evidence.Point, claim, file string) *evidence.Capture {
	c, err := evidence.StartCapture(at, evidence.ArtifactPath(claim, file))
	skip.IfNotObservable(err)
	ExpectWithOffset(1, err).NotTo(HaveOccurred(), "capturing on %s", at)
	return c
}

func stopCapture(c *evidence.Capture) evidence.Frames {
	time.Sleep(100 * time.Millisecond) // let the last replies land
	frames, err := c.Stop()
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return frames
}

// captureWhile records frames at a point while action runs; the pcap is
// kept as the claim's evidence.
func captureWhile(ctx context.Context, at evidence.Point, claim, file string, action func()) evidence.Frames {
	c := startCapture(at, claim, file)
	action()
	return stopCapture(c)
}
