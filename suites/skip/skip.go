// Package skip holds the one way specs turn an observation their platform
// cannot make (evidence.ErrNotObservable: a vendor's gateway or switch, an
// existing cluster's nodes) into a skip with the reason, never a failure.
package skip

import (
	"errors"

	. "github.com/onsi/ginkgo/v2"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/report"
)

// IfNotObservable skips the spec when err says the platform cannot observe
// what it was asked for.
func IfNotObservable(err error) {
	if errors.Is(err, evidence.ErrNotObservable) {
		NotObservable(err.Error())
	}
}

// NotObservable skips the spec for the reason given: what it needs, its
// platform cannot observe. The spec carries the report entry the report
// counts those skips by (report.NotObservableEntry), whatever the words.
func NotObservable(reason string) {
	AddReportEntry(report.NotObservableEntry, reason)
	Skip(reason)
}

// IfPods skips a claim about VMs (KubeVirt's bridge binding, VM
// re-creation) on a platform whose workloads are pods.
func IfPods(p platform.Platform, claim string) {
	if w, ok := platform.As[platform.Workloads](p); ok && w.Pods() {
		Skip(claim + " is about KubeVirt VMs; this run's workloads are pods (--workload=pod, KubeVirt not installed)")
	}
}

// IfUntagged skips a claim about 802.1Q tags or a second VLAN on a trunk
// that carries the VLAN untagged.
func IfUntagged(p platform.Platform, claim string) {
	if a, ok := platform.As[platform.AccessTrunk](p); ok {
		if untagged, why := a.Untagged(); untagged {
			Skip(claim + " needs a tagged trunk; this one runs untagged: " + why)
		}
	}
}
