package framework

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"

	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/suites/labels"
)

// Prestarted is a VM one spec of a container starts, registered while the
// spec tree is built (Prestart). On a platform whose guests boot side by
// side the run boots it in the background from its set-up on
// (StartPrestarts), in whatever boot slot no spec's own boot waits for
// (slotPool), while whatever containers come first run: a TCG boot is a
// minute and a half of one core, and one container's single boot leaves
// the other idle. Take
// gives it to its spec, booting it then when the background did not get
// to it (and always on a platform whose guests boot one at a time).
type Prestarted struct {
	f        *Framework
	name     string
	selected func() bool // whether the run selects a spec that takes it
	addr     netip.Prefix
	prep     func(ctx context.Context, p platform.Platform) (platform.VMSpec, error)

	mu       sync.Mutex
	state    prestartState
	done     chan struct{} // closed when the background's boot of it ended
	spec     platform.VMSpec
	began    bool // its boot got its slot: it may have made things on the node
	promoted bool // its spec took it before its boot got a slot: the spec boots it
	abandon  context.CancelFunc
	vm       *VM
	err      error
}

// errPromoted ends a background boot whose spec took the VM before the
// boot got its slot.
var errPromoted = errors.New("taken by its spec before its boot ahead got a slot")

type prestartState int

const (
	waiting prestartState = iota // nobody started it yet
	booting                      // the background boots it
	ready                        // the background booted it (or failed to); not taken yet
	taken                        // its spec has it, or boots it itself
)

// aheadAtMost bounds the VMs booted ahead and not yet taken: each holds
// its node's memory (4 GiB under vm-instance's default instancetype; about
// 0.75 GiB of the machine's under TCG: seven VMs up at once took 5174 MiB
// in the bench of 717a77f) until its container runs. Six is every guest
// the VM lane's later containers boot: with four, the last two waited for
// the ARP container's end (vm-elsewhere and vm-spoofchk began at 662 s and
// 714 s of 850, a core idle through most of the ARP chain's restarts).
const aheadAtMost = 6

var prestarts struct {
	sync.Mutex
	all    []*Prestarted
	cancel context.CancelFunc
	done   chan struct{}
}

// Prestart registers the VM a spec of this container will Take: prep
// makes what it needs (its NAD) and gives its spec, as the spec would.
// ls are the spec's labels and its containers', so that only a VM whose
// spec the run selects boots ahead. Its address is the tenant's next one
// now, while the tree is built, so addresses stay where they were whatever
// boots first.
func (f *Framework) Prestart(name string, prep func(ctx context.Context, p platform.Platform) (platform.VMSpec, error), ls ...Labels) *Prestarted {
	return f.PrestartWhen(name, prep, func() bool { return labels.Selected(ls...) })
}

// PrestartWhen is Prestart for a VM several specs share: selected tells
// whether the run selects any of them.
func (f *Framework) PrestartWhen(name string, prep func(ctx context.Context, p platform.Platform) (platform.VMSpec, error), selected func() bool) *Prestarted {
	addr, err := f.NextAddress()
	if err != nil {
		panic(err) // a tenant's block ran out: a bug in the suite
	}
	ps := &Prestarted{f: f, name: name, selected: selected, addr: addr, prep: prep, done: make(chan struct{})}
	prestarts.Lock()
	prestarts.all = append(prestarts.all, ps)
	prestarts.Unlock()
	return ps
}

// StartPrestarts boots the registered VMs the run selects, in the order
// registered, in the background, at most
// aheadAtMost booting or booted and not taken; nothing on a platform whose
// guests boot one at a time.
// StopPrestarts ends it.
func StartPrestarts(ctx context.Context, p platform.Platform) {
	if bootSlots(p).size < 2 {
		return
	}
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	prestarts.Lock()
	all := append([]*Prestarted(nil), prestarts.all...)
	prestarts.cancel, prestarts.done = cancel, done
	prestarts.Unlock()
	// As many background boots at once as the background may hold slots
	// (every core, when no spec boots: slotPool). No more: a boot queued for a
	// slot already holds steady, which Disrupts would wait for.
	running := make(chan struct{}, bootSlots(p).background())
	go func() {
		var wg sync.WaitGroup
		defer func() { wg.Wait(); close(done) }()
		for _, ps := range all {
			if !ps.selected() {
				continue
			}
			for untaken(all) >= aheadAtMost {
				select {
				case <-bg.Done():
					return
				case <-time.After(time.Second):
				}
			}
			select {
			case running <- struct{}{}:
			case <-bg.Done():
				return
			}
			if bg.Err() != nil || !ps.move(waiting, booting) {
				<-running
				continue
			}
			wg.Add(1)
			go func() {
				defer func() { <-running; wg.Done() }()
				ps.finish(ps.boot(bg, p, true))
			}()
		}
	}()
}

// StopPrestarts stops the background's boots and deletes every VM it
// booted that no spec took, and stops the work handed on (HandOn) that no
// spec waited for.
func StopPrestarts(ctx context.Context) error {
	errs := []error{stopHandedOn()}
	prestarts.Lock()
	cancel, done, all := prestarts.cancel, prestarts.done, prestarts.all
	prestarts.Unlock()
	if cancel == nil {
		return errors.Join(errs...)
	}
	cancel()
	<-done
	for _, ps := range all {
		ps.mu.Lock()
		left := ps.state == ready && ps.vm != nil && ps.vm.Guest != nil
		ps.mu.Unlock()
		if left {
			errs = append(errs, ps.vm.p.DeleteVM(ctx, ps.vm.Guest))
		}
	}
	return errors.Join(errs...)
}

// SetAside deletes the VMs booted ahead, not taken yet, whose spec
// matches: a spec that Disrupts calls it for the ones it would disturb or
// be disturbed by (VLAN-13 re-cables a macvlan parent, which a booted-ahead
// vm-mv holds a child of: EBUSY). Each boots again when its spec takes it.
// Call it after Disrupts or DisruptsNodes, which end the background's
// boots under way there.
func SetAside(ctx context.Context, match func(platform.VMSpec) bool) error {
	prestarts.Lock()
	all := append([]*Prestarted(nil), prestarts.all...)
	prestarts.Unlock()
	var errs []error
	for _, ps := range all {
		ps.mu.Lock()
		state, began := ps.state, ps.began
		ps.mu.Unlock()
		// A background boot that has not got its slot waits for the
		// disruption to end: it made nothing yet.
		if state != ready && (state != booting || !began) {
			continue
		}
		// One that does not match is left alone, booting or not: a
		// disruption of some nodes lets boots onto the others go on.
		ps.mu.Lock()
		spec := ps.spec
		ps.mu.Unlock()
		if !match(spec) {
			continue
		}
		// Disrupts waited for its guest's attachment only: wait for the
		// boot to return.
		select {
		case <-ps.done:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		ps.mu.Lock()
		vm, spec := ps.vm, ps.spec
		aside := ps.state == ready && match(spec)
		if aside {
			ps.state, ps.vm, ps.err, ps.began = waiting, nil, nil, false
		}
		ps.mu.Unlock()
		if aside && vm != nil && vm.Guest != nil {
			AddReportEntry("set aside", fmt.Sprintf("%s, booted ahead, deleted: its spec boots it again", ps.name))
			errs = append(errs, vm.p.DeleteVM(ctx, vm.Guest))
		}
	}
	return errors.Join(errs...)
}

// BootAside boots the VM now as a spec's side work (Aside: its slot
// behind every spec's own boot, ahead of the background's), for a later
// spec to Take; one the background or a spec began already is left as it
// is. It is for a VM that must not boot before a point of the container's
// (ARP-06's second guest with ARP-05's MAC, once ARP-05's re-creation is
// timed), which the background, booting in registration order, cannot
// know. stop ends its boot if still under way; a VM it booted that no spec
// took is deleted with the background's (StopPrestarts).
func (ps *Prestarted) BootAside(ctx context.Context) (stop func()) {
	p, err := ps.f.Platform(ctx)
	if err != nil {
		return func() {} // Take reports it
	}
	ps.mu.Lock()
	if ps.state != waiting {
		ps.mu.Unlock()
		return func() {}
	}
	// began: TakeAll waits for this boot, never takes it over.
	ps.state, ps.began = booting, true
	ps.mu.Unlock()
	bg, cancel := context.WithCancel(Aside(context.WithoutCancel(ctx)))
	go func() { ps.finish(ps.boot(bg, p, false)) }()
	return func() { cancel(); <-ps.done }
}

// Take is the VM for the current spec, deleted when the spec (or the
// container, from a BeforeAll) ends.
func (ps *Prestarted) Take(ctx context.Context) (*VM, error) {
	vms, err := TakeAll(ctx, ps)
	return vms[0], err
}

// TakeAll is Take for several VMs at once: those the background did not
// get to boot now, side by side where the platform allows. A VM that did
// not start is nil, and the error names it.
func TakeAll(ctx context.Context, all ...*Prestarted) ([]*VM, error) {
	vms := make([]*VM, len(all))
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	was := make([]prestartState, len(all))
	// Every boot the background did not begin starts first; only then does
	// the spec wait for those it did (measured: waiting in order started
	// vm-arp05 107 s late, once vm-arp's boot ahead had ended). The
	// background takes no core meanwhile: these boots ask for theirs once
	// prepared (slotPool.hush).
	hushed := false
	for i, ps := range all {
		p, err := ps.f.Platform(ctx)
		if err != nil {
			return vms, err
		}
		ps.mu.Lock()
		was[i] = ps.state
		ps.state = taken
		// A boot ahead still waiting for a slot, which the background gets
		// only on a free core, is the spec's own now (measured: ARP-06
		// waited 118 s for vm-arp06b, queued behind the boots of specs
		// that were done with theirs).
		promote := was[i] == booting && !ps.began
		if promote {
			ps.promoted = true
			if ps.abandon != nil {
				ps.abandon()
			}
		}
		ps.mu.Unlock()
		if (promote || was[i] == waiting) && !hushed {
			bootSlots(p).hush()
			hushed = true
		}
		if promote {
			wg.Add(1)
			go func() {
				defer wg.Done()
				select {
				case <-ps.done: // its background boot gave up its wait
				case <-ctx.Done():
					errs[i] = fmt.Errorf("waiting for %s's boot ahead to give way: %w", ps.name, context.Cause(ctx))
					return
				}
				vms[i], errs[i] = ps.boot(ctx, p, false)
			}()
			was[i] = waiting
			continue
		}
		if was[i] == waiting {
			wg.Add(1)
			go func() {
				defer wg.Done()
				vms[i], errs[i] = ps.boot(ctx, p, false)
			}()
		}
	}
	for i, ps := range all {
		switch was[i] {
		case waiting:
		case booting, ready:
			select {
			case <-ps.done:
				vms[i], errs[i] = ps.vm, ps.err
			case <-ctx.Done():
				errs[i] = fmt.Errorf("waiting for %s, booting ahead: %w", ps.name, context.Cause(ctx))
			}
		default:
			errs[i] = fmt.Errorf("%s was taken already: a bug in the suite", ps.name)
		}
	}
	wg.Wait()
	for i, vm := range vms {
		if vm != nil && vm.Guest != nil {
			deleteAtTheEnd(vm)
		}
		if errs[i] != nil || vm == nil || vm.Guest == nil {
			vms[i] = nil
		}
	}
	return vms, errors.Join(errs...)
}

// finish records how a boot that did not hand the VM to its spec ended:
// ready for the spec to take, unless the spec took it meanwhile.
func (ps *Prestarted) finish(vm *VM, err error) {
	ps.mu.Lock()
	ps.vm, ps.err = vm, err
	if ps.state == booting {
		ps.state = ready
	}
	ps.mu.Unlock()
	close(ps.done)
}

// move changes the state from one to another, if it is still the first.
func (ps *Prestarted) move(from, to prestartState) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.state != from {
		return false
	}
	ps.state = to
	return true
}

// boot makes what the VM needs and starts it at its address, in a
// background slot or a foreground one.
func (ps *Prestarted) boot(ctx context.Context, p platform.Platform, background bool) (*VM, error) {
	spec, err := ps.prep(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("preparing %s: %w", ps.name, err)
	}
	spec.Name = ps.name
	spec.Namespace, spec.CloudInit = ps.f.Namespace(), ps.f.CloudInit(ps.addr)
	ps.mu.Lock()
	ps.spec = spec
	ps.mu.Unlock()
	vm := &VM{Addr: ps.addr, p: p, name: ps.name}
	hold := holdSlot
	if background {
		var settle func()
		ctx = platform.WithBootTrace(ctx, &platform.BootTrace{Attached: func() { settle() }})
		hold = func(ctx context.Context, p platform.Platform) (context.Context, func(), error) {
			// The wait for a slot ends early when the spec takes the VM
			// (TakeAll): the boot itself runs under ctx.
			wait, abandon := context.WithCancel(ctx)
			defer abandon()
			ps.mu.Lock()
			ps.abandon = abandon
			if ps.promoted {
				abandon()
			}
			ps.mu.Unlock()
			release, s, err := holdBackgroundSlot(wait, p, append([]platform.Node{spec.Node}, spec.AlsoOn...))
			ps.mu.Lock()
			defer ps.mu.Unlock()
			ps.abandon = nil
			if ps.promoted {
				if err == nil {
					release()
				}
				return ctx, nil, errPromoted
			}
			if err != nil {
				return ctx, nil, err
			}
			settle = s
			ps.began = true
			return ctx, release, nil
		}
	}
	return vm, boot(ctx, p, []platform.VMSpec{spec}, []*VM{vm}, 1, hold)
}

// untaken counts the VMs booting or booted ahead that no spec took yet.
func untaken(all []*Prestarted) int {
	n := 0
	for _, ps := range all {
		ps.mu.Lock()
		if ps.state == booting || ps.state == ready && ps.vm != nil && ps.vm.Guest != nil {
			n++
		}
		ps.mu.Unlock()
	}
	return n
}
