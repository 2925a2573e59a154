package kind

import (
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"
)

// holds tells whether a node's containerd already has every image, by tag
// and ID: importing the archive again would change nothing.
func holds(n nodes.Node, images map[string]string) bool {
	if len(images) == 0 {
		return false
	}
	for tag, id := range images {
		if id == "" {
			return false
		}
		got, err := nodeutils.ImageID(n, tag)
		if err != nil || got != id {
			return false
		}
	}
	return true
}
