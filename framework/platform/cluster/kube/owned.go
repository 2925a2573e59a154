package kube

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/vm"
)

// OwnedLabel marks every object the suite creates, so it deletes exactly
// those afterwards (and a later run sweeps what a killed one left).
const OwnedLabel = "vlan-conformance.cozystack.io/owned"

// Owned is the label set of an object the suite creates.
func Owned() map[string]string { return map[string]string{OwnedLabel: "true"} }

// RenderNamespace is a tenant namespace the suite makes.
func RenderNamespace(name string) *corev1.Namespace {
	return vm.Namespace(name, vm.Labeled(Owned()))
}

// RenderNAD is a NetworkAttachmentDefinition the suite makes.
func RenderNAD(namespace string, nad platform.NAD) *nadv1.NetworkAttachmentDefinition {
	return vm.NAD(nad.Name, namespace, nad.Config, vm.Labeled(Owned()))
}

// Owner records what a run made: whole namespaces, and single objects in
// namespaces it found (those it must delete one by one).
type Owner struct {
	mu         sync.Mutex
	namespaces map[string]bool
	created    []*unstructured.Unstructured
}

// EnsureNamespace creates a tenant namespace unless it exists. One still
// terminating is waited out first, then made afresh: on a kept cluster a
// run right after another found the last one's tenant-arp terminating,
// and every object it then applied there was forbidden.
func (o *Owner) EnsureNamespace(ctx context.Context, kube *Clients, name string) error {
	ctx, cancel := context.WithTimeout(ctx, namespaceGoneWithin)
	defer cancel()
	for {
		_, err := kube.Kube.CoreV1().Namespaces().Create(ctx, RenderNamespace(name), metav1.CreateOptions{})
		switch {
		case err == nil:
			o.mu.Lock()
			if o.namespaces == nil {
				o.namespaces = map[string]bool{}
			}
			o.namespaces[name] = true
			o.mu.Unlock()
			return nil
		case !apierrors.IsAlreadyExists(err):
			return err
		}
		ns, err := kube.Kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			continue // gone between the two calls
		case err != nil:
			return err
		case ns.DeletionTimestamp == nil && ns.Status.Phase != corev1.NamespaceTerminating:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace %s is still terminating (an earlier run's): %w", name, context.Cause(ctx))
		case <-time.After(namespaceGonePoll):
		}
	}
}

// SweepNamespaces deletes the tenant namespaces a killed run left behind
// (labelled OwnedLabel and not terminating), their VMs with them, before
// this run makes any: a run stopped before its Close (SIGKILL, a third
// Ctrl-C) leaves them, and EnsureNamespace would otherwise take one as
// found and run the next specs beside the old run's VMs. It does not wait:
// EnsureNamespace waits out one this run needs again. One run at a time
// per cluster: another run's namespaces carry the same label.
func SweepNamespaces(ctx context.Context, kube *Clients) ([]string, error) {
	list, err := kube.Kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: OwnedLabel + "=true"})
	if err != nil {
		return nil, fmt.Errorf("listing the namespaces labelled %s: %w", OwnedLabel, err)
	}
	var swept []string
	for _, ns := range list.Items {
		if ns.DeletionTimestamp != nil || ns.Status.Phase == corev1.NamespaceTerminating {
			continue
		}
		err := kube.Kube.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return swept, fmt.Errorf("deleting namespace %s, left by an earlier run: %w", ns.Name, err)
		}
		swept = append(swept, ns.Name)
	}
	sort.Strings(swept)
	return swept, nil
}

// namespaceGonePoll is how often EnsureNamespace looks whether a
// terminating namespace is gone, and namespaceGoneWithin how long it waits
// (a namespace's VMs take their grace period, 30 s, to go).
var (
	namespaceGonePoll   = time.Second
	namespaceGoneWithin = 5 * time.Minute
)

// Record remembers an object made in a namespace this run did not make.
func (o *Owner) Record(namespace string, obj any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.namespaces[namespace] {
		return
	}
	if u, err := ToUnstructured(obj); err == nil {
		o.created = append(o.created, u)
	}
}

// Drain hands over what was recorded (objects in the order made,
// namespaces sorted) and forgets it.
func (o *Owner) Drain() (created []*unstructured.Unstructured, namespaces []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for ns := range o.namespaces {
		namespaces = append(namespaces, ns)
	}
	sort.Strings(namespaces)
	created = o.created
	o.created, o.namespaces = nil, nil
	return created, namespaces
}
