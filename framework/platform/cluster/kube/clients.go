// Package kube is the API server as every part of the cluster tier talks
// to it: typed clients, server-side apply of manifests and typed objects,
// and the record of what a run made (so it deletes exactly that).
package kube

import (
	"context"
	"fmt"

	nadclient "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/clientset/versioned"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"kubevirt.io/client-go/kubevirt"

	"github.com/cozystack/vlan-conformance/framework/config"
)

// Clients are the API clients the parts share. They are made empty with
// the platform and filled by Connect once the plan reaches a cluster, so
// every part can hold the same pointer from the start.
type Clients struct {
	Kubeconfig string
	Rest       *rest.Config
	Kube       kubernetes.Interface
	KubeVirt   kubevirt.Interface
	NAD        nadclient.Interface
	Apply      *Applier
	// Raw GETs an API path (objects no typed client here covers, such as
	// an APIService); unit tests give it canned bodies.
	Raw func(ctx context.Context, path string) ([]byte, error)
}

// Connect fills the clients from a kubeconfig, or from the pod's service
// account for config.InCluster.
func (c *Clients) Connect(kubeconfig string) error {
	c.Kubeconfig = kubeconfig // kept even if the rest fails: Close deletes a kind cluster by it
	var rc *rest.Config
	var err error
	if kubeconfig == config.InCluster {
		rc, err = rest.InClusterConfig()
	} else {
		rc, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	rc.QPS, rc.Burst = 50, 100
	c.Rest = rc
	if c.Kube, err = kubernetes.NewForConfig(rc); err != nil {
		return err
	}
	if c.KubeVirt, err = kubevirt.NewForConfig(rc); err != nil {
		return err
	}
	if c.NAD, err = nadclient.NewForConfig(rc); err != nil {
		return err
	}
	c.Raw = func(ctx context.Context, path string) ([]byte, error) {
		return c.Kube.Discovery().RESTClient().Get().AbsPath(path).DoRaw(ctx)
	}
	c.Apply, err = newApplier(rc)
	return err
}

// Connected reports whether Connect has run.
func (c *Clients) Connected() bool { return c.Kube != nil }
