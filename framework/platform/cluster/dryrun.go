package cluster

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/kind"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/kube"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/plan"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/workload"
	"github.com/cozystack/vlan-conformance/framework/subject"
)

// DryRun prints every object and node action the run would apply, in
// order: the platform's steps, then the guide's example (vm-instance
// values networks: [{name: vlan100}] with its cloudInit, in tenant-example)
// and its readiness stages, then what is removed afterwards.
func DryRun(w io.Writer, c *Cluster) error {
	p, err := c.plan()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "# conformance --tier=cluster --dry-run: %s\n", c.Name())
	pr := &plan.Printer{W: w}
	if err := pr.Plan(p); err != nil {
		return err
	}
	node := "the first VLAN node"
	if !c.cfg.ExistingCluster() {
		raw, _ := c.kindConfig()
		kc, _ := kind.ParseConfig(raw)
		_, workers := kind.NodeNames(c.cfg.Cluster.KindName, kc)
		node = workers[0]
	}
	// The guide's NAD and userData: the one --guide names or the release
	// ships, the suite's own without a release (Subject is nil-safe).
	subj := c.subj
	spec := platform.VMSpec{Name: "vm-a", Namespace: "tenant-example", Networks: []string{"vlan100"}, CloudInit: subj.UserData(c.cfg.GuestAddr)}
	img := c.Workloads.Image()
	r := workload.RenderVM(spec, img, node)
	for _, o := range []struct {
		action string
		obj    any
	}{
		{"the guide's tenant namespace (unless it exists)", kube.RenderNamespace(spec.Namespace)},
		{"the guide's step 2: the bridge-type NAD in the VM's namespace", kube.RenderNAD(spec.Namespace, platform.NAD{Name: "vlan100", Config: subj.NADConfig(subject.GuideNADFixture)})},
		{"the guide's step 3: the vm-instance cloud-init Secret", r.Secret},
		{"the guide's step 3: the VirtualMachine as vm-instance renders it, placed on " + node, r.VM},
	} {
		if err := pr.Print("apply", o.action, o.obj); err != nil {
			return err
		}
	}
	for _, s := range workload.VMStages(c.kube, c.timeouts, spec.Namespace, r.VM.Name, spec.Networks) {
		pr.Print("wait", fmt.Sprintf("stage %s (timeout %s): %s", s.Name, s.Timeout, s.What), nil)
	}
	pr.Print("guest", "serial console of "+r.VM.Name+" (VMI console subresource): log in as "+img.User+", wait for cloud-init, find the VLAN NIC by the MAC in the VMI status", nil)
	pr.Print("delete", "the VMs, NADs and Secrets the run made, and the namespaces it made (label "+kube.OwnedLabel+"=true)", nil)
	if !c.cfg.ExistingCluster() {
		pr.Print("node", "every cabled node: delete br100 and uplink (uplink.100 and the gateway's port go with it)", nil)
		pr.Print("host", "delete the gateway netns "+fabric.Prefix+"gw and the standby router's "+fabric.Prefix+"gw-standby", nil)
		pr.Print("cluster", "kind delete cluster "+c.cfg.Cluster.KindName+" (unless --keep-cluster, or the cluster was found rather than made); kind export logs into "+filepath.Join(c.cfg.ReportDir, "kind-logs")+" first if a spec failed", nil)
	}
	return nil
}
