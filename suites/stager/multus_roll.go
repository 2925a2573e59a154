package stager

import (
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

// multusConfig is the config Multus's daemon writes into the node's
// /etc/cni/net.d with multusConfigFile "auto", the release's setting.
const multusConfig = "00-multus.conf"

// rollSpecs is STG-12: flipping stageCniPlugins edits the Multus
// DaemonSet's pod template, and the suite follows the roll that follows.
//
//	kind nodes, each running a Multus pod (thick: the daemon; the shim on the node)
//	node 1   old ─marked─gone─▶ new Ready
//	node 2                        old ─marked─gone─▶ new Ready   (one at a time)
//	                                          │
//	                     the probes, pinned to node 2 the moment its old pod is gone:
//	                       probe-hostnet  hostNetwork: no CNI call
//	                       probe-nad      NAD vlan100: the daemon removed 00-multus.conf as it
//	                                      stopped, so the runtime calls the default network's
//	                                      plugin alone; vlan100 is never attached
//
// Not labelled stager: that label selects specs that need no platform.
func rollSpecs(r *run.Run) {
	Describe("Flipping stageCniPlugins on a running cluster", labels.Cluster, Ordered, func() {
		f := framework.New(r, "roll")
		BeforeAll(framework.Disrupts) // it rolls Multus on every node, twice

		// "Changing this value edits the Multus DaemonSet's pod template, so Multus rolls node by node. While a node's multus-daemon is down its CNI shim has no daemon behind it, and pod creation and deletion on that node fail for the length of the restart." ... "host-network pods bypass CNI and still start."
		// Measured on Multus v4.3.0 (thick, multusConfigFile auto), the pod
		// on the NAD does not fail: the stopping daemon removes its own CNI
		// config, the runtime falls through to the default network's, and
		// the pod starts without its NAD, for good, with no error anywhere.
		It("[STG-12] rolls Multus one node at a time; a pod on the NAD created on a node whose daemon is down starts without it, with no error, and a hostNetwork pod starts", labels.Claim("STG-12"), func(ctx SpecContext) {
			p, err := f.Platform(ctx)
			Expect(err).NotTo(HaveOccurred(), "building the platform")
			mr, rolls := platform.As[platform.MultusRoll](p)
			s, stages := platform.As[platform.Stager](p)
			if !rolls || !stages {
				Skip(p.Name() + " has no Multus DaemonSet the suite rolls: STG-12 needs a cluster whose Multus the suite installs")
			}
			node := p.BridgeNodes()[0]
			const nad = "vlan100"
			Expect(f.ApplyNAD(ctx, nad, "vlan100-bridge")).To(Succeed())

			// Staging as the run configured it. The run's other specs expect
			// it so: put back last, after the probes are gone (cleanups run
			// in reverse).
			DeferCleanup(func(ctx SpecContext) {
				_, err := s.SetStaging(ctx, true)
				if !errors.Is(err, evidence.ErrNotObservable) {
					Expect(err).NotTo(HaveOccurred(), "turning staging back on")
				}
			})

			const on = false
			By(fmt.Sprintf("stageCniPlugins %v; the probes created on %s the moment its old Multus pod is gone", on, node.Name()))
			roll, deleteProbes, err := mr.RollStaging(ctx, on, node, f.Namespace(), nad)
			if deleteProbes != nil {
				DeferCleanup(deleteProbes)
			}
			Expect(writeRoll(f.Artifact("roll.md"), roll)).To(Succeed())
			f.Note("%s", rollSummary(on, roll))
			skip.IfNotObservable(err)
			// Judged first: a roll that took every node at once is wrong
			// however the rest of it went.
			Expect(roll.MostDown).To(BeNumerically("<=", 1), "flipping stageCniPlugins: "+failures.OneNodeAtATime+", yet %d nodes were without a Ready Multus pod at once (updateStrategy %s)", roll.MostDown, roll.Strategy)
			Expect(err).NotTo(HaveOccurred(), "rolling Multus with stageCniPlugins %v", on)

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

			By("Multus's own config was gone from the node as the probes were created: the runtime chose among the rest")
			if roll.CNIConfigs != nil {
				Expect(roll.CNIConfigs).NotTo(ContainElement(multusConfig), "%s's /etc/cni/net.d as the probes were created", node.Name())
			}

			// The probes' sandboxes are asked for while the daemon is down;
			// when they reach Running depends on the kubelet's load (under
			// CI's, after the daemon was back), so Running is recorded, not
			// judged: a pod whose CNI ADD reached a daemon would carry
			// Multus's network-status.
			Expect(roll.Window).To(BeNumerically(">", 0), "the probes must be created while %s's Multus daemon is down", node.Name())

			By("the pod on the NAD is not refused: it starts on the default network alone")
			want := f.Namespace() + "/" + nad
			Expect(onNAD.SandboxFailures).To(BeEmpty(), "%s, created on %s with its Multus daemon gone, must not fail sandbox creation; it %s", onNAD.Pod, node.Name(), ranHow(*onNAD, want))
			Expect(onNAD.Running).NotTo(BeZero(), "%s must run", onNAD.Pod)
			Expect(onNAD.PodIP).NotTo(BeEmpty(), "%s must have the default network's address", onNAD.Pod)
			By("and it stays without its NAD once the daemon is back")
			Expect(onNAD.Attached).NotTo(ContainElement(want), "%s must stay without %s: Multus never attached it; it %s", onNAD.Pod, want, ranHow(*onNAD, want))
			Expect(onNAD.Attached).To(BeEmpty(), "%s must carry no network-status: no Multus ADD ran for it; it %s", onNAD.Pod, ranHow(*onNAD, want))

			By("the hostNetwork pod starts")
			Expect(hostNet.SandboxFailures).To(BeEmpty(), "%s bypasses CNI: no sandbox to fail", hostNet.Pod)
			Expect(hostNet.Running).NotTo(BeZero(), "%s must run", hostNet.Pod)
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

// rollSummary is the roll in a line, for evidence.txt.
func rollSummary(on bool, r platform.Roll) string {
	var probes []string
	for _, pr := range r.Probes {
		probes = append(probes, fmt.Sprintf("%s running %v (before the daemon %v), pod IP %q, attached %v, FailedCreatePodSandBox %d", pr.Pod, !pr.Running.IsZero(), pr.RunningBeforeDaemon, pr.PodIP, pr.Attached, len(pr.SandboxFailures)))
	}
	return fmt.Sprintf("stageCniPlugins %v: updateStrategy %s; %d nodes, at most %d down at once; %s down %s after the probes, its /etc/cni/net.d then %v; probes: %s",
		on, r.Strategy, len(r.Nodes), r.MostDown, r.ProbeNode, r.Window.Round(time.Millisecond), r.CNIConfigs, strings.Join(probes, "; "))
}

// writeRoll writes the roll as a timeline, in ms from its first old pod's
// deletion mark.
func writeRoll(path string, r platform.Roll) error {
	var b strings.Builder
	b.WriteString("# STG-12: the Multus roll\n\nTimes are when the suite received each event of one watch of every pod (the API server's order), in ms from the roll's first deletion mark.\n")
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
	fmt.Fprintf(&b, "\nupdateStrategy %s; at most %d nodes without a Ready Multus pod at once; the probe node %s stayed down %s after the probes were created; its /etc/cni/net.d then held %v.\n\n",
		r.Strategy, r.MostDown, r.ProbeNode, r.Window.Round(time.Millisecond), r.CNIConfigs)
	b.WriteString("| node | old pod | marked | gone | new pod | Ready |\n|---|---|---:|---:|---|---:|\n")
	for _, n := range r.Nodes {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", n.Node, n.OldPod, at(n.Down), at(n.Gone), n.NewPod, at(n.Up))
	}
	b.WriteString("\n| probe | hostNetwork | created | Running | before the daemon | pod IP | network-status | FailedCreatePodSandBox |\n|---|---|---:|---:|---|---|---|---|\n")
	for _, pr := range r.Probes {
		fails := strings.ReplaceAll(strings.Join(pr.SandboxFailures, "<br>"), "|", "\\|")
		fmt.Fprintf(&b, "| %s | %v | %s | %s | %v | %s | %v | %s |\n", pr.Pod, pr.HostNetwork, at(pr.Created), at(pr.Running), pr.RunningBeforeDaemon, pr.PodIP, pr.Attached, fails)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
