package framework

import (
	"context"
	"sync"

	"github.com/cozystack/vlan-conformance/framework/platform"
)

// slotPool is the process's boot slots: as many guests boot at once as the
// platform says pays off (platform.SideBySide), whoever starts them
// (StartVMs, a re-creation, the background's StartPrestarts). A freed slot
// goes to a spec's own boot before the background's, and the background
// holds one slot fewer than there are: under TCG the machine's cores are
// the lane's limit, and a spec's boot that waits for a background one to
// end waits a whole boot (a minute and more), which on the ARP container's
// chain of re-creations (each after the last) lengthens the lane by as
// much each time; the slot kept free is idle only while no spec boots.
type slotPool struct {
	mu                   sync.Mutex
	size, used, usedBack int
	fore, back           []chan struct{} // waiters, each handed a slot by closing its channel
}

func newSlotPool(size int) *slotPool { return &slotPool{size: max(size, 1)} }

// free tells whether a boot of that kind may take a slot now: the
// background never the last one, unless there is only one (a platform
// whose guests boot one at a time has no background boots, but a spec's
// side work still has to run). s.mu is held.
func (s *slotPool) free(foreground bool) bool {
	return s.used < s.size && (foreground || s.usedBack < s.background())
}

// background is how many slots the background may hold at once: all but
// one, or the only one.
func (s *slotPool) background() int { return max(s.size-1, 1) }

// take counts a slot handed out. s.mu is held.
func (s *slotPool) take(foreground bool) {
	s.used++
	if !foreground {
		s.usedBack++
	}
}

// hold waits for a slot, ahead of every background waiter when foreground;
// release gives it back.
func (s *slotPool) hold(ctx context.Context, foreground bool) (release func(), err error) {
	s.mu.Lock()
	if s.free(foreground) && (foreground || len(s.back) == 0) {
		s.take(foreground)
		s.mu.Unlock()
		return s.releaser(foreground), nil
	}
	ch := make(chan struct{})
	if foreground {
		s.fore = append(s.fore, ch)
	} else {
		s.back = append(s.back, ch)
	}
	s.mu.Unlock()
	select {
	case <-ch:
		return s.releaser(foreground), nil
	case <-ctx.Done():
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.drop(ch) {
			// Handed a slot as the context ended: give it on.
			s.give(foreground)
		}
		return nil, context.Cause(ctx)
	}
}

func (s *slotPool) releaser(foreground bool) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.give(foreground)
		})
	}
}

// give frees a held slot and hands what is free to the foreground waiters
// first, then to the background's. s.mu is held.
func (s *slotPool) give(foreground bool) {
	s.used--
	if !foreground {
		s.usedBack--
	}
	for {
		switch {
		case len(s.fore) > 0 && s.free(true):
			close(s.fore[0])
			s.fore = s.fore[1:]
			s.take(true)
		case len(s.back) > 0 && s.free(false):
			close(s.back[0])
			s.back = s.back[1:]
			s.take(false)
		default:
			return
		}
	}
}

// drop removes a waiter that gave up; false if it was handed a slot
// already. s.mu is held.
func (s *slotPool) drop(ch chan struct{}) bool {
	for _, q := range []*[]chan struct{}{&s.fore, &s.back} {
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
// work's as the background's (Aside).
func holdSlot(ctx context.Context, p platform.Platform) (release func(), err error) {
	aside, _ := ctx.Value(asideKey{}).(bool)
	return bootSlots(p).hold(ctx, !aside)
}

type asideKey struct{}

// Aside marks the boots under ctx as a spec's side work, run beside its
// own (ARP-05's re-creation beside ARP-02's): each takes its slot as the
// background's boots do, behind every spec's own boot and never the slot
// kept free, so that the spec's own next boot is not the one that waits.
func Aside(ctx context.Context) context.Context {
	return context.WithValue(ctx, asideKey{}, true)
}

// holdBackgroundSlot waits for no container to be disrupting (Disrupts),
// then for a boot slot behind every spec's own boot. settle lets the
// disrupting containers go once the guest is attached (platform.BootTrace):
// what they disturb is the attachment, not the guest's boot after it;
// release does too, and gives the slot back. Steady is taken before the
// slot, so that a slot is never held waiting for a disruption to end.
func holdBackgroundSlot(ctx context.Context, p platform.Platform) (release, settle func(), err error) {
	steady.RLock()
	var once sync.Once
	settle = func() { once.Do(steady.RUnlock) }
	r, err := bootSlots(p).hold(ctx, false)
	if err != nil {
		settle()
		return nil, nil, err
	}
	return func() { settle(); r() }, settle, nil
}
