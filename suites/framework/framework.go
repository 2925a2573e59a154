// Package framework gives each spec container its own framework value, as
// the Kubernetes e2e framework's NewDefaultFramework does: the run's
// platform, the current spec's claim and its artifact directory, and a
// tenant of its own (a namespace in a cluster, a name prefix in the lab)
// whose guests take their addresses from framework/addresses.
package framework

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/run"
	"github.com/cozystack/vlan-conformance/framework/subject"
)

// Framework is a spec container's view of the run.
type Framework struct {
	run    *run.Run
	tenant run.Tenant
	guests int // addresses handed out so far
}

// New is called in a container's body, while the spec tree is built: the
// tenant, and so its addresses, are fixed then.
func New(r *run.Run, tenant string) *Framework {
	t, err := r.Tenant(tenant)
	if err != nil {
		panic(err) // two containers named one tenant: a bug in the suite
	}
	return &Framework{run: r, tenant: t}
}

// Config is the run's configuration.
func (f *Framework) Config() *config.Config { return f.run.Config() }

// Subject is the release under test (run.Run.Subject): the guide's NAD
// and userData the specs apply, nil-safe.
func (f *Framework) Subject() *subject.Subject { return f.run.Subject() }

// Platform is the run's platform, built on first use.
func (f *Framework) Platform(ctx context.Context) (platform.Platform, error) {
	return f.run.Platform(ctx)
}

// Namespace is the tenant's namespace.
func (f *Framework) Namespace() string { return f.tenant.Namespace }

// Claim is the current spec's claim, the ID its text begins with in brackets.
func (f *Framework) Claim() string { return evidence.ClaimOf(CurrentSpecReport().LeafNodeText) }

// Artifact is the path of a named piece of evidence in the current spec's
// claim directory.
func (f *Framework) Artifact(name string) string {
	return f.run.Artifacts().Path(f.Claim(), name)
}

// Note records an observation the current spec judged, in its claim's
// evidence.txt.
func (f *Framework) Note(format string, args ...any) {
	f.run.Artifacts().Note(f.Claim(), format, args...)
}

// ApplyNAD creates the fixture NAD under name in the tenant's namespace;
// under a release the guide's step 2 NAD stands for the bridge fixture
// (subject.Subject.NADConfig).
func (f *Framework) ApplyNAD(ctx context.Context, name, fixture string) error {
	p, err := f.Platform(ctx)
	if err != nil {
		return err
	}
	return p.ApplyNAD(ctx, f.Namespace(), platform.NAD{Name: name, Config: f.Subject().NADConfig(fixture)})
}

// ApplyNADSetting creates the fixture NAD under name with one key of its
// config set to value: a user's NAD that departs from the guide in that
// key alone (VLAN-14: another bridge).
func (f *Framework) ApplyNADSetting(ctx context.Context, name, fixture, key string, value any) error {
	p, err := f.Platform(ctx)
	if err != nil {
		return err
	}
	m := map[string]any{}
	if err := json.Unmarshal([]byte(f.Subject().NADConfig(fixture)), &m); err != nil {
		return fmt.Errorf("NAD fixture %s: %w", fixture, err)
	}
	m[key] = value
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return p.ApplyNAD(ctx, f.Namespace(), platform.NAD{Name: name, Config: string(b)})
}

// CloudInit is the guide's userData at addr: the guide's (--guide's, or
// the one the release ships) under a release, the suite's reference copy
// otherwise (no release, or a release with no guide: its ledger says so).
func (f *Framework) CloudInit(addr netip.Prefix) string {
	return f.Subject().UserData(addr.String())
}

// VM is a VM a spec started: Guest is its current incarnation, Addr the
// address its cloud-init gives it.
type VM struct {
	platform.Guest
	Addr netip.Prefix
	p    platform.Platform
	name string
	// handedOn: work that outlives the spec or container that started the
	// VM has it now (HandOn), and deletes it when it ends.
	handedOn bool
}

// deleteAtTheEnd deletes whatever incarnation of v is current when the
// spec (or container, from a BeforeAll) ends, unless it was handed on by
// then. Registered on the spec's goroutine, as Ginkgo needs.
func deleteAtTheEnd(v *VM) {
	DeferCleanup(func(ctx SpecContext) {
		if !v.handedOn && v.Guest != nil {
			Expect(v.p.DeleteVM(ctx, v.Guest)).To(Succeed(), "deleting %s", v.Guest.Name())
		}
	})
}

// Name is the VM's name, also once a failed re-creation left no guest
// (Guest nil): the spec names what failed rather than panic.
func (v *VM) Name() string { return v.name }

// NextAddress is the tenant's next guest address.
func (f *Framework) NextAddress() (netip.Prefix, error) {
	a, err := f.tenant.Address(f.guests)
	f.guests++
	return a, err
}

// StartVM starts a VM of spec in the tenant's namespace, with the guide's
// cloud-init at the tenant's next address, and deletes whatever
// incarnation is current when the spec (or container) ends.
func (f *Framework) StartVM(ctx context.Context, spec platform.VMSpec) (*VM, error) {
	vms, err := f.StartVMs(ctx, spec)
	if err != nil {
		return nil, err
	}
	return vms[0], nil
}

// StartVMs starts the VMs of specs as StartVM does, their addresses the
// tenant's next ones in the order given. On a platform whose guests are
// slow to start (platform.SideBySide) they start as many at a time as it
// says, so the caller waits for the slowest of each group, not for the sum
// of all; elsewhere one after another, in order. Every VM that
// started is deleted when the spec (or container) ends, also when another
// failed; the error names each that did not start, and its VM is nil.
func (f *Framework) StartVMs(ctx context.Context, specs ...platform.VMSpec) ([]*VM, error) {
	p, err := f.Platform(ctx)
	if err != nil {
		return nil, err
	}
	vms, err := f.address(p, specs)
	if err != nil {
		return nil, err
	}
	err = boot(ctx, p, specs, vms, bootSlots(p).size, holdSlot)
	// Cleanups are registered here, on the spec's goroutine, as Ginkgo needs;
	// a VM re-created since is deleted as it is then.
	for i, v := range vms {
		if v.Guest == nil {
			vms[i] = nil
			continue
		}
		deleteAtTheEnd(v)
	}
	return vms, err
}

// address gives each spec the tenant's next address, in order, and the
// VM that will hold it.
func (f *Framework) address(p platform.Platform, specs []platform.VMSpec) ([]*VM, error) {
	vms := make([]*VM, len(specs))
	for i := range specs {
		addr, err := f.NextAddress()
		if err != nil {
			return nil, err
		}
		specs[i].Namespace, specs[i].CloudInit = f.Namespace(), f.CloudInit(addr)
		vms[i] = &VM{Addr: addr, p: p, name: specs[i].Name}
	}
	return vms, nil
}

// boot starts each spec's guest into its VM, at most at of them at a
// time, each in a slot hold gives; a VM whose guest did not start keeps a
// nil Guest, and the error names it.
func boot(ctx context.Context, p platform.Platform, specs []platform.VMSpec, vms []*VM, at int, hold func(context.Context, platform.Platform) (context.Context, func(), error)) error {
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	mine := make(chan struct{}, max(at, 1))
	for i := range specs {
		mine <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-mine; wg.Done() }()
			ctx, release, err := hold(ctx, p)
			if err != nil {
				errs[i] = fmt.Errorf("starting %s: %w", specs[i].Name, err)
				return
			}
			defer release()
			g, err := p.StartVM(ctx, specs[i])
			if err != nil {
				errs[i] = fmt.Errorf("starting %s: %w", specs[i].Name, err)
				return
			}
			vms[i].Guest = g
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// steady is held, shared, by every boot in the background until its guest
// is attached, and alone by a container that disturbs what a VM's start
// needs (Disrupts): background boots run beside whatever container comes
// first, and a VM whose pod is set up while Multus rolls out gets no
// network ("pod link is missing"). A spec that disturbs some nodes only
// (DisruptsNodes) holds their locks alone and the background boots onto
// the others on.
var steady = struct {
	all   sync.RWMutex
	mu    sync.Mutex
	nodes map[string]*sync.RWMutex // by node name; "" for a VM placed anywhere
}{nodes: map[string]*sync.RWMutex{}}

// Disrupts is called first in a container (its BeforeAll) or a spec that
// disturbs what a VM's start needs on every node: it rolls Multus out. It
// waits until the background's boots under way have their guests attached
// and holds new ones back until the container (or spec) ends.
func Disrupts() {
	steady.all.Lock()
	DeferCleanup(steady.all.Unlock)
}

// DisruptsNodes is Disrupts for a spec that disturbs these nodes only: it
// takes a plugin off one or re-cables one. Boots ahead onto other nodes go
// on (measured: a re-cabling of the macvlan node held every boot back for
// a minute and a half).
func DisruptsNodes(nodes ...platform.Node) {
	for _, l := range nodeLocks(nodes, true) {
		l.Lock()
		DeferCleanup(l.Unlock)
	}
}

// nodeLocks are the locks of the nodes a VM may start on, in one order
// (by name), so that holders never wait for one another in a cycle; with
// anywhere, the lock of a VM placed on no node too, which every node's
// disruption must hold.
func nodeLocks(nodes []platform.Node, anywhere bool) []*sync.RWMutex {
	names := []string{}
	for _, n := range nodes {
		if n != nil {
			names = append(names, n.Name())
		}
	}
	if anywhere || len(names) == 0 {
		names = append(names, "")
	}
	slices.Sort(names)
	names = slices.Compact(names)
	steady.mu.Lock()
	defer steady.mu.Unlock()
	locks := make([]*sync.RWMutex, len(names))
	for i, n := range names {
		if steady.nodes[n] == nil {
			steady.nodes[n] = &sync.RWMutex{}
		}
		locks[i] = steady.nodes[n]
	}
	return locks
}

// Delete deletes the VM before the spec ends (VLAN-13's consumer): the
// spec's cleanup then has nothing left to delete.
func (v *VM) Delete(ctx context.Context) error {
	if v.Guest == nil {
		return nil
	}
	err := v.p.DeleteVM(ctx, v.Guest)
	v.Guest = nil
	return err
}

// Unwrap is the platform's own guest (platform.Own).
func (v *VM) Unwrap() platform.Guest { return v.Guest }

// Restart restarts the VM the way how names, its VirtualMachine object
// kept (platform.KubeVMs), in a boot slot as a re-creation is. A failed
// restart leaves the VM the spec's to delete, as it was.
func (v *VM) Restart(ctx context.Context, how platform.Restart) error {
	name := v.Name()
	k, ok := platform.As[platform.KubeVMs](v.p)
	if !ok {
		return fmt.Errorf("restarting %s: %w (%s has no VirtualMachine objects)", name, evidence.ErrNotObservable, v.p.Name())
	}
	ctx, release, err := holdSlot(ctx, v.p)
	if err != nil {
		return fmt.Errorf("restarting %s: %w", name, err)
	}
	defer release()
	g, err := k.RestartVM(ctx, v.Guest, how)
	if err != nil {
		return fmt.Errorf("restarting %s (%s): %w", name, how, err)
	}
	v.Guest = g
	return nil
}

// Drain evicts the VM's launcher pod as a node drain does
// (platform.KubeVMs) and returns what KubeVirt made of it; after a
// migration the VM is the guest on its new node. An eviction that went
// through leaves the VM the spec's to delete.
func (v *VM) Drain(ctx context.Context) (platform.Drain, error) {
	k, ok := platform.As[platform.KubeVMs](v.p)
	if !ok {
		return platform.Drain{}, fmt.Errorf("draining %s: %w (%s has no VirtualMachine objects)", v.Name(), evidence.ErrNotObservable, v.p.Name())
	}
	g, d, err := k.DrainVM(ctx, v.Guest)
	if err != nil {
		return d, fmt.Errorf("draining %s: %w", v.Name(), err)
	}
	if g != nil {
		v.Guest = g
	}
	return d, nil
}

// Recreate deletes the VM and creates it again from the same spec, as a
// user deleting and re-applying the VM object does.
func (v *VM) Recreate(ctx context.Context) error {
	name := v.Name()
	ctx, release, err := holdSlot(ctx, v.p)
	if err != nil {
		return fmt.Errorf("re-creating %s: %w", name, err)
	}
	defer release()
	g, err := platform.RecreateVM(ctx, v.p, v.Guest)
	if err != nil {
		v.Guest = nil // nothing left to delete, or nothing the spec can name
		return fmt.Errorf("re-creating %s: %w", name, err)
	}
	v.Guest = g
	return nil
}
