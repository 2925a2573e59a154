// Package kindconfig carries the kind cluster configurations into the
// compiled suite: cluster.yaml (the default: a control plane and two
// workers, kind's default CNI) and offline.yaml (no default CNI, for
// locally built node images).
package kindconfig

import (
	"embed"
	"fmt"
)

//go:embed *.yaml
var files embed.FS

// Get returns a configuration by file name ("cluster.yaml", "offline.yaml").
func Get(name string) ([]byte, error) {
	b, err := files.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("kind-config: no %s", name)
	}
	return b, nil
}

// Default is cluster.yaml.
func Default() []byte {
	b, err := Get("cluster.yaml")
	if err != nil {
		panic(err) // embedded above
	}
	return b
}
