package image

import (
	"io"
	"os"
	"path"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

var hex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// DockerTags are the images a docker-archive tarball holds, each tag with
// its image ID ("sha256:" and its config's digest), read off the archive's
// manifest.json alone. A config named in a form it cannot read gives no
// ID ("").
func DockerTags(file string) (map[string]string, error) {
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

// Label reads a label of the image ref from the first docker-archive that
// carries it ("" when none does, or it has no such label).
func Label(ref string, archives []string, key string) string {
	tag, err := name.NewTag(ref)
	if err != nil {
		return ""
	}
	for _, a := range archives {
		img, err := tarball.ImageFromPath(a, &tag)
		if err != nil {
			continue
		}
		if cf, err := img.ConfigFile(); err == nil {
			return cf.Config.Labels[key]
		}
	}
	return ""
}
