package kind

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"

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

// digestRefs gives each tag of images on the node the reference a pull
// would have recorded, <repository>@<digest>: kubelet reports a container's
// image by it, and KubeVirt starts a live migration's target pod from the
// digest of the container disk its source pod runs. Imported from an
// archive, the image has its tag only, so the target's kubelet would go to
// a registry for it (seen: localhost/vcf/guest-debian@sha256:… ErrImagePull,
// the migration Scheduling for good). One exec per node; a reference that
// exists is left alone.
func digestRefs(n nodes.Node, images map[string]string) error {
	var script strings.Builder
	for _, tag := range slices.Sorted(maps.Keys(images)) {
		repo := tag
		if i := strings.LastIndex(tag, ":"); i > strings.LastIndex(tag, "/") {
			repo = tag[:i]
		}
		fmt.Fprintf(&script, "d=$(ctr -n k8s.io images ls %q | awk 'NR==2 {print $3}')\n", "name=="+tag)
		fmt.Fprintf(&script, "[ -n \"$d\" ] || { echo %q >&2; exit 1; }\n", "no image "+tag)
		fmt.Fprintf(&script, "ctr -n k8s.io images ls -q \"name==%s@$d\" | grep -q . || ctr -n k8s.io images tag %q \"%s@$d\" >/dev/null\n", repo, tag, repo)
	}
	var out bytes.Buffer
	if err := n.Command("sh", "-ec", script.String()).SetStdout(&out).SetStderr(&out).Run(); err != nil {
		return fmt.Errorf("node %s: digest references of %s: %w: %s", n.String(), strings.Join(slices.Sorted(maps.Keys(images)), ", "), err, bytes.TrimSpace(out.Bytes()))
	}
	return nil
}
