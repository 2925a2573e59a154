package lab

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cozystack/vlan-conformance/framework/cozystack"
	"github.com/cozystack/vlan-conformance/framework/evidence"
	release "github.com/cozystack/vlan-conformance/framework/subject"

	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/stager"
)

// The lab's replica of the Multus DaemonSet: its install-cni-plugins init
// container (--stager-manifest's) run by framework/stager without a
// container runtime, on each node's own /opt/cni/bin, over the image the
// harness reads (the suite's reference build, --stager-image or the
// release's pinned one).
//
// A cluster stages every node when Multus is installed. When the lab is
// built it cannot know whether the run will select a spec that looks at
// staging, and most lab runs select none: so a node is staged by the first
// Stager call that names it, and a run that makes none builds no harness
// and stages nothing. Until then, and on a node never named, /opt/cni/bin
// holds newNode's links to --plugin-dir.

var _ platform.Stager = (*Lab)(nil)

// multus is the DaemonSet replica's state.
type multus struct {
	mu      sync.Mutex
	harness *stager.Harness // built by the first Stager call
	off     bool            // rendered with stageCniPlugins: false
	// render is the pod template's init containers as the release's chart
	// renders them with staging on or off (renderedInits; a test's own
	// chart where no release is opened).
	render func(on bool) ([]string, error)
	pods   map[string]*multusPod
}

// multusPod stands for a node's Multus pod: the node's directory as the
// stager's runs see it, and the last run (nil when its pod was created
// with staging off, so without the init container).
type multusPod struct {
	name string // "lab/<node>", as StagerRun reports it
	node *stager.FakeNode
	run  *stager.Result
	// due: the pod was created and its stager has not run yet; it runs
	// when the node is next looked at. Nothing reads the node's directory
	// but through this replica, so the run comes before anything that
	// could see the difference, and a roll costs nothing for the nodes no
	// spec looks at again (under TCG a run takes seconds).
	due bool
}

// loadHarness builds the harness on first use.
func (l *Lab) loadHarness() (*stager.Harness, error) {
	m := &l.multus
	if m.harness == nil {
		h, err := stager.NewHarness(l.release.StagerOptions(l.cfg))
		if err != nil {
			return nil, fmt.Errorf("the lab's Multus DaemonSet: %w", err)
		}
		m.harness = h
	}
	return m.harness, nil
}

// pod is pn's Multus pod. A pod whose stager is due (its node never
// named before, or its pod re-created by SetStaging) runs it now, unless
// run is false (Restage runs it itself). The caller holds l.multus.mu.
func (l *Lab) pod(ctx context.Context, pn platform.Node, run bool) (*node, *multusPod, error) {
	n, ok := pn.(*node)
	if !ok {
		return nil, nil, fmt.Errorf("%s: not a lab node (%T)", pn.Name(), pn)
	}
	m := &l.multus
	p, ok := m.pods[n.Name()]
	if !ok {
		h, err := l.loadHarness()
		if err != nil {
			return n, nil, err
		}
		fake, err := h.Attach(n.Name(), n.binDir)
		if err != nil {
			return n, nil, err
		}
		p = &multusPod{name: "lab/" + n.Name(), node: fake, due: true}
		if m.pods == nil {
			m.pods = map[string]*multusPod{}
		}
		m.pods[n.Name()] = p
	}
	if !run || !p.due || m.off {
		return n, p, nil
	}
	return n, p, m.stage(ctx, p)
}

// stage runs the stager on the pod's node, as a new Multus pod's init
// container would. An exit other than 0 is an error, as the cluster's wait
// for the pod's Ready ends at one.
func (m *multus) stage(ctx context.Context, p *multusPod) error {
	p.due = false
	res, err := m.harness.Stage(ctx, p.node)
	if err != nil {
		return fmt.Errorf("running %s for %s: %w\n%s", stager.InitContainerName, p.name, err, res.Log)
	}
	p.run = &res
	if res.ExitCode != 0 {
		return fmt.Errorf("pod %s: init container %s exited %d: %q", p.name, stager.InitContainerName, res.ExitCode, res.TerminationMessage)
	}
	return nil
}

// SetStaging renders the release's Multus chart with stageCniPlugins on
// or off and rolls the replica out as rendered: every node's pod is
// re-created, and where the rendered template still has the stager it is
// due again on each node (multusPod.due).
// The release's own template decides, as on a cluster; the suite's
// reference subject (no --cozystack) has no chart to ask.
func (l *Lab) SetStaging(ctx context.Context, on bool) ([]string, error) {
	m := &l.multus
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := l.loadHarness(); err != nil {
		return nil, err
	}
	render := m.render
	if render == nil {
		render = func(on bool) ([]string, error) { return renderedInits(l.release, on) }
	}
	inits, err := render(on)
	if err != nil {
		return nil, err
	}
	m.off = !slices.Contains(inits, stager.InitContainerName)
	for _, p := range m.pods {
		p.run, p.due = nil, true
	}
	return inits, nil
}

// renderedInits are the init containers of the Multus DaemonSet's pod
// template as the release's chart renders it with stageCniPlugins on.
func renderedInits(subj *release.Subject, on bool) ([]string, error) {
	if subj == nil {
		return nil, fmt.Errorf("rendering Multus with stageCniPlugins %v: the suite's reference subject (no --cozystack) has no chart: %w", on, evidence.ErrNotObservable)
	}
	_, mu, err := subj.Release.StagingOn(release.DefaultVariant, cozystack.StagingValue(on), subj.Ledger)
	if err != nil {
		return nil, fmt.Errorf("rendering Multus with stageCniPlugins %v: %w", on, err)
	}
	cs, _, err := unstructured.NestedSlice(mu.DaemonSet.Object, "spec", "template", "spec", "initContainers")
	if err != nil {
		return nil, fmt.Errorf("the rendered Multus DaemonSet: %w", err)
	}
	names := []string{}
	for _, c := range cs {
		if m, ok := c.(map[string]any); ok {
			n, _ := m["name"].(string)
			names = append(names, n)
		}
	}
	return names, nil
}

// onNode runs fn with pn's pod (its stager run if due), holding the
// replica's lock: what every read and placement on a node shares.
func onNode[T any](ctx context.Context, l *Lab, pn platform.Node, fn func(n *node, p *multusPod) (T, error)) (T, error) {
	l.multus.mu.Lock()
	defer l.multus.mu.Unlock()
	n, p, err := l.pod(ctx, pn, true)
	if err != nil {
		var zero T
		return zero, err
	}
	return fn(n, p)
}

func (l *Lab) CNIBin(ctx context.Context, pn platform.Node) (map[string]stager.File, error) {
	return onNode(ctx, l, pn, func(n *node, _ *multusPod) (map[string]stager.File, error) { return stager.Listing(n.binDir) })
}

// Payload is the image's /cni-plugins as the node's runs see it.
func (l *Lab) Payload(ctx context.Context, pn platform.Node) (map[string]stager.File, error) {
	return onNode(ctx, l, pn, func(_ *node, p *multusPod) (map[string]stager.File, error) { return p.node.Payload() })
}

func (l *Lab) PlaceCNIFile(ctx context.Context, pn platform.Node, name string, content []byte) (func() error, error) {
	return onNode(ctx, l, pn, func(n *node, _ *multusPod) (func() error, error) {
		return stager.PlaceFile(n.binDir, name, content, 0o755)
	})
}

func (l *Lab) PlaceCNIDir(ctx context.Context, pn platform.Node, name string) (func() error, error) {
	return onNode(ctx, l, pn, func(n *node, _ *multusPod) (func() error, error) { return stager.PlaceDir(n.binDir, name) })
}

// Restage re-creates the node's pod: the stager runs again, unless staging
// is off (the pod then has no such init container).
func (l *Lab) Restage(ctx context.Context, pn platform.Node) error {
	m := &l.multus
	m.mu.Lock()
	defer m.mu.Unlock()
	_, p, err := l.pod(ctx, pn, false)
	if err != nil {
		return err
	}
	p.run = nil
	if m.off {
		return nil
	}
	return m.stage(ctx, p)
}

// StagerRun is the node's last run as kubectl would show its pod: Ready
// when the init container exited 0 (the replica's daemon has nothing
// else to wait for).
func (l *Lab) StagerRun(ctx context.Context, pn platform.Node) (platform.StagerRun, error) {
	return onNode(ctx, l, pn, func(_ *node, p *multusPod) (platform.StagerRun, error) {
		if p.run == nil {
			why := "its last run could not be made"
			if l.multus.off {
				why = "staging is off"
			}
			return platform.StagerRun{Pod: p.name}, fmt.Errorf("pod %s reports no run of init container %s (%s)", p.name, stager.InitContainerName, why)
		}
		return platform.StagerRun{
			Pod:        p.name,
			Ready:      p.run.ExitCode == 0,
			Terminated: true,
			ExitCode:   int32(p.run.ExitCode),
			Message:    p.run.TerminationMessage,
			Log:        p.run.LogLines(),
		}, nil
	})
}

// closeMultus removes the harness's scratch directories; the nodes'
// directories are the lab's work dir's.
func (l *Lab) closeMultus() error {
	m := &l.multus
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.harness == nil {
		return nil
	}
	err := m.harness.Close()
	m.harness, m.pods = nil, nil
	return err
}
