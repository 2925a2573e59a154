// Package kind makes, reuses and deletes the cluster tier's kind cluster
// through kind's Go library (sigs.k8s.io/kind/pkg/cluster): nothing is
// installed or downloaded at run time; kind drives the container runtime
// binary it is given (docker, podman or nerdctl).
package kind

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cozystack/vlan-conformance/framework/image"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	kindcluster "sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"
	"sigs.k8s.io/kind/pkg/log"
	"sigs.k8s.io/yaml"
)

// ParseConfig reads a kind cluster configuration strictly (an unknown key is
// an error) and checks what the suite relies on: at least one worker.
func ParseConfig(raw []byte) (*v1alpha4.Cluster, error) {
	var c v1alpha4.Cluster
	if err := yaml.UnmarshalStrict(raw, &c); err != nil {
		return nil, fmt.Errorf("kind config: %w", err)
	}
	if c.Kind != "Cluster" || c.APIVersion != "kind.x-k8s.io/v1alpha4" {
		return nil, fmt.Errorf("kind config: want kind: Cluster, apiVersion: kind.x-k8s.io/v1alpha4, got %q %q", c.Kind, c.APIVersion)
	}
	if len(Workers(&c)) == 0 {
		return nil, errors.New("kind config: no worker node (VMs run on workers)")
	}
	return &c, nil
}

// Workers lists the worker nodes of a configuration.
func Workers(c *v1alpha4.Cluster) []v1alpha4.Node {
	var out []v1alpha4.Node
	for _, n := range c.Nodes {
		if n.Role == v1alpha4.WorkerRole {
			out = append(out, n)
		}
	}
	return out
}

// NodeNames are the container names kind gives a configuration's nodes:
// <name>-control-plane, <name>-control-plane2, <name>-worker, <name>-worker2...
func NodeNames(name string, c *v1alpha4.Cluster) (controlPlanes, workers []string) {
	suffix := func(i int) string {
		if i == 0 {
			return ""
		}
		return strconv.Itoa(i + 1)
	}
	for _, n := range c.Nodes {
		switch n.Role {
		case v1alpha4.ControlPlaneRole:
			controlPlanes = append(controlPlanes, name+"-control-plane"+suffix(len(controlPlanes)))
		case v1alpha4.WorkerRole:
			workers = append(workers, name+"-worker"+suffix(len(workers)))
		}
	}
	return controlPlanes, workers
}

// Options describe the cluster to make.
type Options struct {
	Name           string
	Runtime        string // docker, podman, nerdctl
	Config         []byte // kind cluster configuration
	NodeImage      string // "" = kind's default
	KubeconfigPath string // where kind writes the kubeconfig (never ~/.kube/config)
	WaitForReady   time.Duration
	Keep           bool       // the cluster outlives the run (kind-up, --keep-cluster): marked kept
	Logger         log.Logger // nil = silent
}

// Cluster is a kind cluster, made by this run or found.
type Cluster struct {
	Name     string
	Runtime  string
	Created  bool   // this run made it, so this run may delete it
	Replaced string // why a cluster of this name that was there was deleted first ("" if none was)
	provider *kindcluster.Provider
}

func provider(runtime string, logger log.Logger) *kindcluster.Provider {
	if logger == nil {
		logger = log.NoopLogger{}
	}
	opts := []kindcluster.ProviderOption{kindcluster.ProviderWithLogger(logger)}
	switch runtime {
	case "podman":
		opts = append(opts, kindcluster.ProviderWithPodman())
	case "nerdctl":
		opts = append(opts, kindcluster.ProviderWithNerdctl("nerdctl"))
	default:
		opts = append(opts, kindcluster.ProviderWithDocker())
	}
	return kindcluster.NewProvider(opts...)
}

// Up returns the named cluster, making it if it does not exist. A cluster
// that is there already is judged by its owner mark (Judge): a kept one
// (`make kind-up`) is reused and never deleted; a leftover of a run that
// is gone is deleted and made afresh (Replaced says why); one a live run
// owns is an error.
func Up(o Options) (*Cluster, error) {
	p := provider(o.Runtime, o.Logger)
	c := &Cluster{Name: o.Name, Runtime: o.Runtime, provider: p}
	existing, err := p.List()
	if err != nil {
		return nil, fmt.Errorf("kind: list clusters with %s: %w", o.Runtime, err)
	}
	if slices.Contains(existing, o.Name) {
		found, why := Judge(c.owner())
		switch found {
		case Busy:
			return nil, fmt.Errorf("kind: cluster %s is there and %s: give this run another --kind-name, or wait", o.Name, why)
		case Reuse:
			if o.KubeconfigPath != "" {
				if err := p.ExportKubeConfig(o.Name, o.KubeconfigPath, false); err != nil {
					return nil, fmt.Errorf("kind: kubeconfig of %s: %w", o.Name, err)
				}
			}
			return c, nil
		}
		c.Replaced = fmt.Sprintf("cluster %s was there and %s: deleted, made afresh", o.Name, why)
		if err := p.Delete(o.Name, ""); err != nil {
			return nil, fmt.Errorf("kind: delete the leftover cluster %s: %w", o.Name, err)
		}
	}
	opts := []kindcluster.CreateOption{
		kindcluster.CreateWithRawConfig(o.Config),
		kindcluster.CreateWithWaitForReady(o.WaitForReady),
		kindcluster.CreateWithDisplayUsage(false),
		kindcluster.CreateWithDisplaySalutation(false),
	}
	if o.NodeImage != "" {
		opts = append(opts, kindcluster.CreateWithNodeImage(o.NodeImage))
	}
	if o.KubeconfigPath != "" {
		opts = append(opts, kindcluster.CreateWithKubeconfigPath(o.KubeconfigPath))
	}
	// A run killed before the mark leaves a cluster with none: to Judge,
	// a leftover as well.
	if err := p.Create(o.Name, opts...); err != nil {
		return nil, fmt.Errorf("kind: create cluster %s: %w", o.Name, err)
	}
	c.Created = true
	if err := c.mark(ThisRun(o.Keep)); err != nil {
		return nil, err
	}
	return c, nil
}

// owner is the content of the cluster's owner file, "" if it has none (or
// its node cannot be read: then no run can vouch for it either).
func (c *Cluster) owner() string {
	n, err := c.bootstrapNode()
	if err != nil {
		return ""
	}
	var out bytes.Buffer
	if err := n.Command("cat", OwnerFile).SetStdout(&out).Run(); err != nil {
		return ""
	}
	return out.String()
}

func (c *Cluster) mark(o Owner) error {
	n, err := c.bootstrapNode()
	if err != nil {
		return err
	}
	if err := nodeutils.WriteFile(n, OwnerFile, o.String()); err != nil {
		return fmt.Errorf("kind: mark cluster %s with its owner (%s): %w", c.Name, OwnerFile, err)
	}
	return nil
}

func (c *Cluster) bootstrapNode() (nodes.Node, error) {
	ns, err := c.provider.ListInternalNodes(c.Name)
	if err != nil {
		return nil, err
	}
	return nodeutils.BootstrapControlPlaneNode(ns)
}

// Find returns an existing cluster without making one.
func Find(name, runtime string) (*Cluster, error) {
	p := provider(runtime, nil)
	existing, err := p.List()
	if err != nil {
		return nil, err
	}
	if !slices.Contains(existing, name) {
		return nil, fmt.Errorf("kind: no cluster %q", name)
	}
	return &Cluster{Name: name, Runtime: runtime, provider: p}, nil
}

// Kubeconfig is the cluster's kubeconfig (external address).
func (c *Cluster) Kubeconfig() (string, error) { return c.provider.KubeConfig(c.Name, false) }

// Container is a node container: one node of the kind cluster as the
// container runtime runs it.
type Container struct {
	Name string
	Role string // control-plane, worker
	node nodes.Node
}

// Containers lists the node containers, sorted by name.
func (c *Cluster) Containers() ([]Container, error) {
	ns, err := c.provider.ListInternalNodes(c.Name)
	if err != nil {
		return nil, err
	}
	var out []Container
	for _, n := range ns {
		role, err := n.Role()
		if err != nil {
			return nil, err
		}
		out = append(out, Container{Name: n.String(), Role: role, node: n})
	}
	slices.SortFunc(out, func(a, b Container) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// PID is the node container's init process as the host sees it: its
// /proc/<pid>/ns/net is the node's network namespace, /proc/<pid>/root its
// file system.
func PID(ctx context.Context, runtime, container string) (int, error) {
	out, err := exec.CommandContext(ctx, runtime, "inspect", "--format", "{{.State.Pid}}", container).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, bytes.TrimSpace(ee.Stderr))
		}
		return 0, fmt.Errorf("%s inspect %s: %w", runtime, container, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("%s inspect %s: no running process (%q)", runtime, container, out)
	}
	return pid, nil
}

// LoadArchive imports a docker-archive tarball into every node's
// containerd, as `kind load image-archive` does but without unpacking
// (load), into the nodes at once. kind's import unpacks every image into
// every node: one node after another the archives took 125 s of a VM
// lane's set-up, the nodes at once still 87 s (CI, 767314d). A node that
// holds every image of the archive already, by tag and ID, is left alone
// (a cluster reused from make kind-up: 56 s of each run on it); loaded
// reports whether any node needed it. Every node gets the images' digest
// references too (digestRefs).
func (c *Cluster) LoadArchive(path string) (loaded bool, err error) {
	ns, err := c.Containers()
	if err != nil {
		return false, err
	}
	images, err := image.DockerTags(path)
	if err != nil {
		return false, fmt.Errorf("reading %s: %w", path, err)
	}
	errs := make([]error, len(ns))
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, n := range ns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !holds(n.node, images) {
				mu.Lock()
				loaded = true
				mu.Unlock()
				if errs[i] = load(n, path); errs[i] != nil {
					return
				}
			}
			errs[i] = digestRefs(n.node, images)
		}()
	}
	wg.Wait()
	return loaded, errors.Join(errs...)
}

// load imports the archive's images into the node's containerd without
// unpacking them: containerd's CRI unpacks an image when the first
// container of it is made on that node, so a node pays only for the
// images it runs (the node image's own are imported so too:
// images/node/files/kind/bin/vcf-import-images.sh). kind's
// LoadImageArchive is this import with unpacking.
func load(n Container, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var out bytes.Buffer
	cmd := n.node.Command("ctr", "--namespace=k8s.io", "images", "import", "--all-platforms", "--digests", "--no-unpack", "-")
	if err := cmd.SetStdin(f).SetStdout(&out).SetStderr(&out).Run(); err != nil {
		return fmt.Errorf("importing %s into %s (ctr images import --no-unpack): %w: %s", path, n.Name, err, bytes.TrimSpace(out.Bytes()))
	}
	return nil
}

// ServiceSubnet is the cluster's Service range, as kind defaults it when
// the configuration sets none.
func ServiceSubnet(c *v1alpha4.Cluster) string {
	n := v1alpha4.Cluster{Networking: c.Networking} // kind's defaulting, on a copy
	v1alpha4.SetDefaultsCluster(&n)
	return n.Networking.ServiceSubnet
}

// RejectUndiverted makes every node refuse traffic to the Service range that
// no Service rule diverted: kube-proxy's DNAT runs in the nat table before
// the filter table, so only such traffic still carries a ClusterIP there.
// Without it that traffic follows the node's default route off the node,
// and where a transparent egress proxy answers any address (this sandbox:
// port 443 answers 404) a connection the API server opens in the moment
// before kube-proxy syncs a new Service is answered and kept alive for
// good. Seen here: virt-api's APIService unavailable for the whole run,
// its conntrack entry un-NATed to the proxy. One exec per node; a node that
// has the rules already (a reused cluster) keeps them as they are.
func (c *Cluster) RejectUndiverted(subnet string) error {
	ns, err := c.Containers()
	if err != nil {
		return err
	}
	const comment = "vcf: Service traffic no Service rule diverted"
	rules := "*filter\n"
	for _, chain := range []string{"OUTPUT", "FORWARD"} {
		match := fmt.Sprintf("-A %s -d %s -m comment --comment %q", chain, subnet, comment)
		rules += match + " -p tcp -j REJECT --reject-with tcp-reset\n" + match + " -j REJECT\n"
	}
	rules += "COMMIT\n"
	for _, n := range ns {
		var out bytes.Buffer
		cmd := n.node.Command("sh", "-c", fmt.Sprintf("iptables -S | grep -qF %q || iptables-restore --noflush", comment)).SetStdin(strings.NewReader(rules)).SetStdout(&out).SetStderr(&out)
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("node %s: iptables-restore --noflush of\n%s: %w: %s", n.Name, rules, err, bytes.TrimSpace(out.Bytes()))
		}
	}
	return nil
}

// ExportLogs writes `kind export logs` into dir.
func (c *Cluster) ExportLogs(dir string) error { return c.provider.CollectLogs(c.Name, dir) }

// Delete deletes the cluster (kubeconfigPath: the file Up wrote, or "").
func (c *Cluster) Delete(kubeconfigPath string) error {
	return c.provider.Delete(c.Name, kubeconfigPath)
}
