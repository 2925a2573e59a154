package platform

import "context"

// BootTrace is told how far a StartVM under way has got, as httptrace's
// ClientTrace is told of a request's progress: a caller that holds
// something only part of a boot needs lets it go once that part is done,
// not after the guest's whole boot: a cluster's Multus steady or a node's
// plugins in place once the guest is attached, a core once it is logged in.
type BootTrace struct {
	// Attached is called once the guest's networks are attached (a
	// cluster: its VMI Ready, the launcher pod's CNI ADD done), before the
	// guest itself has booted.
	Attached func()
	// LoggedIn is called once the guest's console login worked: what is
	// left of the boot (cloud-init's last stage, the suite's tools) takes
	// a fraction of a core, and the next VM's start, mostly waits until
	// its guest runs, can overlap it.
	LoggedIn func()
}

type bootTraceKey struct{}

// WithBootTrace is ctx carrying t for the StartVM calls made with it. A
// trace ctx carries already is told too, after t, as httptrace composes
// its hooks.
func WithBootTrace(ctx context.Context, t *BootTrace) context.Context {
	if outer, ok := ctx.Value(bootTraceKey{}).(*BootTrace); ok {
		t = &BootTrace{Attached: both(t.Attached, outer.Attached), LoggedIn: both(t.LoggedIn, outer.LoggedIn)}
	}
	return context.WithValue(ctx, bootTraceKey{}, t)
}

// both calls a, then b; either may be nil.
func both(a, b func()) func() {
	return func() {
		for _, f := range []func(){a, b} {
			if f != nil {
				f()
			}
		}
	}
}

// Attached tells ctx's BootTrace, if any, that the guest's networks are
// attached. A platform that never calls it leaves the caller holding on
// until StartVM returns.
func Attached(ctx context.Context) {
	if t, ok := ctx.Value(bootTraceKey{}).(*BootTrace); ok && t.Attached != nil {
		t.Attached()
	}
}

// LoggedIn tells ctx's BootTrace, if any, that the guest's console login
// worked. A platform that never calls it leaves the caller holding on
// until StartVM returns.
func LoggedIn(ctx context.Context) {
	if t, ok := ctx.Value(bootTraceKey{}).(*BootTrace); ok && t.LoggedIn != nil {
		t.LoggedIn()
	}
}
