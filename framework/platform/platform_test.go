package platform

import (
	"context"
	"errors"
	"testing"

	"github.com/cozystack/vlan-conformance/framework/config"
)

// Before Configure there is no run: every entry point says so with an
// error, none panics (the typed-nil facade this replaces did).
func TestUnconfiguredRunIsAnError(t *testing.T) {
	current = nil
	if _, err := RunConfig(); !errors.Is(err, ErrNotConfigured) {
		t.Fatalf("RunConfig: %v", err)
	}
	if _, err := Ready(context.Background()); !errors.Is(err, ErrNotConfigured) {
		t.Fatalf("Ready: %v", err)
	}
	if _, ok := Built(); ok {
		t.Fatal("Built without a run")
	}
	if err := Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// The configuration is there before the platform is built, and a build
// error is remembered, not retried.
func TestConfiguredRunBuildsOnce(t *testing.T) {
	cfg := &config.Config{Tier: "lab"}
	builds := 0
	Configure(cfg, func(context.Context) (Platform, error) { builds++; return nil, errors.New("no fabric here") })
	t.Cleanup(func() { current = nil })
	if got, err := RunConfig(); err != nil || got != cfg {
		t.Fatalf("RunConfig: %v %v", got, err)
	}
	for range 2 {
		if _, err := Ready(context.Background()); err == nil {
			t.Fatal("Ready hid the build error")
		}
	}
	if builds != 1 {
		t.Fatalf("built %d times", builds)
	}
	if _, ok := Built(); ok {
		t.Fatal("a failed build counts as built")
	}
}
