package framework

import (
	"context"
	"testing"
	"time"
)

// A freed slot goes to a spec's own boot before the background's, whatever
// waited longer; a waiter that gives up is skipped, and its slot not lost.
func TestSlotsGoToTheForegroundFirst(t *testing.T) {
	s := newSlotPool(3)
	ctx := context.Background()
	r1, _ := s.hold(ctx, false)
	r2, _ := s.hold(ctx, false)
	r3, _ := s.hold(ctx, true)
	defer r3()

	got := make(chan string, 3)
	wait := func(name string, foreground bool, ctx context.Context) {
		r, err := s.hold(ctx, foreground)
		if err != nil {
			got <- name + " gave up"
			return
		}
		got <- name
		time.Sleep(20 * time.Millisecond)
		r()
	}
	gone, cancel := context.WithCancel(ctx)
	go wait("background", false, ctx)
	time.Sleep(10 * time.Millisecond)
	go wait("gives up", true, gone)
	time.Sleep(10 * time.Millisecond)
	go wait("foreground", true, ctx)
	time.Sleep(10 * time.Millisecond)
	cancel()
	if g := <-got; g != "gives up gave up" {
		t.Fatalf("first: %q, want the cancelled waiter to give up", g)
	}
	r1()
	if g := <-got; g != "foreground" {
		t.Fatalf("the first freed slot went to %q, want the foreground waiter", g)
	}
	r2()
	if g := <-got; g != "background" {
		t.Fatalf("the second freed slot went to %q, want the background waiter", g)
	}
	r1() // a release is given once
	time.Sleep(50 * time.Millisecond)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used != 1 || s.usedBack != 0 || len(s.fore)+len(s.back) != 0 {
		t.Fatalf("after every release but r3's: %d slots used (%d by the background), %d waiters; want r3's alone", s.used, s.usedBack, len(s.fore)+len(s.back))
	}
}

// The background holds one slot fewer than there are: a spec's own boot
// starts at once, whatever the background has under way; the background
// waits for its own slot to free, not for the foreground's.
func TestTheBackgroundLeavesASlotFree(t *testing.T) {
	s := newSlotPool(2)
	ctx := context.Background()
	back1, _ := s.hold(ctx, false)
	second := holdLater(s, false)
	select {
	case <-second:
		t.Fatal("the background got both slots")
	case <-time.After(30 * time.Millisecond):
	}
	fore, err := s.hold(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	fore() // the foreground's slot freed: still not the background's second
	select {
	case <-second:
		t.Fatal("the background got the slot the foreground freed beside its own")
	case <-time.After(30 * time.Millisecond):
	}
	back1()
	select {
	case r := <-second:
		r()
	case <-time.After(time.Second):
		t.Fatal("the background's waiter never got the slot its first boot freed")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used != 0 || s.usedBack != 0 {
		t.Fatalf("after every release: %d used, %d by the background", s.used, s.usedBack)
	}
}

// With one slot (a platform whose guests boot one at a time) a spec's side
// work (Aside) still gets it once it is free: measured, ARP-05's
// re-creation beside ARP-02's waited forever in the lab.
func TestOneSlotServesTheBackgroundToo(t *testing.T) {
	s := newSlotPool(1)
	ctx := context.Background()
	fore, _ := s.hold(ctx, true)
	got := holdLater(s, false)
	fore()
	select {
	case r := <-got:
		r()
	case <-time.After(time.Second):
		t.Fatal("the background's waiter never got the only slot, free")
	}
}

// holdLater waits for a slot in a goroutine and hands its release over
// once it has one.
func holdLater(s *slotPool, foreground bool) <-chan func() {
	got := make(chan func(), 1)
	go func() {
		r, _ := s.hold(context.Background(), foreground)
		got <- r
	}()
	return got
}
