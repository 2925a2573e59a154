package subject

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/cozystack/vlan-conformance/framework/cozystack"
	"github.com/cozystack/vlan-conformance/framework/image"
	"github.com/cozystack/vlan-conformance/framework/stager"
)

// readArchives reads each --image-archive and finds the image of the
// release it holds by digest (image.Archive.Pin); an archive that holds
// none is bad input naming both.
func (s *Subject) readArchives(paths []string) error {
	var refs []string
	for _, im := range s.Images {
		if !slices.Contains(refs, im.Ref) {
			refs = append(refs, im.Ref)
		}
	}
	var errs []error
	for _, p := range paths {
		a, err := image.ReadArchive(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("--image-archive: %w", err))
			continue
		}
		var pinned *image.Pinned
		var misses []error
		for _, ref := range refs {
			if pinned, err = a.Pin(ref); err == nil {
				break
			}
			misses = append(misses, err)
		}
		switch {
		case pinned == nil && len(refs) == 0:
			errs = append(errs, fmt.Errorf("--image-archive %s: the release's %s renders no image to check it against", p, cozystack.MultusChart))
		case pinned == nil:
			errs = append(errs, fmt.Errorf("--image-archive: %w", errors.Join(misses...)))
		case slices.ContainsFunc(s.Pinned, func(o *image.Pinned) bool { return o.Ref == pinned.Ref }):
			errs = append(errs, fmt.Errorf("--image-archive %s: another archive already holds %s", p, pinned.Ref))
		default:
			s.Pinned = append(s.Pinned, pinned)
		}
	}
	return errors.Join(errs...)
}

// checkMirrors refuses a mirror of a registry the release pins nothing
// on: a typo would otherwise pull from the pin's own registry unnoticed.
func (s *Subject) checkMirrors(mirrors []image.Mirror) error {
	var hosts []string
	for _, im := range s.Images {
		if d, err := name.NewDigest(im.Ref); err == nil && !slices.Contains(hosts, d.RegistryStr()) {
			hosts = append(hosts, d.RegistryStr())
		}
	}
	var errs []error
	for _, m := range mirrors {
		if !slices.Contains(hosts, m.Host) {
			errs = append(errs, fmt.Errorf("--registry-mirror %q: the release's %s pins no image on %s (it pins on %s)", m.Flag, cozystack.MultusChart, m.Host, strings.Join(hosts, ", ")))
		}
	}
	return errors.Join(errs...)
}

// pullPinned pulls the image the stager specs run into cache, unless an
// archive holds it or the release does not stage (no stager specs run),
// and adds it as an --image-archive is added.
func (s *Subject) pullPinned(mirrors []image.Mirror, cache string) error {
	im, ok := s.StagerImageRef()
	if !ok || !s.Stages() || s.PinnedFor(im) != nil {
		return nil
	}
	p, err := image.Pull(im.Ref, mirrors, cache)
	if err != nil {
		return fmt.Errorf("--pull-pinned: %w", err)
	}
	s.Pinned = append(s.Pinned, p)
	return nil
}

// PinnedFor is the --image-archive that holds the image the release pins
// for the container im, nil when none does.
func (s *Subject) PinnedFor(im cozystack.ImageRef) *image.Pinned {
	for _, p := range s.Pinned {
		if p.Ref == im.Ref {
			return p
		}
	}
	return nil
}

// StagerImageRef is the release's install-cni-plugins container, and
// whether it renders one.
func (s *Subject) StagerImageRef() (cozystack.ImageRef, bool) {
	for _, im := range s.Images {
		if im.Field == "initContainer" && im.Name == stager.InitContainerName {
			return im, true
		}
	}
	return cozystack.ImageRef{}, false
}

// StagerPinned is the release's own image for install-cni-plugins, read
// from the --image-archive that holds it: the stager specs run it
// unchanged. nil without one, or without a release.
func (s *Subject) StagerPinned() *image.Pinned {
	if s == nil {
		return nil
	}
	if im, ok := s.StagerImageRef(); ok {
		return s.PinnedFor(im)
	}
	return nil
}
