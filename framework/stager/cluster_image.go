package stager

import (
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/cozystack/vlan-conformance/framework/image"
	"github.com/google/go-containerregistry/pkg/name"
)

// The cluster tier's image (--cni-plugins-image) is the same half of the
// subject as --stager-image: what the init container sees at /cni-plugins.
// It runs from a registry reference, so the suite can read it only where it
// has its layers: a docker-archive given with --images-archive that carries
// that reference. There it is read exactly as --stager-image is (layers
// applied in order) and judged the same way.

// ClusterImage finds ref among the docker-archives and reads its
// /cni-plugins. found is false when no archive carries ref (the image then
// comes from a registry the suite does not read); an image that carries no
// /cni-plugins is an error.
func ClusterImage(ref string, archives []string) (info ImageInfo, found bool, err error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return info, false, fmt.Errorf("%q: %w", ref, err)
	}
	want, ok := r.(name.Tag)
	if !ok {
		return info, false, nil // by digest: archives carry tags only
	}
	for _, a := range archives {
		tags, err := archiveTags(a)
		if err != nil {
			return info, false, err
		}
		for _, t := range tags {
			if tt, err := name.NewTag(t); err != nil || tt.Name() != want.Name() {
				continue
			}
			info, err = archiveImage(a, want, ref)
			return info, true, err
		}
	}
	return info, false, nil
}

// CheckClusterImage is ClusterImage for the flags' validation: nil when
// the image is not in an archive or carries /cni-plugins.
func CheckClusterImage(ref string, archives []string) error {
	if ref == "" {
		return nil
	}
	if _, _, err := ClusterImage(ref, archives); err != nil {
		return fmt.Errorf("--cni-plugins-image: %w", err)
	}
	return nil
}

func archiveImage(archive string, tag name.Tag, ref string) (ImageInfo, error) {
	info := ImageInfo{Ref: ref, Source: archive + " (" + ref + ")"}
	rc, err := image.TaggedFileSystem(archive, tag)
	if err != nil {
		return info, err
	}
	defer rc.Close()
	dir, err := os.MkdirTemp("", "stager-cluster-image-*")
	if err != nil {
		return info, err
	}
	defer os.RemoveAll(dir)
	payload := dir + "/" + PluginsDir
	found, err := image.CopyDir(rc, PluginsDir, payload)
	if err != nil {
		return info, fmt.Errorf("%s (%s): %w", archive, ref, err)
	}
	if !found {
		return info, fmt.Errorf("%s in %s: the image's file system has no /%s/ directory", ref, archive, PluginsDir)
	}
	info.Entries, err = listImage(payload)
	return info, err
}

// archiveTags lists the tags of a docker-archive's manifest.json.
func archiveTags(p string) ([]string, error) {
	tags, err := image.DockerTags(p)
	if err != nil {
		return nil, fmt.Errorf("%s: read as a docker-archive: %w", p, err)
	}
	return slices.Sorted(maps.Keys(tags)), nil
}
