package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/failures"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/run"
	"github.com/cozystack/vlan-conformance/suites/framework"
	"github.com/cozystack/vlan-conformance/suites/labels"
	"github.com/cozystack/vlan-conformance/suites/skip"
)

// rollWindow is how long the probe node must stay without a Ready Multus
// pod after the probes are created for a roll to judge them: the kubelet
// gets a pod bound to its node and calls CNI well within it. A daemon back
// sooner leaves a pod that waited indistinguishable from one that never
// asked, so the roll is repeated, up to rollAttempts times.
const (
	rollWindow   = 2 * time.Second
	rollAttempts = 3
)

// rollSpecs is STG-12: flipping stageCniPlugins edits the Multus
// DaemonSet's pod template, and the suite follows the roll that follows.
//
//	kind nodes, each running a Multus pod (thick: the daemon; the shim on the node)
//	node 1   old ─marked─gone─▶ new Ready
//	node 2                        old ─marked─gone─▶ new Ready   (one at a time)
//	                                          │
//	                     the probes, pinned to node 2 the moment its old pod is gone:
//	                       probe-hostnet  hostNetwork: no CNI call
//	                       probe-nad      NAD vlan100: the shim, then bridge onto br100
//
// Not labelled stager: that label selects specs that need no platform.
func rollSpecs(r *run.Run) {
	Describe("Flipping stageCniPlugins on a running cluster", labels.Cluster, Ordered, func() {
		f := framework.New(r, "roll")
		BeforeAll(framework.Disrupts) // it rolls Multus on every node, two to four times

		// "Changing this value edits the Multus DaemonSet's pod template, so Multus rolls node by node. While a node's multus-daemon is down its CNI shim has no daemon behind it, and pod creation and deletion on that node fail for the length of the restart." ... "host-network pods bypass CNI and still start."
		It("[STG-12] rolls Multus one node at a time; on a node whose daemon is down a pod on the NAD fails sandbox creation until the daemon is back, and a hostNetwork pod starts", labels.Claim("STG-12"), func(ctx SpecContext) {
			p, err := f.Platform(ctx)
			Expect(err).NotTo(HaveOccurred(), "building the platform")
			mr, rolls := platform.As[platform.MultusRoll](p)
			s, stages := platform.As[platform.CNIStaging](p)
			if !rolls || !stages {
				Skip(p.Name() + " has no Multus DaemonSet the suite rolls: STG-12 needs a cluster whose Multus the suite installs")
			}
			node := p.BridgeNodes()[0]
			const nad = "vlan100"
			Expect(f.ApplyNAD(ctx, nad, "vlan100-bridge")).To(Succeed())

			// Staging as the run configured it. The run's other specs expect
			// it so: put back last, after the probes are gone (cleanups run
			// in reverse).
			on := true
			DeferCleanup(func(ctx SpecContext) {
				if on {
					return
				}
				_, err := s.SetStaging(ctx, true)
				if !errors.Is(err, evidence.ErrNotObservable) {
					Expect(err).NotTo(HaveOccurred(), "turning staging back on")
				}
			})

			var roll platform.Roll
			var seen []platform.Roll
			for attempt := 1; attempt <= rollAttempts; attempt++ {
				on = !on
				By(fmt.Sprintf("roll %d: stageCniPlugins %v; the probes created on %s the moment its old Multus pod is gone", attempt, on, node.Name()))
				var deleteProbes func(context.Context) error
				roll, deleteProbes, err = mr.RollStaging(ctx, on, node, f.Namespace(), nad)
				if deleteProbes != nil {
					DeferCleanup(deleteProbes)
				}
				seen = append(seen, roll)
				Expect(writeRolls(f.Artifact("roll.md"), seen)).To(Succeed())
				f.Note("%s", rollSummary(attempt, on, roll))
				skip.IfNotObservable(err)
				// Judged first: a roll that took every node at once is wrong
				// however the rest of it went.
				Expect(roll.MostDown).To(BeNumerically("<=", 1), "flipping stageCniPlugins: "+failures.OneNodeAtATime+", yet %d nodes were without a Ready Multus pod at once (updateStrategy %s)", roll.MostDown, roll.Strategy)
				Expect(err).NotTo(HaveOccurred(), "rolling Multus with stageCniPlugins %v", on)
				if roll.Window >= rollWindow {
					break
				}
			}
			Expect(roll.Window).To(BeNumerically(">=", rollWindow), "in %d rolls %s's Multus daemon never stayed down %s after the probes were created: too short to tell a pod that failed from one that never asked", rollAttempts, node.Name(), rollWindow)

			By("every node rolled, one after the other")
			Expect(roll.Nodes).NotTo(BeEmpty(), "the roll must replace the Multus pods")
			for i, n := range roll.Nodes {
				Expect(n.NewPod).NotTo(BeEmpty(), "%s must get a new Multus pod", n.Node)
				if i > 0 {
					prev := roll.Nodes[i-1]
					Expect(n.Down).To(BeTemporally(">=", prev.Up), "%s's old Multus pod must go only once %s's new one is Ready", n.Node, prev.Node)
				}
			}

			var hostNet, onNAD *platform.RollProbe
			for i := range roll.Probes {
				if roll.Probes[i].HostNetwork {
					hostNet = &roll.Probes[i]
				} else {
					onNAD = &roll.Probes[i]
				}
			}
			Expect(hostNet).NotTo(BeNil(), "a hostNetwork probe must have been created on %s", node.Name())
			Expect(onNAD).NotTo(BeNil(), "a probe on %s must have been created on %s", nad, node.Name())

			By("the pod on the NAD fails sandbox creation while the daemon is down, and runs once it is back")
			want := f.Namespace() + "/" + nad
			Expect(onNAD.SandboxFailures).NotTo(BeEmpty(), "%s, created on %s with its Multus daemon gone, must fail sandbox creation (FailedCreatePodSandBox); instead it %s", onNAD.Pod, node.Name(), ranHow(*onNAD, want))
			Expect(onNAD.SandboxFailures[0]).To(ContainSubstring("multus-shim"), "the failure must be Multus's shim's, with no daemon behind it")
			Expect(onNAD.Running).NotTo(BeZero(), "%s must run once %s's Multus daemon is back", onNAD.Pod, node.Name())
			Expect(onNAD.RunningBeforeDaemon).To(BeFalse(), "%s must not run before %s's new Multus pod is Ready", onNAD.Pod, node.Name())
			Expect(onNAD.Attached).To(ContainElement(want), "%s must run with its NAD attached (Multus's network-status naming %s)", onNAD.Pod, want)

			By("the hostNetwork pod starts while the daemon is down")
			Expect(hostNet.SandboxFailures).To(BeEmpty(), "%s bypasses CNI: no sandbox to fail", hostNet.Pod)
			Expect(hostNet.Running).NotTo(BeZero(), "%s must run", hostNet.Pod)
			Expect(hostNet.RunningBeforeDaemon).To(BeTrue(), "%s must start while %s's Multus daemon is down (it stayed down %s after the probes were created)", hostNet.Pod, node.Name(), roll.Window.Round(time.Millisecond))
		})
	})
}

// ranHow tells what became of a probe that did not fail, for the message:
// whether it ran, before or after the daemon, and whether Multus attached
// the NAD it asked for.
func ranHow(pr platform.RollProbe, nad string) string {
	if pr.Running.IsZero() {
		return "never ran within the wait, with no sandbox failure either"
	}
	when := "after its node's daemon was back (its CNI call waited)"
	if pr.RunningBeforeDaemon {
		when = "before its node's daemon was back"
	}
	switch {
	case len(pr.Attached) == 0:
		return "ran " + when + " with no network-status: Multus did not attach it"
	case !slices.Contains(pr.Attached, nad):
		return fmt.Sprintf("ran %s without %s (network-status names %v)", when, nad, pr.Attached)
	}
	return fmt.Sprintf("ran %s with %s attached", when, nad)
}

// rollSummary is one roll in a line, for evidence.txt.
func rollSummary(attempt int, on bool, r platform.Roll) string {
	var probes []string
	for _, pr := range r.Probes {
		probes = append(probes, fmt.Sprintf("%s running %v (before the daemon %v), attached %v, FailedCreatePodSandBox %d", pr.Pod, !pr.Running.IsZero(), pr.RunningBeforeDaemon, pr.Attached, len(pr.SandboxFailures)))
	}
	return fmt.Sprintf("roll %d (stageCniPlugins %v): updateStrategy %s; %d nodes, at most %d down at once; %s down %s after the probes; probes: %s",
		attempt, on, r.Strategy, len(r.Nodes), r.MostDown, r.ProbeNode, r.Window.Round(time.Millisecond), strings.Join(probes, "; "))
}

// writeRolls writes every roll of the spec as a timeline, in ms from its
// first old pod's deletion mark.
func writeRolls(path string, rolls []platform.Roll) error {
	var b strings.Builder
	b.WriteString("# STG-12: Multus rolls\n\nTimes are when the suite received each event of one watch of every pod (the API server's order), in ms from the roll's first deletion mark.\n")
	for i, r := range rolls {
		var origin time.Time
		if len(r.Nodes) > 0 {
			origin = r.Nodes[0].Down
		}
		at := func(t time.Time) string {
			if t.IsZero() || origin.IsZero() {
				return "never"
			}
			return fmt.Sprintf("%+d", t.Sub(origin).Milliseconds())
		}
		fmt.Fprintf(&b, "\n## Roll %d\n\nupdateStrategy %s; at most %d nodes without a Ready Multus pod at once; the probe node %s stayed down %s after the probes were created.\n\n",
			i+1, r.Strategy, r.MostDown, r.ProbeNode, r.Window.Round(time.Millisecond))
		b.WriteString("| node | old pod | marked | gone | new pod | Ready |\n|---|---|---:|---:|---|---:|\n")
		for _, n := range r.Nodes {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", n.Node, n.OldPod, at(n.Down), at(n.Gone), n.NewPod, at(n.Up))
		}
		b.WriteString("\n| probe | hostNetwork | created | Running | before the daemon | network-status | FailedCreatePodSandBox |\n|---|---|---:|---:|---|---|---|\n")
		for _, pr := range r.Probes {
			fails := strings.ReplaceAll(strings.Join(pr.SandboxFailures, "<br>"), "|", "\\|")
			fmt.Fprintf(&b, "| %s | %v | %s | %s | %v | %v | %s |\n", pr.Pod, pr.HostNetwork, at(pr.Created), at(pr.Running), pr.RunningBeforeDaemon, pr.Attached, fails)
		}
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
