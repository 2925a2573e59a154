package cluster

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
)

// ipCommands are what a person debugging a failed spec runs first, on every
// node, the gateway and each launcher pod.
var ipCommands = []string{"ip a", "ip link", "ip route show table all", "ip neigh", "bridge fdb", "bridge -j vlan show"}

// Dump writes, for a failed spec: each VM's VirtualMachine, VMI and NAD
// YAML, its launcher pod's logs and the events, its serial log; and `ip`
// and `bridge` state from every node, the gateway and each launcher pod.
// It also marks the run failed, so Close exports kind's logs.
func (c *Cluster) Dump(ctx context.Context, dir string) error {
	c.mu.Lock()
	c.failed = true
	guests := make([]*guest, 0, len(c.guests))
	for _, g := range c.guests {
		guests = append(guests, g)
	}
	c.mu.Unlock()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var b strings.Builder
	for _, g := range guests {
		c.dumpGuest(ctx, dir, g, &b)
	}
	for _, n := range c.nodes {
		if n.pid != 0 {
			fmt.Fprintf(&b, "node %s: %s\n", n.name, writeCommands(ctx, filepath.Join(dir, "node-"+n.name+".txt"), []string{"nsenter", "--net=" + n.netnsPath()}))
		}
	}
	if c.fab != nil && c.fab.Gateway != nil {
		fmt.Fprintf(&b, "gateway: %s\n", writeCommands(ctx, filepath.Join(dir, "gateway.txt"), []string{"nsenter", "--net=" + c.fab.Gateway.Path}))
	}
	return os.WriteFile(filepath.Join(dir, "index.txt"), []byte(b.String()), 0o644)
}

func (c *Cluster) dumpGuest(ctx context.Context, dir string, g *guest, b *strings.Builder) {
	base := filepath.Join(dir, g.spec.Namespace+"_"+g.vmName)
	save := func(suffix string, obj any, err error) {
		if err != nil {
			fmt.Fprintf(b, "%s%s: %v\n", base, suffix, err)
			return
		}
		y, err := toYAML(obj)
		if err == nil {
			err = os.WriteFile(base+suffix, []byte(y), 0o644)
		}
		fmt.Fprintf(b, "%s%s: %v\n", base, suffix, err)
	}
	vm, err := c.c.kv.KubevirtV1().VirtualMachines(g.spec.Namespace).Get(ctx, g.vmName, metav1.GetOptions{})
	save(".vm.yaml", vm, err)
	vmi, err := c.c.kv.KubevirtV1().VirtualMachineInstances(g.spec.Namespace).Get(ctx, g.vmName, metav1.GetOptions{})
	save(".vmi.yaml", vmi, err)
	for _, n := range g.spec.Networks {
		nad, err := c.c.nad.K8sCniCncfIoV1().NetworkAttachmentDefinitions(g.spec.Namespace).Get(ctx, n, metav1.GetOptions{})
		save(".nad-"+n+".yaml", nad, err)
	}
	evs, err := c.VMEvents(ctx, g.spec.Namespace, g.spec.Name)
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
	pods, err := c.c.kube.CoreV1().Pods(g.spec.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "kubevirt.io/created-by=" + string(vmi.UID)})
	if err != nil {
		return
	}
	for _, p := range pods.Items {
		c.podLogs(ctx, base+".launcher.log", p)
		if pid := c.pids[p.Spec.NodeName]; pid != 0 {
			// The launcher pod's netns, from inside its kind node.
			script := fmt.Sprintf(`pid=$(crictl inspectp -o go-template --template '{{.info.pid}}' $(crictl pods --name %s -q | head -1)); for c in %s; do echo "### $c"; nsenter -t "$pid" -n $c 2>&1; done`, p.Name, quoteAll(ipCommands))
			out, err := exec.CommandContext(ctx, c.cfg.Cluster.Runtime, "exec", p.Spec.NodeName, "sh", "-c", script).CombinedOutput()
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

func (c *Cluster) podLogs(ctx context.Context, path string, p corev1.Pod) {
	f, err := os.Create(path)
	if err != nil {
		return
	}
	defer f.Close()
	for _, ct := range p.Spec.Containers {
		fmt.Fprintf(f, "### %s/%s container %s\n", p.Namespace, p.Name, ct.Name)
		tail := int64(500)
		rc, err := c.c.kube.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: ct.Name, TailLines: &tail}).Stream(ctx)
		if err != nil {
			fmt.Fprintf(f, "(logs: %v)\n", err)
			continue
		}
		io.Copy(f, rc)
		rc.Close()
	}
}

// writeCommands runs ipCommands behind prefix (nsenter into a namespace)
// into one file.
func writeCommands(ctx context.Context, path string, prefix []string) error {
	var b strings.Builder
	for _, c := range ipCommands {
		args := append(append([]string{}, prefix...), strings.Fields(c)...)
		out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
		fmt.Fprintf(&b, "### %s\n%s", c, out)
		if err != nil {
			fmt.Fprintf(&b, "(exit: %v)\n", err)
		}
		b.WriteString("\n")
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
