package stager

import (
	"errors"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cozystack/vlan-conformance/framework/cni"
	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/failures"
	"github.com/cozystack/vlan-conformance/framework/nsexec"
	"github.com/cozystack/vlan-conformance/framework/run"
	"github.com/cozystack/vlan-conformance/framework/stager"
	"github.com/cozystack/vlan-conformance/suites/labels"
)

// The NAD a macvlan user applies (fixtures/nad), and the sub-interface it
// names.
const (
	macvlanFixture = "vlan100-macvlan"
	macvlanMaster  = "uplink.100"
)

// A Talos node's /opt/cni/bin, as the CNI runtime sees it before and after
// staging (the guide: "Talos puts six binaries in that directory [...] so a
// NAD naming macvlan, ipvlan or vlan fails there too"):
//
//	vcf-stg-node: uplink.100 (a veth end standing for the sub-interface: the host has no 8021q)
//	  /opt/cni/bin = the Talos layout ── libcni ADD macvlan ─╳─ failed to find plugin "macvlan" in path [...]
//	  install-cni-plugins, the subject's, runs on that same directory
//	  /opt/cni/bin = Talos's six + ten ── libcni ADD macvlan ──▶ vcf-stg-pod: net1, a macvlan child of uplink.100
//
// The lookup and the attachment are libcni's and the real plugin's, as
// Multus delegates a NAD.
func cniPathSpecs(r *run.Run) {
	Describe("A Talos node's /opt/cni/bin seen by the CNI runtime", labels.Stager, func() {
		It("[VLAN-15] fails a macvlan NAD with the missing-plugin error before staging, and attaches it after, on the same directory", labels.Claim("VLAN-15"), func(ctx SpecContext) {
			l, err := layout("talos")
			Expect(err).NotTo(HaveOccurred())
			harness, node, err := setUp(r, stager.Scenario{Name: "talos-cni", Layout: l})
			Expect(err).NotTo(HaveOccurred())
			host, pod, err := nodeAndPod()
			DeferCleanup(func() error { return errors.Join(deleteNamespace(pod), deleteNamespace(host)) })
			Expect(err).NotTo(HaveOccurred(), "the node's and the pod's network namespaces")
			cache, err := os.MkdirTemp(r.Config().WorkDir, "cni-cache-")
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(os.RemoveAll, cache)
			rt := cni.Runtime{BinDirs: []string{node.Dir}, CacheDir: cache}
			att := cni.Attachment{
				NADNamespace: "tenant", NADName: macvlanFixture, Config: r.Subject().NADConfig(macvlanFixture),
				PodNamespace: "tenant", PodName: "pod-talos", ContainerID: "vcf-talos-cni", Netns: pod.Path, IfName: "net1",
			}
			add := func() error {
				return nsexec.Do(host.Path, func() error { _, err := rt.Add(ctx, att); return err })
			}

			By("before staging: Talos's six, and no macvlan among them")
			_, had := os.Stat(filepath.Join(node.Dir, "macvlan"))
			Expect(os.IsNotExist(had)).To(BeTrue(), "the Talos layout must not carry macvlan: %v", had)
			before := add()
			r.Artifacts().Note("VLAN-15", "CNI ADD of NAD %s on the Talos layout %s: %v", macvlanFixture, node.Dir, before)
			Expect(before).To(MatchError(ContainSubstring(`failed to find plugin "macvlan" in path [`+node.Dir+`]`)),
				"before staging the NAD must fail with the missing-plugin error for %s", node.Dir)

			By("the subject's install-cni-plugins runs on that directory")
			res, err := harness.Stage(ctx, node)
			Expect(err).NotTo(HaveOccurred(), "the run could not be made:\n%s", res.Log)
			Expect(res.ExitCode).To(BeZero(), "install-cni-plugins must exit 0:\n%s", res.Log)

			By("after staging: the same NAD attaches, and the pod has its macvlan child")
			after := add()
			var net1 netlink.Link
			if after == nil {
				DeferCleanup(func(ctx SpecContext) error {
					return nsexec.Do(host.Path, func() error { return rt.Del(ctx, att) })
				})
				net1, after = pod.Handle.LinkByName("net1")
			}
			kind := ""
			if net1 != nil {
				kind = net1.Type()
			}
			r.Artifacts().Note("VLAN-15", "CNI ADD of NAD %s after staging: %v; the pod's net1: %s", macvlanFixture, after, kind)
			Expect(after).NotTo(HaveOccurred(), failures.AttachesAfterStaging+" on %s", node.Dir)
			Expect(kind).To(Equal("macvlan"), "the pod's net1 must be a macvlan child of %s", macvlanMaster)
		})
	})
}

// nodeAndPod makes a node namespace with the NAD's master and a pod
// namespace, both removed by deleteNamespace (and by the next run's
// sweep after a kill: they carry the suite's prefix).
func nodeAndPod() (host, pod *fabric.Namespace, err error) {
	if host, err = fabric.NewNamespace("stg-node"); err != nil {
		return nil, nil, err
	}
	if pod, err = fabric.NewNamespace("stg-pod"); err != nil {
		return host, nil, err
	}
	master := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: macvlanMaster}, PeerName: "uplink-peer"}
	if err := host.Handle.LinkAdd(master); err != nil {
		return host, pod, err
	}
	up, err := host.Handle.LinkByName(macvlanMaster)
	if err == nil {
		err = host.Handle.LinkSetUp(up)
	}
	return host, pod, err
}

func deleteNamespace(ns *fabric.Namespace) error {
	if ns == nil {
		return nil
	}
	return ns.Delete()
}
