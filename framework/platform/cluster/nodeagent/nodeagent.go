// Package nodeagent is the suite's way onto an existing cluster's nodes: a
// DaemonSet of the suite's own image (`conformance node wait`) in the
// node's network namespace (hostNetwork), which the suite asks for one
// observation at a time through pods/exec (`conformance node observe`).
// The observations are framework/nodenet's, the code the suite runs in a
// node it enters: one implementation, run where the node is.
//
//	suite ──pods/exec──▶ apiserver ──▶ kubelet on worker-1
//	                                     └─ vcf-node-agent pod (hostNetwork)
//	                                          conformance node observe links
//	                                          └─ netlink in worker-1's own netns
package nodeagent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/nodenet"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/kube"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/wait"
	"github.com/cozystack/vlan-conformance/framework/probe"
)

// Name is the agent's namespace, DaemonSet and container; a run deletes
// the namespace at its end, and the next run's sweep one a killed run left
// (it carries kube.OwnedLabel).
const Name = "vcf-node-agent"

// binary is the driver's path in the suite's image (images/conformance).
const binary = "/conformance"

// Render is the agent's namespace and DaemonSet, running image on every
// node. Pod security: the namespace admits privileged pods (hostNetwork is
// not in the baseline profile Talos enforces by default). The container
// drops every capability but NET_RAW (its captures' AF_PACKET sockets,
// its pings' raw ICMP socket) and NET_ADMIN (deleting the bridge a spec's
// NAD made the bridge plugin create, VLAN-14's); what it reads needs none
// (netlink dumps of links, addresses, routes and br100's FDB,
// ETHTOOL_GDRVINFO). It runs as root because Kubernetes gives an added
// capability to root only.
func Render(image string) (*corev1.Namespace, *appsv1.DaemonSet) {
	labels := map[string]string{"app.kubernetes.io/name": Name}
	ns := kube.RenderNamespace(Name)
	ns.Labels["pod-security.kubernetes.io/enforce"] = "privileged"
	no, yes, root := false, true, int64(0)
	grace := int64(1)
	ds := &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: Name, Namespace: Name, Labels: kube.Owned()},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					HostNetwork:                   true,
					AutomountServiceAccountToken:  &no,
					TerminationGracePeriodSeconds: &grace,
					Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{
						Name:            Name,
						Image:           image,
						ImagePullPolicy: corev1.PullIfNotPresent,
						Command:         []string{binary, "node", "wait"},
						SecurityContext: &corev1.SecurityContext{
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"NET_RAW", "NET_ADMIN"}},
							RunAsUser:                &root,
							ReadOnlyRootFilesystem:   &yes,
							AllowPrivilegeEscalation: &no,
						},
					}},
				},
			},
		},
	}
	return ns, ds
}

// Deploy creates the agent's namespace and DaemonSet. A namespace of that
// name still terminating (the sweep of one a killed run left) is waited
// out first.
func Deploy(ctx context.Context, k *kube.Clients, image string) error {
	ns, ds := Render(image)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute) // a namespace's pods take their grace period to go
	defer cancel()
	for {
		_, err := k.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
		if err == nil {
			break
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("namespace %s: %w", Name, err)
		}
		if err := Remove(ctx, k); err != nil {
			return fmt.Errorf("namespace %s, left by an earlier run: %w", Name, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace %s, left by an earlier run, is still terminating: %w", Name, context.Cause(ctx))
		case <-time.After(time.Second):
		}
	}
	if _, err := k.Kube.AppsV1().DaemonSets(Name).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("DaemonSet %s/%s: %w", Name, Name, err)
	}
	return nil
}

// Remove deletes the agent's namespace, the DaemonSet with it.
func Remove(ctx context.Context, k *kube.Clients) error {
	err := k.Kube.CoreV1().Namespaces().Delete(ctx, Name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// Pods are the agent's ready pods, by the node they run on, and what keeps
// each of the others from being ready.
func Pods(ctx context.Context, k *kube.Clients) (ready map[string]string, notReady map[string]string, err error) {
	list, err := k.Kube.CoreV1().Pods(Name).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + Name})
	if err != nil {
		return nil, nil, err
	}
	ready, notReady = map[string]string{}, map[string]string{}
	for _, p := range list.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		if why := unready(p); why != "" {
			notReady[p.Spec.NodeName] = p.Name + ": " + why
			continue
		}
		ready[p.Spec.NodeName] = p.Name
	}
	return ready, notReady, nil
}

// unready is why the pod is not ready ("" when it is): its container's
// waiting reason or last exit, else its phase.
func unready(p corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.Status.Phase == corev1.PodRunning {
			return ""
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		switch {
		case cs.State.Waiting != nil && cs.LastTerminationState.Terminated != nil:
			t := cs.LastTerminationState.Terminated
			return fmt.Sprintf("%s, last exit %d (%s) after %d restarts", cs.State.Waiting.Reason, t.ExitCode, t.Reason, cs.RestartCount)
		case cs.State.Waiting != nil:
			return cs.State.Waiting.Reason + " " + cs.State.Waiting.Message
		case cs.State.Terminated != nil:
			return fmt.Sprintf("exited %d (%s)", cs.State.Terminated.ExitCode, cs.State.Terminated.Reason)
		}
	}
	return string(p.Status.Phase)
}

// ReadyStage waits until every one of nodes runs a ready agent pod (nodes
// is read when it checks: the plan lists the nodes before this stage).
func ReadyStage(k *kube.Clients, nodes func() []string, timeout time.Duration) wait.Stage {
	return wait.Stage{Name: "node-agent", What: "a ready " + Name + " pod on every VLAN node", Timeout: timeout, Check: func(ctx context.Context) (bool, string, error) {
		ready, notReady, err := Pods(ctx, k)
		switch {
		case apierrors.IsForbidden(err):
			return false, "", fmt.Errorf("listing the agent's pods: %w", err)
		case err != nil:
			return false, "", nil // the status stays the last real reading
		}
		var missing []string
		all := nodes()
		for _, n := range all {
			if _, ok := ready[n]; !ok {
				why := notReady[n]
				if why == "" {
					why = "no pod yet"
				}
				missing = append(missing, n+" ("+why+")")
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			return false, fmt.Sprintf("%d/%d nodes with a ready agent; without: %s", len(all)-len(missing), len(all), strings.Join(missing, "; ")), nil
		}
		return true, fmt.Sprintf("%d/%d nodes with a ready agent", len(all), len(all)), nil
	}}
}

// Pod is the agent on one node: nodenet's Agent, through pods/exec.
type Pod struct {
	Kube *kube.Clients
	Name string
}

var _ nodenet.Agent = Pod{}

// Observe runs `conformance node observe` in the agent's container and
// returns what it printed; its stderr is the error when it fails.
func (p Pod) Observe(ctx context.Context, o nodenet.Observation) ([]byte, error) {
	req, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	cmd := []string{binary, "node", "observe", string(req)}
	var stdout, stderr bytes.Buffer
	if err := p.Kube.Exec(ctx, Name, p.Name, Name, cmd, nil, &stdout, &stderr); err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return nil, fmt.Errorf("%s in pod %s/%s: %s (%w)", strings.Join(cmd, " "), Name, p.Name, msg, err)
		}
		return nil, fmt.Errorf("%s in pod %s/%s: %w", strings.Join(cmd, " "), Name, p.Name, err)
	}
	return stdout.Bytes(), nil
}

var (
	_ evidence.Tap   = Pod{}
	_ nodenet.Server = Pod{}
)

// Tap captures on the node's iface with `conformance node capture`, the
// suite's own capture run in the agent: it returns once the agent's socket
// is bound, and stop closes the agent's stdin and reads the pcap it then
// writes.
func (p Pod) Tap(ctx context.Context, iface string) (func() (evidence.Frames, error), error) {
	s, err := p.start(ctx, []string{binary, "node", "capture", "--iface=" + iface}, nodenet.Capturing)
	if err != nil {
		return nil, err
	}
	return func() (evidence.Frames, error) {
		if err := s.end(); err != nil {
			return nil, err
		}
		return evidence.ReadPcap(strings.NewReader(s.stdout.String()))
	}, nil
}

// MTU is iface's MTU as the agent reads the node's links.
func (p Pod) MTU(iface string) (int, error) {
	out, err := p.Observe(context.Background(), nodenet.Observation{What: "links"})
	if err != nil {
		return 0, err
	}
	var links map[string]evidence.Link
	if err := json.Unmarshal(out, &links); err != nil {
		return 0, err
	}
	l, ok := links[iface]
	if !ok {
		return 0, fmt.Errorf("no link %s on the node", iface)
	}
	return l.MTU, nil
}

// Serve offers a TCP service on the node's addr with `conformance node
// serve`, the suite's own service run in the agent.
func (p Pod) Serve(ctx context.Context, addr netip.Addr) (probe.Service, error) {
	s, err := p.start(ctx, []string{binary, "node", "serve", "--addr=" + addr.String()}, nodenet.Serving)
	if err != nil {
		return nil, err
	}
	at, err := netip.ParseAddrPort(strings.TrimPrefix(s.stderr.first(), nodenet.Serving))
	if err != nil {
		s.end()
		return nil, s.fail(fmt.Errorf("its address: %w", err))
	}
	return &service{session: s, addr: at}, nil
}

// service is the agent's TCP service as the suite sees it.
type service struct {
	*session
	addr netip.AddrPort
}

func (v *service) Addr() netip.AddrPort { return v.addr }
func (v *service) Close() error         { return v.end() }

// Accepted are the peers the agent printed so far.
func (v *service) Accepted() []netip.AddrPort {
	var out []netip.AddrPort
	for _, l := range strings.Split(v.stdout.String(), "\n") {
		if a, err := netip.ParseAddrPort(strings.TrimSpace(l)); err == nil {
			out = append(out, a)
		}
	}
	return out
}

// session is an agent command that runs until the suite closes its stdin.
type session struct {
	pod    Pod
	cmd    []string
	feed   *io.PipeWriter
	stdout lines
	stderr lines
	ended  chan error
	once   sync.Once
	err    error
}

// start runs cmd in the pod and returns once it says ready (a line of its
// stderr starting so).
func (p Pod) start(ctx context.Context, cmd []string, ready string) (*session, error) {
	stdin, feed := io.Pipe()
	s := &session{pod: p, cmd: cmd, feed: feed, ended: make(chan error, 1)}
	s.stderr.watch(ready)
	// It outlives the spec's context (its cleanup stops it): closing its
	// stdin ends it, and the agent's own bound a session never closed.
	ctx = context.WithoutCancel(ctx)
	go func() { s.ended <- p.Kube.Exec(ctx, Name, p.Name, Name, cmd, stdin, &s.stdout, &s.stderr) }()
	select {
	case <-s.stderr.seen:
		return s, nil
	case err := <-s.ended:
		return nil, s.fail(fmt.Errorf("ended before it was ready: %v", err))
	case <-time.After(readyWithin):
		feed.Close()
		return nil, s.fail(fmt.Errorf("not ready after %s", readyWithin))
	}
}

// end closes the command's stdin and waits for it to exit.
func (s *session) end() error {
	s.once.Do(func() {
		s.feed.Close()
		if err := <-s.ended; err != nil {
			s.err = s.fail(err)
		}
	})
	return s.err
}

func (s *session) fail(err error) error {
	return fmt.Errorf("%s in pod %s/%s: %s (%w)", strings.Join(s.cmd, " "), Name, s.pod.Name, strings.TrimSpace(s.stderr.String()), err)
}

// readyWithin bounds how long the agent may take to start a capture or a
// service.
const readyWithin = 30 * time.Second

// lines keeps what a stream writes; seen closes once a line starts with
// the watched prefix, and first is that line.
type lines struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	prefix string
	line   string
	seen   chan struct{}
}

func (l *lines) watch(prefix string) { l.prefix, l.seen = prefix, make(chan struct{}) }

func (l *lines) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(b)
	if l.seen != nil && l.line == "" {
		complete := strings.Split(l.buf.String(), "\n")
		for _, s := range complete[:len(complete)-1] { // the last is unfinished
			if strings.HasPrefix(s, l.prefix) {
				l.line = s
				close(l.seen)
				break
			}
		}
	}
	return len(b), nil
}

// first is the watched line.
func (l *lines) first() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.line
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Dump writes what the agent observes of its node (every read-only
// observation but the driver, each as the agent prints it) into file, for
// a failed spec, and says what it wrote.
func Dump(ctx context.Context, a nodenet.Agent, file string) string {
	var b bytes.Buffer
	for _, what := range []string{"links", "routes", "bridges", "fdb"} {
		out, err := a.Observe(ctx, nodenet.Observation{What: what})
		if err != nil {
			out, _ = json.Marshal(map[string]string{"error": err.Error()})
		}
		fmt.Fprintf(&b, "{%q: %s}\n", what, bytes.TrimSpace(out))
	}
	if err := os.WriteFile(file, b.Bytes(), 0o644); err != nil {
		return err.Error()
	}
	return filepath.Base(file) + " (links, routes, bridges, br100's FDB through its agent)"
}
