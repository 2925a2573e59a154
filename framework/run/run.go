// Package run is what one run of the suite shares, as a value the suite's
// main makes and hands to every spec container (no package-level state):
// the configuration, the release under test, the platform (built once, on
// first use), the evidence tree, and the tenants with their addresses.
package run

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/cozystack/vlan-conformance/framework/addresses"
	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/subject"
)

// Run is one run of the suite. Its platform is built on first use, so
// specs that need no network (the stager's) run even where the fabric
// cannot be built.
type Run struct {
	cfg      *config.Config
	subject  *subject.Subject
	build    func(context.Context) (platform.Platform, error)
	platform platform.Platform
	err      error
	plan     addresses.Plan
	tenants  map[string]bool
}

// New is a run of cfg against the release under test (s, nil without
// --cozystack) whose platform build makes on first use.
func New(cfg *config.Config, s *subject.Subject, build func(context.Context) (platform.Platform, error)) (*Run, error) {
	plan, err := addresses.ForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Run{cfg: cfg, subject: s, build: build, plan: plan, tenants: map[string]bool{}}, nil
}

// Config is the run's configuration, there before (and without) a platform.
func (r *Run) Config() *config.Config { return r.cfg }

// Subject is the release under test, rendered; nil without --cozystack
// (its accessors then answer for the suite's own reference subject).
func (r *Run) Subject() *subject.Subject { return r.subject }

// Artifacts is the run's evidence tree under --report-dir.
func (r *Run) Artifacts() evidence.Artifacts { return evidence.Artifacts{ReportDir: r.cfg.ReportDir} }

// Platform builds the platform once (fabric, nodes, gateway) and returns
// it; a failed build is remembered, not retried.
func (r *Run) Platform(ctx context.Context) (platform.Platform, error) {
	if r.platform == nil && r.err == nil {
		r.platform, r.err = r.build(ctx)
	}
	return r.platform, r.err
}

// Built returns the platform if it has been built.
func (r *Run) Built() (platform.Platform, bool) { return r.platform, r.platform != nil }

// Provision builds the platform now when its tier provisions shared
// infrastructure that must exist before any spec (a cluster); the lab
// stays lazy.
func (r *Run) Provision(ctx context.Context) error {
	if r.cfg.Tier != "cluster" {
		return nil
	}
	_, err := r.Platform(ctx)
	return err
}

// Shutdown removes what the platform created, if it was built.
func (r *Run) Shutdown(ctx context.Context) error {
	p, ok := r.Built()
	if !ok {
		return nil
	}
	r.platform = nil
	return p.Close(ctx)
}

// Tenant is a spec container's own corner of the platform: a namespace in
// a cluster (a name prefix in the lab) and a block of guest addresses.
type Tenant struct {
	Namespace string
	block     int
	pool      *addresses.Pool
}

// Tenant makes the tenant called name. Tenants are made while the spec tree
// is built, in the order the suite declares its containers, whatever order
// the specs then run in: so a tenant's address block is the same in every
// run of the same flags.
func (r *Run) Tenant(name string) (Tenant, error) {
	ns := "tenant-" + name
	if r.tenants[ns] {
		return Tenant{}, fmt.Errorf("tenant %q made twice", name)
	}
	r.tenants[ns] = true
	return Tenant{Namespace: ns, block: len(r.tenants) - 1, pool: r.plan.VLAN}, nil
}

// Address is the tenant's n-th guest address on the VLAN (framework/addresses).
func (t Tenant) Address(n int) (netip.Prefix, error) { return t.pool.Guest(t.block, n) }
