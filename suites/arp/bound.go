package arp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/platform"
)

// expected is what a recovery from the gateway's stale entry is held
// against (ARP-03 after a re-creation, ARP-07 after each restart): the
// bound the gateway's declared neighbour timers imply, or, for a gateway
// that declares none (a vendor's), --gateway-wait, unbounded; and the timers
// it reports running, for the report.
type expected struct {
	limit    time.Duration
	bound    recoveryBound
	bounded  bool
	declared evidence.NeighProfile
	running  evidence.NeighTimers
	runErr   error // why the running timers are unknown
}

// expectRecovery reads the gateway's declared and running timers, and
// notes them and the bound on tl.
func expectRecovery(ctx context.Context, gw platform.Gateway, wait time.Duration, tl *timeline) (expected, error) {
	e := expected{limit: wait}
	var err error
	e.declared, err = gw.NeighProfile(ctx)
	switch {
	case err == nil:
		e.bound, e.bounded = boundFor(e.declared.Timers, streamEvery), true
		e.limit = e.bound.Total()
		tl.note("declared gateway timers, profile %q (%s): %s", e.declared.Name, e.declared.Source, describeTimers(e.declared.Timers))
		tl.note("bound they imply: %s", e.bound.Formula())
	case errors.Is(err, evidence.ErrNotObservable):
		tl.note("no declared timers (%v): measured up to %s (--gateway-wait), not bounded", err, secs(wait))
	default:
		return e, fmt.Errorf("the declared neighbour timers: %w", err)
	}
	e.running, e.runErr = gw.NeighTimers(ctx)
	if e.runErr == nil {
		tl.note("timers the gateway reports running: %s", describeTimers(e.running))
	}
	return e, nil
}

// why is what the recovery was held against, for an assertion's message.
func (e expected) why() string {
	return boundNote(e.bounded, e.declared) + runningNote(e.running, e.runErr)
}

// schedulingSlack covers scheduling lateness (softirqs, a TCG lab VM) and
// the echo/ARP round trips of the re-resolution.
const schedulingSlack = 500 * time.Millisecond

// wheelLateness is how late the kernel may fire a timer of duration d: the
// timer wheel rounds an expiry up to the granularity of the level it lands
// in (kernel/time/timer.c, calc_index), and a level's granularity is at
// most 8/63 of the shortest delay it holds (levels start at 63 << 3(n-1)
// jiffies with granularity 8^n), plus a jiffy at level 0. A 28 s REACHABLE
// timer at HZ=250 sits in level 3 and can fire 2.048 s late: measured.
func wheelLateness(d time.Duration) time.Duration { return d*8/63 + 10*time.Millisecond }

// recoveryBound is the longest a gateway running timers t can keep sending
// to a MAC that vanished, counted from any instant after the entry's last
// confirmation, while something sends to the address every interval. It
// follows the kernel's neighbour state machine (net/core/neighbour.c,
// neigh_timer_handler):
//
//	REACHABLE  until confirmed + reachable_time; reachable_time is drawn from
//	           [base_reachable/2, 3*base_reachable/2), so at most 3/2 base.
//	           Nothing confirms the old MAC: it is gone.
//	STALE      until the next packet, at most one interval later
//	           (REACHABLE goes straight to DELAY if the entry was just used).
//	DELAY      delay_first_probe_time; packets still go to the old MAC.
//	PROBE      ucast_solicit unicast probes (+ mcast_resolicit broadcast
//	           ones, 0 here), retrans_time apart, all to the old MAC: the
//	           new guest drops them (not its MAC). Then FAILED.
//	FAILED     until the next packet, at most one interval; it makes the
//	           entry INCOMPLETE, a broadcast who-has goes out, the new guest
//	           answers, the queued packet leaves with the new MAC.
//
// Each of the kernel's timers (REACHABLE, DELAY, every PROBE) may fire late
// by its timer-wheel rounding (wheelLateness); scheduling adds Slack.
type recoveryBound struct {
	Reachable, Stale, Delay, Probe, Refail, Wheel, Slack time.Duration
	probes                                               int
	retrans                                              time.Duration
}

func boundFor(t evidence.NeighTimers, interval time.Duration) recoveryBound {
	probes := t.UcastSolicit + t.McastResolicit
	b := recoveryBound{
		Reachable: t.BaseReachable * 3 / 2,
		Stale:     interval,
		Delay:     t.DelayFirstProbe,
		Probe:     time.Duration(probes) * t.RetransTime,
		Refail:    interval,
		Slack:     schedulingSlack,
		probes:    probes, retrans: t.RetransTime,
	}
	b.Wheel = timersLateness(b.Reachable, t.DelayFirstProbe, t.RetransTime, probes)
	return b
}

func timersLateness(reachable, delay, retrans time.Duration, probes int) time.Duration {
	return wheelLateness(reachable) + wheelLateness(delay) + time.Duration(probes)*wheelLateness(retrans)
}

func (b recoveryBound) Total() time.Duration {
	return b.Reachable + b.Stale + b.Delay + b.Probe + b.Refail + b.Wheel + b.Slack
}

// Formula spells the bound out with its values.
func (b recoveryBound) Formula() string {
	return fmt.Sprintf("3/2·base_reachable %s + probe interval %s + delay_first_probe %s + %d probes × retrans %s + probe interval %s + timer-wheel rounding %s + slack %s = %s",
		secs(b.Reachable), secs(b.Stale), secs(b.Delay), b.probes, secs(b.retrans), secs(b.Refail), secs(b.Wheel), secs(b.Slack), secs(b.Total()))
}

// expectedFailover predicts, from the kernel's own state (the reachable
// time it drew and when the entry was last confirmed), when the old entry
// fails, counted from ready (when the gateway starts sending to it): no earlier than early, no later than late
// (timer-wheel rounding) plus up to two probe intervals. ok is false when
// the tier cannot tell.
func expectedFailover(t evidence.NeighTimers, confirmed, ready time.Time) (early, late time.Duration, ok bool) {
	if t.ReachableTime == 0 || confirmed.IsZero() {
		return 0, 0, false
	}
	probes := t.UcastSolicit + t.McastResolicit
	// The entry leaves REACHABLE reachable_time after its confirmation;
	// STALE, it starts its delay with the first packet sent to it, at ready
	// (a gateway kept quiet through a minutes-long boot finds it STALE).
	delayFrom := confirmed.Add(t.ReachableTime)
	if delayFrom.Before(ready) {
		delayFrom = ready
	}
	fail := delayFrom.Add(t.DelayFirstProbe + time.Duration(probes)*t.RetransTime)
	early = max(fail.Sub(ready), 0)
	late = max(fail.Add(timersLateness(t.ReachableTime, t.DelayFirstProbe, t.RetransTime, probes)).Sub(ready), 0)
	return early, late, true
}

// describeTimers is one line per timer, for the report.
func describeTimers(t evidence.NeighTimers) string {
	var b strings.Builder
	fmt.Fprintf(&b, "base_reachable_time_ms=%d delay_first_probe_time=%d retrans_time_ms=%d ucast_solicit=%d mcast_solicit=%d mcast_resolicit=%d gc_stale_time=%d",
		t.BaseReachable.Milliseconds(), int(t.DelayFirstProbe.Seconds()), t.RetransTime.Milliseconds(),
		t.UcastSolicit, t.McastSolicit, t.McastResolicit, int(t.GCStaleTime.Seconds()))
	if t.ReachableTime > 0 {
		fmt.Fprintf(&b, " (reachable_time drawn by the kernel: %d ms)", t.ReachableTime.Milliseconds())
	}
	return b.String()
}

func secs(d time.Duration) string { return fmt.Sprintf("%.3g s", d.Seconds()) }
