// Package multus is Multus on the cluster tier and how the CNI plugins get
// onto the nodes: the thick DaemonSet from its release manifest, and the
// staging of /opt/cni/bin (the plain installer, none, or the stager's init
// container in the Multus DaemonSet, as Cozystack's chart renders it).
package multus

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/cozystack"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/kube"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/node"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/plan"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/wait"
	"github.com/cozystack/vlan-conformance/framework/stager"
	"github.com/cozystack/vlan-conformance/framework/subject"
)

// Where Multus lives once applied from its release manifest.
const (
	Namespace = "kube-system"
	DaemonSet = "kube-multus-ds"
)

// Manifest is the pinned Multus thick release manifest.
func Manifest(cl *config.ClusterConfig) kube.Manifest {
	return kube.Manifest{Component: "multus", Version: cl.MultusVersion, File: "multus-daemonset-thick.yml",
		URL: "https://raw.githubusercontent.com/k8snetworkplumbingwg/multus-cni/" + cl.MultusVersion + "/deployments/multus-daemonset-thick.yml"}
}

// Multus is the Multus the suite installed (objs nil: it installed none).
type Multus struct {
	cfg       *config.Config
	subj      *subject.Subject // the release under test; nil: the suite's reference subject
	timeouts  map[string]time.Duration
	kube      *kube.Clients
	objs      []*unstructured.Unstructured // the manifest as applied
	stager    *corev1.Container            // the stager's init container (--cni-staging=stager, or the release's)
	stagerVol string
	// The DaemonSet as applied: kube-system/kube-multus-ds upstream,
	// cozy-multus/cozy-multus from the release's chart.
	namespace, daemonSet string
	keptOn               *cozystack.Release // the broken copy of the release under Control.StagerKeptWhenOff
}

func New(cfg *config.Config, subj *subject.Subject, timeouts map[string]time.Duration, k *kube.Clients) *Multus {
	return &Multus{cfg: cfg, subj: subj, timeouts: timeouts, kube: k}
}

// Plan adds staging the plugins on every node (names), applying Multus and
// waiting for it.
func (m *Multus) Plan(p *plan.Plan, names []string, nodes *node.Set) {
	cfg, cl := m.cfg, &m.cfg.Cluster
	if s := m.subj; s != nil {
		// The release's chart stages the plugins itself: no installer, no
		// grafting, whatever --cni-staging says. A release without staging
		// leaves them to node provisioning, which the installer stands for.
		if !s.Stages() {
			m.planInstaller(p, names, nodes, func() {
				s.Ledger.Add(cozystack.Change{Kind: "node", Object: "every node's /opt/cni/bin", What: "the reference plugins of --plugin-dir " + cfg.PluginDir + " copied in before Multus",
					Why: "this release does not stage the CNI plugins (" + strings.Join(s.NoStaging, "; ") + "): its nodes must carry them, as node provisioning would, and kind's carry no bridge"})
			})
		}
		action := fmt.Sprintf("Multus from the release's %s as its platform renders it (variant %s, networking.stageCniPlugins unset), image references → %s; the pod network conflist also under the chart's multusMasterCNI name on every node", cozystack.MultusChart, subject.DefaultVariant, cl.CNIPluginsImage)
		p.Add("apply", action, nil, func(ctx context.Context) error { return m.installRelease(ctx, nodes.PIDs) })
		p.Wait(RolledOutStage(m.kube, m.timeouts["multus"]))
		return
	}
	switch cl.CNIStaging {
	case "installer":
		m.planInstaller(p, names, nodes, func() {})
	case "none":
		p.Add("node", "no CNI plugins staged (--cni-staging=none): the node image's /opt/cni/bin is used as it is", nil, nil)
	}
	ms := Manifest(cl)
	action := "Multus thick " + ms.Describe(cl.ManifestsDir)
	if cl.CNIStaging == "stager" {
		action += fmt.Sprintf("; its DaemonSet gets the init container %s of %s, image %s", stager.InitContainerName, m.subj.StagerManifest(cfg), cl.CNIPluginsImage)
	}
	p.Add("apply", action, nil, m.install)
	p.Wait(RolledOutStage(m.kube, m.timeouts["multus"]))
}

// planInstaller adds copying the reference plugins of --plugin-dir into
// every node's /opt/cni/bin; done runs after each node's copy.
func (m *Multus) planInstaller(p *plan.Plan, names []string, nodes *node.Set, done func()) {
	for _, n := range names {
		p.Add("node", n+": copy the reference plugins of "+m.cfg.PluginDir+" into /opt/cni/bin (each written aside, then renamed over)", nil,
			func(context.Context) error {
				if err := installPlugins(m.cfg.PluginDir, fmt.Sprintf("/proc/%d/root/opt/cni/bin", nodes.PIDs[n])); err != nil {
					return err
				}
				done()
				return nil
			})
	}
}

func (m *Multus) install(ctx context.Context) error {
	cl := &m.cfg.Cluster
	b, err := Manifest(cl).Load(ctx, cl.ManifestsDir)
	if err != nil {
		return err
	}
	if m.objs, err = kube.Decode(b); err != nil {
		return err
	}
	if cl.CNIStaging == "stager" {
		sm, err := os.ReadFile(m.subj.StagerManifest(m.cfg))
		if err != nil {
			return err
		}
		ic, vol, err := stagerInit(sm, cl.CNIPluginsImage)
		if err != nil {
			return err
		}
		if ctl := m.cfg.SelectedControl(); ctl.StagerFailsContainer {
			if err := failingStager(&ic); err != nil {
				return fmt.Errorf("the control %s: %w", ctl.ID, err)
			}
		}
		m.stager, m.stagerVol = &ic, vol
	}
	if err := withStaging(m.objs, m.stager, m.stagerVol, ""); err != nil {
		return err
	}
	if err := m.controlRollout(m.objs); err != nil {
		return err
	}
	m.noteDaemonSet()
	return m.kube.Apply.Apply(ctx, m.objs)
}

// installRelease applies the release's multus chart as rendered (see
// chart.go) and takes its stager subject from it.
func (m *Multus) installRelease(ctx context.Context, pids map[string]int) error {
	objs, err := m.releaseObjects(cozystack.Unset)
	if err != nil {
		return err
	}
	if err := m.meetMasterCNI(masterCNI(objs), pids); err != nil {
		return err
	}
	if m.stager, m.stagerVol, err = initContainer(objs, stager.InitContainerName); err != nil {
		return err
	}
	m.objs = objs
	m.noteDaemonSet()
	return m.kube.Apply.Apply(ctx, objs)
}

// noteDaemonSet remembers where the applied Multus DaemonSet lives.
func (m *Multus) noteDaemonSet() {
	for _, o := range m.objs {
		if o.GetKind() == "DaemonSet" {
			m.namespace, m.daemonSet = o.GetNamespace(), o.GetName()
		}
	}
}

// RolledOutStage waits for the Multus DaemonSet wherever the cluster runs it
// (kube-system upstream, cozy-multus in Cozystack): the DaemonSet whose
// name contains "multus".
func RolledOutStage(k *kube.Clients, timeout time.Duration) wait.Stage {
	return wait.Stage{Name: "multus", What: "the Multus DaemonSet rolled out on every node", Timeout: timeout, Check: func(ctx context.Context) (bool, string, error) {
		list, err := k.Kube.AppsV1().DaemonSets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "listing DaemonSets: " + err.Error(), nil
		}
		for _, ds := range list.Items {
			if !strings.Contains(ds.Name, "multus") {
				continue
			}
			st := ds.Status
			status := fmt.Sprintf("DaemonSet %s/%s: desired %d, updated %d, ready %d (generation %d, observed %d)", ds.Namespace, ds.Name, st.DesiredNumberScheduled, st.UpdatedNumberScheduled, st.NumberReady, ds.Generation, st.ObservedGeneration)
			done := st.ObservedGeneration >= ds.Generation && st.DesiredNumberScheduled > 0 &&
				st.UpdatedNumberScheduled == st.DesiredNumberScheduled && st.NumberReady == st.DesiredNumberScheduled
			return done, status, nil
		}
		return false, "no Multus DaemonSet found (no DaemonSet named *multus* in any namespace)", nil
	}}
}
