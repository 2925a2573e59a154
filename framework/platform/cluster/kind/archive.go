package kind

import (
	"io"
	"os"
	"path"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"
)

var hex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// archiveImages are the images a docker-archive tarball holds, each tag
// with its image ID ("sha256:" and its config's digest), read off the
// archive's manifest.json. A config named in a form it cannot read gives
// no ID: that image always loads.
func archiveImages(file string) (map[string]string, error) {
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(file) })
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, d := range m {
		// docker save names it <hex>.json or blobs/sha256/<hex>;
		// go-containerregistry sha256:<hex>.
		h := strings.TrimPrefix(strings.TrimSuffix(path.Base(d.Config), ".json"), "sha256:")
		id := ""
		if hex64.MatchString(h) {
			id = "sha256:" + h
		}
		for _, t := range d.RepoTags {
			out[t] = id
		}
	}
	return out, nil
}

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
