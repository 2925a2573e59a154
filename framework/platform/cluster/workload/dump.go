package workload

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/vlan-conformance/framework/platform/cluster/kube"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/node"
)

// Dump writes, for a failed spec, each VM's VirtualMachine, VMI and NAD
// YAML, its launcher pod's logs and `ip` state, the events and its serial
// log into dir, and a line per file into index.
func (w *Workloads) Dump(ctx context.Context, dir string, index *strings.Builder) {
	w.mu.Lock()
	guests := make([]*vmGuest, 0, len(w.guests))
	for _, g := range w.guests {
		guests = append(guests, g)
	}
	w.mu.Unlock()
	for _, g := range guests {
		w.dumpGuest(ctx, dir, g, index)
	}
}

func (w *Workloads) dumpGuest(ctx context.Context, dir string, g *vmGuest, b *strings.Builder) {
	base := filepath.Join(dir, g.spec.Namespace+"_"+g.vmName)
	save := func(suffix string, obj any, err error) {
		if err != nil {
			fmt.Fprintf(b, "%s%s: %v\n", base, suffix, err)
			return
		}
		y, err := kube.ToYAML(obj)
		if err == nil {
			err = os.WriteFile(base+suffix, []byte(y), 0o644)
		}
		fmt.Fprintf(b, "%s%s: %v\n", base, suffix, err)
	}
	kv := w.kube.KubeVirt.KubevirtV1()
	vm, err := kv.VirtualMachines(g.spec.Namespace).Get(ctx, g.vmName, metav1.GetOptions{})
	save(".vm.yaml", vm, err)
	vmi, err := kv.VirtualMachineInstances(g.spec.Namespace).Get(ctx, g.vmName, metav1.GetOptions{})
	save(".vmi.yaml", vmi, err)
	for _, n := range g.spec.Networks {
		nad, err := w.kube.NAD.K8sCniCncfIoV1().NetworkAttachmentDefinitions(g.spec.Namespace).Get(ctx, n, metav1.GetOptions{})
		save(".nad-"+n+".yaml", nad, err)
	}
	evs, err := w.VMEvents(ctx, g.spec.Namespace, g.spec.Name)
	var eb strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&eb, "%s %s %s: %s\n", e.Type, e.Object, e.Reason, e.Message)
	}
	if err != nil {
		fmt.Fprintf(&eb, "(events: %v)\n", err)
	}
	os.WriteFile(base+".events.txt", []byte(eb.String()), 0o644)
	if g.serialLog != "" {
		if in, err := os.ReadFile(g.serialLog); err == nil {
			os.WriteFile(base+".serial.log", in, 0o644)
		}
	}
	if vmi == nil || err != nil {
		return
	}
	pods, err := launcherPods(ctx, w.kube, g.spec.Namespace, vmi.UID)
	if err != nil {
		return
	}
	for _, p := range pods {
		w.podLogs(ctx, base+".launcher.log", p)
		if w.nodes.PIDs[p.Spec.NodeName] != 0 {
			// The launcher pod's netns, from inside its kind node.
			script := fmt.Sprintf(`pid=$(crictl inspectp -o go-template --template '{{.info.pid}}' $(crictl pods --name %s -q | head -1)); for c in %s; do echo "### $c"; nsenter -t "$pid" -n $c 2>&1; done`, p.Name, quoteAll(node.IPCommands))
			out, err := exec.CommandContext(ctx, w.cfg.Cluster.Runtime, "exec", p.Spec.NodeName, "sh", "-c", script).CombinedOutput()
			os.WriteFile(base+".launcher-net.txt", append(out, []byte(fmt.Sprintf("\n(exit: %v)\n", err))...), 0o644)
		}
	}
}

func quoteAll(cmds []string) string {
	var q []string
	for _, c := range cmds {
		q = append(q, "'"+c+"'")
	}
	return strings.Join(q, " ")
}

func (w *Workloads) podLogs(ctx context.Context, path string, p corev1.Pod) {
	f, err := os.Create(path)
	if err != nil {
		return
	}
	defer f.Close()
	for _, ct := range p.Spec.Containers {
		fmt.Fprintf(f, "### %s/%s container %s\n", p.Namespace, p.Name, ct.Name)
		tail := int64(500)
		rc, err := w.kube.Kube.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: ct.Name, TailLines: &tail}).Stream(ctx)
		if err != nil {
			fmt.Fprintf(f, "(logs: %v)\n", err)
			continue
		}
		io.Copy(f, rc)
		rc.Close()
	}
}
