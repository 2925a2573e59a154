package framework

import (
	"context"
	"testing"
	"time"

	"github.com/cozystack/vlan-conformance/framework/platform"
)

// A freed slot goes to a spec's own boot first, then to side work, then
// to the background, whatever waited longer; a waiter that gives up is
// skipped, and its slot not lost.
func TestSlotsGoToOwnBootsThenSideWorkThenTheBackground(t *testing.T) {
	s := newSlotPool(2)
	s.quiet = 10 * time.Millisecond
	ctx := context.Background()
	o1, _ := s.hold(ctx, own)
	o2, _ := s.hold(ctx, own)

	got := make(chan string, 4)
	wait := func(name string, k bootKind, ctx context.Context) {
		r, err := s.hold(ctx, k)
		if err != nil {
			got <- name + " gave up"
			return
		}
		got <- name
		time.Sleep(20 * time.Millisecond)
		r()
	}
	gone, cancel := context.WithCancel(ctx)
	go wait("ahead", ahead, ctx)
	time.Sleep(10 * time.Millisecond)
	go wait("side", side, ctx)
	time.Sleep(10 * time.Millisecond)
	go wait("gives up", own, gone)
	time.Sleep(10 * time.Millisecond)
	go wait("own", own, ctx)
	time.Sleep(10 * time.Millisecond)
	cancel()
	if g := <-got; g != "gives up gave up" {
		t.Fatalf("first: %q, want the cancelled waiter to give up", g)
	}
	o1()
	if g := <-got; g != "own" {
		t.Fatalf("the first freed slot went to %q, want the spec's own boot", g)
	}
	o2()
	if g := <-got; g != "side" {
		t.Fatalf("the second freed slot went to %q, want the side work", g)
	}
	if g := <-got; g != "ahead" {
		t.Fatalf("then %q, want the background once a core was free", g)
	}
	o1() // a release is given once
	time.Sleep(50 * time.Millisecond)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inUse() != 0 || s.queued(ahead) != 0 {
		t.Fatalf("after every release: %d slots used, %d waiters; want none", s.inUse(), s.queued(ahead))
	}
}

// Work a spec awaits never waits for the background's boots: it counts
// its own kind only, up to the cores and never beyond them (three boots
// on two cores buy fewer boots a minute than two). The background takes
// every core while no spec boots, and only a free one.
func TestWorkASpecAwaitsNeverWaitsForTheBackground(t *testing.T) {
	s := newSlotPool(2)
	s.quiet = 10 * time.Millisecond
	ctx := context.Background()
	a1, _ := s.hold(ctx, ahead)
	a2 := got(t, holdLater(s, ahead), "the background did not get the second core, idle")
	a3 := holdLater(s, ahead)
	blocked(t, a3, "the background got a slot beyond the cores")
	var held []func()
	for _, k := range []bootKind{own, side} {
		r, err := s.hold(ctx, k) // at once, whatever the background holds
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, r)
	}
	o4 := holdLater(s, own)
	blocked(t, o4, "a spec's own boot got a slot beyond the cores")
	a1()
	a2()
	blocked(t, a3, "the background got a slot while the cores are busy with boots specs await")
	held[0]()
	r4 := got(t, o4, "the spec's own boot never got the slot freed")
	for _, r := range append(held[1:], r4) {
		r()
	}
	got(t, a3, "the background's waiter never got a free core")()
}

// A core an awaited boot frees is kept from the background for the quiet
// period, which a spec's next boot takes; one the background frees is not.
func TestTheBackgroundWaitsAQuietPeriodAfterAnAwaitedBoot(t *testing.T) {
	s := newSlotPool(2)
	s.quiet = 200 * time.Millisecond
	ctx := context.Background()
	o, _ := s.hold(ctx, own)
	a := holdLater(s, ahead)
	got(t, a, "the background did not get the idle core")()
	o()
	a = holdLater(s, ahead)
	blocked(t, a, "the background took a core an awaited boot freed a moment ago")
	next, err := s.hold(ctx, own) // the spec's next boot, within the quiet period
	if err != nil {
		t.Fatal(err)
	}
	got(t, a, "the background never got the other core once the quiet period passed")()
	next()
	b := got(t, holdLater(s, ahead), "the background never got a core once the spec's boots ended")
	b() // the background's own release keeps nothing back
	soon, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	r, err := s.hold(soon, ahead)
	if err != nil {
		t.Fatalf("the background waited for a core it had freed itself: %v", err)
	}
	r()
}

// With one slot (a platform whose guests boot one at a time) nothing
// overlaps, and a spec's side work (Aside) still gets the slot once it is
// free: measured, ARP-05's re-creation beside ARP-02's waited forever in
// the lab.
func TestOneSlotServesSideWorkToo(t *testing.T) {
	s := newSlotPool(1)
	ctx := context.Background()
	o, _ := s.hold(ctx, own)
	got := holdLater(s, side)
	select {
	case <-got:
		t.Fatal("side work overlapped a boot on a platform that boots one at a time")
	case <-time.After(30 * time.Millisecond):
	}
	o()
	select {
	case r := <-got:
		r()
	case <-time.After(time.Second):
		t.Fatal("the side work's waiter never got the only slot, free")
	}
}

// blocked fails when ch delivers within 30 ms.
func blocked(t *testing.T, ch <-chan func(), why string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatal(why)
	case <-time.After(30 * time.Millisecond):
	}
}

// got is what ch delivers within a second.
func got(t *testing.T, ch <-chan func(), why string) func() {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(time.Second):
		t.Fatal(why)
		return nil
	}
}

// holdLater waits for a slot in a goroutine and hands its release over
// once it has one.
func holdLater(s *slotPool, k bootKind) <-chan func() {
	got := make(chan func(), 1)
	go func() {
		r, _ := s.hold(context.Background(), k)
		got <- r
	}()
	return got
}

// A disruption of some nodes (DisruptsNodes) holds back the background's
// boots that may land there, a VM placed on no node among them, and only
// those: measured, a re-cabled macvlan node held every boot back for a
// minute and a half.
func TestADisruptedNodeHoldsBackOnlyTheBootsThatMayLandThere(t *testing.T) {
	slotsOnce.Do(func() { slots = newSlotPool(4) })
	a, b := namedNode{name: "node-a"}, namedNode{name: "node-b"}
	disrupted := nodeLocks([]platform.Node{a}, true)
	for _, l := range disrupted {
		l.Lock()
	}
	elsewhere := got(t, holdBackground(nil, b), "a boot onto another node waited for the disruption")
	onIt := holdBackground(nil, a)
	mayMove := holdBackground(nil, b, a)
	anywhere := holdBackground(nil)
	blocked(t, onIt, "a boot onto the disrupted node went ahead")
	blocked(t, mayMove, "a boot free to run on the disrupted node went ahead")
	blocked(t, anywhere, "a boot placed on no node went ahead")
	elsewhere()
	for _, l := range disrupted {
		l.Unlock()
	}
	for _, ch := range []<-chan func(){onIt, mayMove, anywhere} {
		got(t, ch, "a boot held back still waited once the disruption ended")()
	}
}

type namedNode struct {
	platform.Node
	name string
}

func (n namedNode) Name() string { return n.name }

// holdBackground waits for a background slot for a VM that may start on
// nodes, in a goroutine, and hands its release over once it has one (its
// guest attached at once).
func holdBackground(p platform.Platform, on ...platform.Node) <-chan func() {
	got := make(chan func(), 1)
	go func() {
		r, settle, _ := holdBackgroundSlot(context.Background(), p, on)
		settle()
		got <- r
	}()
	return got
}

// A spec about to boot its own VMs hushes the background: a free core is
// kept from it for the quiet period, so the spec's boots, which ask once
// prepared, find it.
func TestAHushKeepsFreeCoresFromTheBackground(t *testing.T) {
	s := newSlotPool(2)
	s.quiet = 200 * time.Millisecond
	s.hush()
	a := holdLater(s, ahead)
	blocked(t, a, "the background took a free core while a spec's boots were about to ask for it")
	o, err := s.hold(context.Background(), own)
	if err != nil {
		t.Fatal(err)
	}
	defer o()
	got(t, a, "the background never got the other core once the quiet period passed")()
}
