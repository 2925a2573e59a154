package framework

import (
	"context"
	"sync"

	"github.com/cozystack/vlan-conformance/framework/platform"
)

// slotPool is the process's boot slots: as many guests boot at once as the
// platform says pays off (platform.SideBySide), whoever starts them
// (StartVMs, a re-creation, the background's StartPrestarts). A freed slot
// goes to a spec's own boot before the background's: under TCG the
// machine's cores are the lane's limit, so the background may fill every
// slot a spec leaves idle, and a spec waits at most for one boot to end.
type slotPool struct {
	mu         sync.Mutex
	size, used int
	fore, back []chan struct{} // waiters, each handed a slot by closing its channel
}

func newSlotPool(size int) *slotPool { return &slotPool{size: max(size, 1)} }

// hold waits for a slot, ahead of every background waiter when foreground;
// release gives it back.
func (s *slotPool) hold(ctx context.Context, foreground bool) (release func(), err error) {
	s.mu.Lock()
	if s.used < s.size { // no waiters then: a freed slot goes to one at once
		s.used++
		s.mu.Unlock()
		return s.releaser(), nil
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
		return s.releaser(), nil
	case <-ctx.Done():
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.drop(ch) {
			// Handed a slot as the context ended: give it on.
			s.handOn()
		}
		return nil, context.Cause(ctx)
	}
}

func (s *slotPool) releaser() func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.handOn()
		})
	}
}

// handOn passes a held slot to the first foreground waiter, else the first
// background one, else frees it. s.mu is held.
func (s *slotPool) handOn() {
	switch {
	case len(s.fore) > 0:
		close(s.fore[0])
		s.fore = s.fore[1:]
	case len(s.back) > 0:
		close(s.back[0])
		s.back = s.back[1:]
	default:
		s.used--
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

// holdSlot waits for a boot slot for a spec's own boot.
func holdSlot(ctx context.Context, p platform.Platform) (release func(), err error) {
	return bootSlots(p).hold(ctx, true)
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
