package arp

import (
	"context"
	"fmt"
	"time"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/probe"
	"github.com/cozystack/vlan-conformance/suites/framework"
)

// pinnedRun is ARP-05's re-creation as the gateway saw it: its echo
// requests to the guest every streamEvery before, during and after, its
// entry sampled every watchEvery, and the entry when the VM was up.
type pinnedRun struct {
	rc      *recreation
	atReady evidence.Neighbor
	grace   time.Duration // the broadcast re-resolution's tail the re-creation owns
	probes  []probe.Probe
	changes []neighChange
}

// recreatePinned re-creates v (its MAC pinned) while the gateway pings it
// all along. It gives evidence.ErrNotObservable when the gateway cannot
// ping; the caller judges the rest.
func recreatePinned(ctx context.Context, gw platform.Gateway, p platform.Platform, v *vm, by string) (pinnedRun, error) {
	var run pinnedRun
	if _, err := warmGateway(ctx, gw, v); err != nil {
		return run, err
	}
	stream, err := gw.StartPing(ctx, v.addr, streamEvery)
	if err != nil {
		return run, err
	}
	defer stream.Stop()
	watch := watchNeighbor(gw, v.addr, watchEvery)
	defer watch.Stop()

	time.Sleep(300 * time.Millisecond) // uninterrupted before
	run.rc, err = v.recreate(ctx, p, by)
	if err != nil {
		return run, err
	}
	if run.atReady, err = gw.Neighbor(ctx, v.addr); err != nil {
		return run, fmt.Errorf("the gateway's entry for %s once %s was up: %w", v.addr, v.Name(), err)
	}
	// Traffic kept coming while the VM was gone: a re-creation slower
	// than REACHABLE+DELAY+PROBE leaves the gateway resolving afresh by
	// broadcast, and that cycle's tail belongs to the re-creation, with
	// any MAC. An entry still holding a MAC gets no grace at all.
	if len(run.atReady.MAC) == 0 {
		if declared, err := gw.NeighProfile(ctx); err == nil {
			run.grace = time.Duration(declared.Timers.McastSolicit) * declared.Timers.RetransTime
		}
	}
	time.Sleep(1500 * time.Millisecond) // and after: any stale entry would show here
	run.probes, run.changes = stream.Stop(), watch.Stop()
	return run, nil
}

// beside is ARP-05's re-creation run in the background while ARP-02
// re-creates its own VM: two TCG boots side by side on two cores, one
// re-creation's wait (about two minutes) off the container. Nothing of
// one is in the other's evidence: another VM at another address, on
// another node.
type beside struct {
	done chan struct{}
	run  pinnedRun
	err  error
	then func() // stops what began once the re-creation was done
}

// recreatePinnedBeside starts recreatePinned in the background and, once
// it is done, then (ARP-06's second guest with the same MAC, which, up
// any sooner, would collide with the guest whose re-creation ARP-05
// times); stop ends both early (the container ended first).
func recreatePinnedBeside(ctx context.Context, gw platform.Gateway, p platform.Platform, v *vm, then func(context.Context) (stop func())) (b *beside, stop func()) {
	bg, cancel := context.WithCancel(framework.Aside(context.WithoutCancel(ctx)))
	b = &beside{done: make(chan struct{}), then: func() {}}
	go func() {
		defer close(b.done)
		b.run, b.err = recreatePinned(bg, gw, p, v, "ARP-05, beside ARP-02's re-creation")
		if b.err == nil && bg.Err() == nil {
			b.then = then(bg)
		}
	}()
	return b, func() { cancel(); <-b.done; b.then() }
}

// wait is the background run's outcome.
func (b *beside) wait(ctx context.Context) (pinnedRun, error) {
	select {
	case <-b.done:
		return b.run, b.err
	case <-ctx.Done():
		return pinnedRun{}, fmt.Errorf("waiting for the re-creation of vm-arp05 in the background: %w", context.Cause(ctx))
	}
}
