package platform

import "context"

// BootTrace is told how far a StartVM under way has got, as httptrace's
// ClientTrace is told of a request's progress: a caller that holds
// something only a guest's attachment needs (a cluster's Multus steady, a
// node's plugins in place) lets it go once the attachment exists, not after
// the guest's whole boot.
type BootTrace struct {
	// Attached is called once the guest's networks are attached (a
	// cluster: its VMI Ready, the launcher pod's CNI ADD done), before the
	// guest itself has booted.
	Attached func()
}

type bootTraceKey struct{}

// WithBootTrace is ctx carrying t for the StartVM calls made with it.
func WithBootTrace(ctx context.Context, t *BootTrace) context.Context {
	return context.WithValue(ctx, bootTraceKey{}, t)
}

// Attached tells ctx's BootTrace, if any, that the guest's networks are
// attached. A platform that never calls it leaves the caller holding on
// until StartVM returns.
func Attached(ctx context.Context) {
	if t, ok := ctx.Value(bootTraceKey{}).(*BootTrace); ok && t.Attached != nil {
		t.Attached()
	}
}
