package framework

import (
	"context"
	"testing"
	"time"
)

// A freed slot goes to a spec's own boot before the background's, whatever
// waited longer; a waiter that gives up is skipped, and its slot not lost.
func TestSlotsGoToTheForegroundFirst(t *testing.T) {
	s := newSlotPool(2)
	ctx := context.Background()
	r1, _ := s.hold(ctx, false)
	r2, _ := s.hold(ctx, false)

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
	if s.used != 0 || len(s.fore)+len(s.back) != 0 {
		t.Fatalf("after every release: %d slots used, %d waiters; want none", s.used, len(s.fore)+len(s.back))
	}
}
