package framework

import (
	"context"
	"sync"
	"time"

	"github.com/cozystack/vlan-conformance/framework/platform"
)

// slotPool is the process's boot slots: as many guests boot at once as the
// platform says pays off (platform.SideBySide), whoever starts them
// (StartVMs, a re-creation, a spec's side work, the background's
// StartPrestarts). Under TCG the machine's cores are the lane's limit,
// and a boot that waits for another to end waits a whole boot (a minute
// and more). So work a spec awaits, its own boot or its side work
// (Aside), never waits for the background's: it counts only its own kind,
// up to the cores, never beyond them. The background boots only into a free core,
// and not into one an awaited boot freed less than quietFor ago: a spec
// that ends a boot starts its next one (a re-creation, the next VM of its
// container) within seconds, and the core is kept for it. A freed slot
// goes to a spec's own boot first, then to side work, then to the
// background.
//
// Measured (issue 34): with side work queued behind the background, a
// quarter of the soaked VM lane had one guest booting and a core idle;
// with the background free to take every core at once, it took both in
// the seconds between two of the ARP container's re-creations, and the
// next ones waited for its boots (five guests at once). And a core buys
// about one boot a minute whether one or two boot on the two cores, but
// fewer with three: each guest's QEMU then ran at 0.40-0.47 of a core and
// spent 80-108 core-seconds on its boot, against 76-94 with two at once
// and 53-64 alone (sampled every 5 s through the clean-clone CI of
// 28670b8), so awaited work no longer takes a slot beyond the cores.
type slotPool struct {
	mu      sync.Mutex
	size    int
	used    [kinds]int
	waiters [kinds][]chan struct{} // each handed a slot by closing its channel
	quiet   time.Duration          // how long a slot an awaited boot freed is kept from the background
	hushed  time.Time              // until when the background takes no slot
	wake    *time.Timer            // hands out what is free once hushed has passed
}

// quietFor is the time a spec takes between two of its boots: the delete
// of a VM and the create of its next, the next It of an Ordered container.
const quietFor = 20 * time.Second

// bootKind is who boots: the order in which freed slots are handed out.
type bootKind int

const (
	own   bootKind = iota // a spec's own boot
	side                  // a spec's side work (Aside): a later spec awaits it
	ahead                 // the background's boot of a later spec's VM
	kinds
)

func newSlotPool(size int) *slotPool { return &slotPool{size: max(size, 1), quiet: quietFor} }

// free tells whether a boot of that kind may take a slot now. A platform
// whose guests boot one at a time (one slot) gets no slot beyond it: its
// boots are not made to overlap. s.mu is held.
func (s *slotPool) free(k bootKind) bool {
	awaited := s.used[own] + s.used[side]
	if s.size == 1 {
		return awaited+s.used[ahead] < 1
	}
	if k == ahead {
		return s.used[ahead] < s.background() && awaited+s.used[ahead] < s.size && !time.Now().Before(s.hushed)
	}
	return awaited < s.size
}

// background is how many boots the background may have under way at once:
// every core, when no spec boots.
func (s *slotPool) background() int { return s.size }

// hold waits for a slot, behind the waiters of its kind and of those
// before it; release gives it back.
func (s *slotPool) hold(ctx context.Context, k bootKind) (release func(), err error) {
	s.mu.Lock()
	if s.free(k) && s.queued(k) == 0 {
		s.used[k]++
		s.mu.Unlock()
		return s.releaser(k), nil
	}
	ch := make(chan struct{})
	s.waiters[k] = append(s.waiters[k], ch)
	s.mu.Unlock()
	select {
	case <-ch:
		return s.releaser(k), nil
	case <-ctx.Done():
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.drop(ch) {
			// Handed a slot as the context ended: give it on.
			s.give(k)
		}
		return nil, context.Cause(ctx)
	}
}

// queued counts the waiters a boot of kind k queues behind. s.mu is held.
func (s *slotPool) queued(k bootKind) int {
	n := 0
	for q := own; q <= k; q++ {
		n += len(s.waiters[q])
	}
	return n
}

func (s *slotPool) releaser(k bootKind) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.give(k)
		})
	}
}

// give frees a slot of kind k and hands what is free out, kind by kind;
// a slot an awaited boot frees is kept from the background for s.quiet.
// s.mu is held.
func (s *slotPool) give(k bootKind) {
	s.used[k]--
	if k != ahead {
		s.keepFromBackground()
	}
	s.handOut()
}

// hush keeps every free slot from the background for s.quiet: a spec is
// about to boot VMs of its own (TakeAll), which ask for their slots only
// once their preparation is done. Measured (8dad48f, soaked): the ARP
// container took its three guests from the background as the run began,
// the background's next boot ahead (vm-jumbo) got a core in the seconds
// before they asked, and four guests booted on two cores, the ARP
// container's first logins at 151-154 s instead of 65-100.
func (s *slotPool) hush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keepFromBackground()
}

// keepFromBackground starts (or restarts) the quiet period, after which
// what is free is handed out. s.mu is held.
func (s *slotPool) keepFromBackground() {
	if s.size < 2 || s.quiet <= 0 {
		return
	}
	s.hushed = time.Now().Add(s.quiet)
	if s.wake == nil {
		s.wake = time.AfterFunc(s.quiet, s.handOutLater)
	} else {
		s.wake.Reset(s.quiet)
	}
}

// handOutLater hands out what the quiet period kept.
func (s *slotPool) handOutLater() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handOut()
}

// handOut hands what is free out, kind by kind. s.mu is held.
func (s *slotPool) handOut() {
	for w := own; w < kinds; w++ {
		for len(s.waiters[w]) > 0 && s.free(w) {
			close(s.waiters[w][0])
			s.waiters[w] = s.waiters[w][1:]
			s.used[w]++
		}
	}
}

// inUse is how many slots are held, of every kind. s.mu is held.
func (s *slotPool) inUse() int { return s.used[own] + s.used[side] + s.used[ahead] }

// drop removes a waiter that gave up; false if it was handed a slot
// already. s.mu is held.
func (s *slotPool) drop(ch chan struct{}) bool {
	for k := range s.waiters {
		q := &s.waiters[k]
		for i, c := range *q {
			if c == ch {
				*q = append((*q)[:i], (*q)[i+1:]...)
				return true
			}
		}
	}
	return false
}

// One run per process, so one platform: the pool is made on first use.
var (
	slotsOnce sync.Once
	slots     *slotPool
)

func bootSlots(p platform.Platform) *slotPool {
	slotsOnce.Do(func() {
		at := 1
		if s, ok := platform.As[platform.SideBySide](p); ok {
			at = s.StartsSideBySide()
		}
		slots = newSlotPool(at)
	})
	return slots
}

// holdSlot waits for a boot slot for a spec's own boot, or for its side
// work's (Aside). Work that outlives its container (HandOn) also waits,
// as the background does, for no container to disturb what a VM's start
// needs (Disrupts), and holds the containers that would off until its
// guest is attached: the ctx returned tells the platform when that is.
func holdSlot(ctx context.Context, p platform.Platform) (context.Context, func(), error) {
	k := own
	if aside, _ := ctx.Value(asideKey{}).(bool); aside {
		k = side
	}
	if on, _ := ctx.Value(handedOnKey{}).(bool); !on {
		release, err := bootSlots(p).hold(ctx, k)
		return ctx, release, err
	}
	release, settle, err := holdSteadySlot(ctx, p, nil, k)
	if err != nil {
		return ctx, nil, err
	}
	return platform.WithBootTrace(ctx, &platform.BootTrace{Attached: settle}), release, nil
}

type asideKey struct{}

// Aside marks the boots under ctx as a spec's side work, run beside its
// own (ARP-05's re-creation beside ARP-02's, ARP-06's second guest beside
// the chain): each takes its slot behind every spec's own boot and ahead
// of the background's, which boot VMs no spec awaits yet.
func Aside(ctx context.Context) context.Context {
	return context.WithValue(ctx, asideKey{}, true)
}

// holdBackgroundSlot waits for no container to be disrupting (Disrupts)
// every node or one of the nodes the VM may start on (DisruptsNodes), then
// for a boot slot behind every spec's own boot. settle lets the
// disrupting containers go once the guest is attached (platform.BootTrace):
// what they disturb is the attachment, not the guest's boot after it;
// release does too, and gives the slot back. Steady is taken before the
// slot, so that a slot is never held waiting for a disruption to end.
func holdBackgroundSlot(ctx context.Context, p platform.Platform, on []platform.Node) (release, settle func(), err error) {
	return holdSteadySlot(ctx, p, on, ahead)
}

// holdSteadySlot waits for no container to be disrupting every node or
// one of on (none: a VM placed anywhere), then for a slot of kind k;
// settle lets the disrupting containers go, release does too and gives
// the slot back.
func holdSteadySlot(ctx context.Context, p platform.Platform, on []platform.Node, k bootKind) (release, settle func(), err error) {
	locks := nodeLocks(on, false)
	steady.all.RLock()
	for _, l := range locks {
		l.RLock()
	}
	var once sync.Once
	settle = func() {
		once.Do(func() {
			for _, l := range locks {
				l.RUnlock()
			}
			steady.all.RUnlock()
		})
	}
	r, err := bootSlots(p).hold(ctx, k)
	if err != nil {
		settle()
		return nil, nil, err
	}
	return func() { settle(); r() }, settle, nil
}
