package framework

import (
	"context"
	"testing"
	"time"

	"github.com/cozystack/vlan-conformance/framework/platform"
)

// Work handed on boots beside the containers after its own: as the
// background's boots, it waits for a container that disturbs VM starts
// (Disrupts) to end, and holds the next one off only until its guest is
// attached.
func TestWorkHandedOnWaitsForADisruptionAndHoldsTheNextOffUntilAttached(t *testing.T) {
	slotsOnce.Do(func() { slots = newSlotPool(4) })
	saved := slots
	slots = newSlotPool(4)
	slots.quiet = 0 // the slot it frees is not kept from other tests' background boots
	defer func() { slots = saved }()
	ctx := context.WithValue(Aside(context.Background()), handedOnKey{}, true)
	steady.all.Lock() // a container rolls Multus out
	held := make(chan context.Context, 1)
	var release func()
	go func() {
		c, r, err := holdSlot(ctx, nil)
		if err != nil {
			t.Error(err)
		}
		release = r
		held <- c
	}()
	select {
	case <-held:
		t.Fatal("a boot handed on started while a container disturbed VM starts")
	case <-time.After(50 * time.Millisecond):
	}
	steady.all.Unlock()
	var boot context.Context
	select {
	case boot = <-held:
	case <-time.After(time.Second):
		t.Fatal("a boot handed on still waited once the disruption ended")
	}

	next := make(chan struct{})
	go func() { steady.all.Lock(); close(next) }()
	select {
	case <-next:
		t.Fatal("the next disruption began while the boot handed on was attaching its guest")
	case <-time.After(50 * time.Millisecond):
	}
	platform.Attached(boot)
	select {
	case <-next:
	case <-time.After(time.Second):
		t.Fatal("the next disruption still waited once the guest was attached")
	}
	steady.all.Unlock()
	release()
}

// A spec of a later container gets what the work handed on returned; the
// run's end stops the work no spec waited for.
func TestWorkHandedOnIsWaitedForOrStoppedAtTheRunsEnd(t *testing.T) {
	done := HandOn(context.Background(), func(context.Context) string { return "restarted" })
	got, err := done.Wait(context.Background())
	if err != nil || got != "restarted" {
		t.Fatalf("Wait: %q, %v; want what the work returned", got, err)
	}

	stopped := make(chan bool, 1)
	left := HandOn(context.Background(), func(ctx context.Context) string {
		<-ctx.Done()
		stopped <- true
		return ""
	})
	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := left.Wait(short); err == nil {
		t.Fatal("Wait returned before the work did")
	}
	if err := stopHandedOn(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stopped:
	default:
		t.Fatal("the run's end did not stop the work no spec waited for")
	}
	if err := left.Stop(); err != nil { // once stopped, Stop only reports
		t.Fatal(err)
	}
}
