package platform

import (
	"context"
	"slices"
	"testing"
)

// A trace added under one a caller set already tells both, the inner
// first, as httptrace composes ClientTraces; a ctx without one is told
// nothing, and nothing breaks.
func TestABootTraceUnderAnotherTellsBoth(t *testing.T) {
	var told []string
	note := func(s string) func() { return func() { told = append(told, s) } }
	outer := WithBootTrace(context.Background(), &BootTrace{Attached: note("outer attached")})
	ctx := WithBootTrace(outer, &BootTrace{Attached: note("inner attached"), LoggedIn: note("inner logged in")})
	Attached(ctx)
	LoggedIn(ctx)
	Attached(context.Background())
	LoggedIn(context.Background())
	want := []string{"inner attached", "outer attached", "inner logged in"}
	if !slices.Equal(told, want) {
		t.Fatalf("told %q, want %q", told, want)
	}
}
