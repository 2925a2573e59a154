package cluster

import (
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

func newDiscovery(cfg *rest.Config) (discovery.DiscoveryInterface, error) {
	return discovery.NewDiscoveryClientForConfig(cfg)
}
