package run

import (
	"context"
	"errors"
	"flag"
	"testing"

	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/platform"
)

func defaults() *config.Config { return config.Register(flag.NewFlagSet("t", flag.ContinueOnError)) }

// The configuration is there before the platform is built, and a build
// error is remembered, not retried.
func TestBuildsOnce(t *testing.T) {
	builds := 0
	r, err := New(defaults(), nil, func(context.Context) (platform.Platform, error) { builds++; return nil, errors.New("no fabric here") })
	if err != nil {
		t.Fatal(err)
	}
	if r.Config().Tier != "lab" {
		t.Fatal("no configuration before the platform")
	}
	for range 2 {
		if _, err := r.Platform(context.Background()); err == nil {
			t.Fatal("Platform hid the build error")
		}
	}
	if _, ok := r.Built(); ok || builds != 1 {
		t.Fatalf("built %d times, built=%v", builds, ok)
	}
	if err := r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Tenants never share a namespace or an address.
func TestTenantsApart(t *testing.T) {
	r, err := New(defaults(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := r.Tenant("a")
	b, _ := r.Tenant("b")
	if _, err := r.Tenant("a"); err == nil {
		t.Error("a second tenant a")
	}
	a0, _ := a.Address(0)
	b0, _ := b.Address(0)
	if a.Namespace == b.Namespace || a0 == b0 || a0.String() != "203.0.113.10/24" {
		t.Errorf("a %s %s, b %s %s", a.Namespace, a0, b.Namespace, b0)
	}
}
