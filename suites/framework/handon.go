package framework

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// HandedOn is work a container handed on as it ended (HandOn): it runs in
// the background beside the containers after that one, for a spec of a
// later container to wait for (Wait). The ARP container's restarts of
// vm-arp run so beside the containers that only take guests booted ahead,
// instead of one after another before them (issue 34).
type HandedOn[T any] struct {
	done   chan struct{}
	cancel context.CancelFunc
	once   sync.Once
	v      T
	err    error // deleting its VMs
}

// deleteWithin bounds the deletion of a handed-on VM once its work ended,
// also when the run stopped that work.
const deleteWithin = 5 * time.Minute

type handedOnKey struct{}

// handedOn is every work handed on, for the run's end to stop.
var handedOn struct {
	sync.Mutex
	stops []func() error
}

// HandOn starts work in the background. Its boots are side work (Aside)
// that also wait, as the background's do, for no container to disturb what
// a VM's start needs (Disrupts), and hold such a container off until the
// guest is attached. The VMs it takes over are its from then on: the end
// of the spec or container that started them leaves them, and they are
// deleted once work returns. Call it on a spec's goroutine before that
// end (a later spec's BeforeEach, or a DeferCleanup registered after the
// VMs were taken: cleanups run last registered first). The run's end stops it (StopPrestarts) if no
// spec waited for it.
func HandOn[T any](ctx context.Context, work func(context.Context) T, vms ...*VM) *HandedOn[T] {
	for _, v := range vms {
		v.handedOn = true
	}
	bg, cancel := context.WithCancel(context.WithValue(Aside(context.WithoutCancel(ctx)), handedOnKey{}, true))
	h := &HandedOn[T]{done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(h.done)
		h.v = work(bg)
		del, stop := context.WithTimeout(context.WithoutCancel(bg), deleteWithin)
		defer stop()
		var errs []error
		for _, v := range vms {
			if err := v.Delete(del); err != nil {
				errs = append(errs, fmt.Errorf("deleting %s, handed on: %w", v.Name(), err))
			}
		}
		h.err = errors.Join(errs...)
	}()
	handedOn.Lock()
	handedOn.stops = append(handedOn.stops, h.Stop)
	handedOn.Unlock()
	return h
}

// Wait is what the work returned, once it and the deletion of its VMs
// are done, or ctx's end first.
func (h *HandedOn[T]) Wait(ctx context.Context) (T, error) {
	select {
	case <-h.done:
		return h.v, nil
	case <-ctx.Done():
		var none T
		return none, fmt.Errorf("waiting for the work handed on: %w", context.Cause(ctx))
	}
}

// Stop ends the work if still under way and waits for it; the error is
// the deletion of its VMs'.
func (h *HandedOn[T]) Stop() error {
	h.once.Do(h.cancel)
	<-h.done
	return h.err
}

// stopHandedOn stops every work handed on.
func stopHandedOn() error {
	handedOn.Lock()
	stops := handedOn.stops
	handedOn.stops = nil
	handedOn.Unlock()
	var errs []error
	for _, stop := range stops {
		errs = append(errs, stop())
	}
	return errors.Join(errs...)
}
