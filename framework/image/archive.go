package image

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// A release pins its images by digest (name:tag@sha256:...). An air-gapped
// mirror holds them as archives (--image-archive); which digest an archive
// keeps depends on its form:
//
//	OCI layout, oci-archive        index.json names the manifests and
//	(skopeo, crane, buildx)         indexes as the registry served them:
//	                                the pin's digest, exactly
//	docker save, containerd store   the same OCI index beside manifest.json
//	(Docker 25+)
//	docker save, classic store      manifest.json only, or an index.json of a
//	                                manifest written afresh: the registry's
//	                                manifest is gone; only the config (the
//	                                image ID) and the layers, uncompressed
//
// A pin names a manifest or an index, never a config, so the last form
// cannot be checked against it without the registry: it is refused, saying
// so, not matched on its image ID.

// Archive is an image archive and the digests it keeps.
type Archive struct {
	Path   string
	Format string // "OCI layout", "oci-archive", "docker-archive", "docker-archive with an OCI index"
	// Manifests are the manifests and indexes its OCI index names, nested
	// indexes' children included, each digest computed from its bytes.
	Manifests []ArchiveManifest
	// Configs are the config digests (image IDs) of a docker-archive's
	// images, read off manifest.json.
	Configs []string
}

// ArchiveManifest is one manifest or index an archive's OCI index names.
type ArchiveManifest struct {
	Digest   string
	Index    bool   // an index (a multi-platform image), not an image manifest
	Platform string // "linux/amd64", when its index says
	// Absent: named by an index the archive holds, but not in it (a mirror
	// of one platform keeps the index and that platform's image only).
	Absent bool
	In     string // the digest of the index that names it; "" for index.json
}

// smallBlob is the largest blob ReadArchive unpacks: manifests, indexes
// and configs are kilobytes; layers are not needed for their digests.
const smallBlob = 4 << 20

// ReadArchive reads an image archive: an OCI layout directory, an
// oci-archive tarball, or a `docker save` tarball. It computes the digest
// of every manifest and index its OCI index names (a digest that does not
// match its bytes is an error) and the image ID of each docker-archive
// image. It writes nothing but a temporary directory it removes.
func ReadArchive(p string) (*Archive, error) {
	a := &Archive{Path: p}
	if IsLayout(p) {
		a.Format = "OCI layout"
		return a, a.readLayout(p)
	}
	if fi, err := os.Stat(p); err != nil {
		return nil, err
	} else if fi.IsDir() {
		return nil, fmt.Errorf("%s: a directory without oci-layout and index.json: not an OCI layout", p)
	}
	names, err := topNames(p)
	if err != nil {
		return nil, err
	}
	if !names["oci-layout"] && !names["manifest.json"] {
		return nil, fmt.Errorf("%s: not an image archive: no oci-layout and index.json (OCI layout, oci-archive) and no manifest.json (docker save)", p)
	}
	if names["manifest.json"] {
		a.Format = "docker-archive"
		if err := a.readDockerConfigs(); err != nil {
			return nil, err
		}
	}
	if names["oci-layout"] {
		a.Format = map[bool]string{true: "docker-archive with an OCI index", false: "oci-archive"}[names["manifest.json"]]
		dir, err := unpackLayout(p, func(h *tar.Header) bool { return h.Size <= smallBlob })
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		defer os.RemoveAll(dir)
		if err := a.readLayout(dir); err != nil {
			return nil, err
		}
	}
	return a, nil
}

func (a *Archive) readLayout(dir string) error {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return fmt.Errorf("%s: read as an OCI layout: %w", a.Path, err)
	}
	if err := a.walk(idx, ""); err != nil {
		return fmt.Errorf("%s: %w", a.Path, err)
	}
	return nil
}

// walk records every manifest and index idx (of digest in) names, and theirs.
func (a *Archive) walk(idx v1.ImageIndex, in string) error {
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for _, d := range im.Manifests {
		m := ArchiveManifest{Digest: d.Digest.String(), Index: d.MediaType.IsIndex(), In: in}
		if d.Platform != nil {
			m.Platform = d.Platform.OS + "/" + d.Platform.Architecture
		}
		var got v1.Hash
		var child v1.ImageIndex
		switch {
		case m.Index:
			if child, err = idx.ImageIndex(d.Digest); err == nil {
				got, err = child.Digest()
			}
		case d.MediaType.IsImage():
			var img v1.Image
			if img, err = idx.Image(d.Digest); err == nil {
				got, err = img.Digest()
			}
		default:
			continue // attestations, signatures: not images
		}
		switch {
		case errors.Is(err, fs.ErrNotExist):
			m.Absent = true
		case err != nil:
			return fmt.Errorf("%s: %w", d.Digest, err)
		case got != d.Digest:
			return fmt.Errorf("its index names %s, whose bytes hash to %s: a corrupt archive", d.Digest, got)
		}
		a.Manifests = append(a.Manifests, m)
		if child != nil && !m.Absent {
			if err := a.walk(child, m.Digest); err != nil {
				return err
			}
		}
	}
	return nil
}

// readDockerConfigs computes the image ID of each image of manifest.json.
func (a *Archive) readDockerConfigs() error {
	m, err := tarball.LoadManifest(func() (rc io.ReadCloser, err error) { return os.Open(a.Path) })
	if err != nil {
		return fmt.Errorf("%s: read as a docker-archive: %w", a.Path, err)
	}
	for _, d := range m {
		var tag *name.Tag
		if len(d.RepoTags) > 0 {
			if t, err := name.NewTag(d.RepoTags[0]); err == nil {
				tag = &t
			}
		}
		img, err := tarball.ImageFromPath(a.Path, tag)
		if err != nil {
			return fmt.Errorf("%s: read as a docker-archive: %w", a.Path, err)
		}
		id, err := img.ConfigName()
		if err != nil {
			return fmt.Errorf("%s: %w", a.Path, err)
		}
		a.Configs = append(a.Configs, id.String())
	}
	return nil
}

// held is the manifest or index of digest the archive holds, if any.
func (a *Archive) held(digest string) (ArchiveManifest, bool) {
	for _, m := range a.Manifests {
		if m.Digest == digest && !m.Absent {
			return m, true
		}
	}
	return ArchiveManifest{}, false
}

// Holds lists what the archive keeps, for errors: its digests, its image IDs.
func (a *Archive) Holds() string {
	var ds []string
	for _, m := range a.Manifests {
		what := "manifest"
		if m.Index {
			what = "index"
		}
		if m.Platform != "" {
			what += " " + m.Platform
		}
		if m.Absent {
			what += ", named but not in it"
		}
		ds = append(ds, fmt.Sprintf("%s (%s)", m.Digest, what))
	}
	for _, c := range a.Configs {
		ds = append(ds, fmt.Sprintf("image ID %s (its config)", c))
	}
	if len(ds) == 0 {
		return "no image"
	}
	return strings.Join(ds, ", ")
}

// Pinned is an image a release pins, read from the archive that holds it.
type Pinned struct {
	Ref     string // as the release pins it: name:tag@sha256:...
	Archive string
	Format  string // the archive's (Archive.Format)
	Digest  string // the pin's, which the archive holds exactly
	// Compared says what matched the pin: its manifest digest, or its
	// index digest (and which platform's image of it runs).
	Compared string
	// Pulled is the reference it was pulled from (--pull-pinned; Pull),
	// with the mirror that served it; "" for an --image-archive.
	Pulled string
}

// Flag is the flag the image came by: --image-archive or --pull-pinned.
func (p *Pinned) Flag() string {
	if p.Pulled != "" {
		return "--pull-pinned"
	}
	return "--image-archive"
}

// Describe is the archive as the report names it: for a pulled image,
// where from and the layout it is kept in.
func (p *Pinned) Describe() string {
	if p.Pulled != "" {
		return fmt.Sprintf("%s, kept as the %s %s (its %s is the pin's)", p.Pulled, p.Format, p.Archive, p.Compared)
	}
	return fmt.Sprintf("%s (%s; its %s is the pin's)", p.Archive, p.Format, p.Compared)
}

// Source is where the image came from, as the report names it:
// "--image-archive FILE (...)" or "--pull-pinned: pulled from REF ...".
func (p *Pinned) Source() string {
	if p.Pulled != "" {
		return "--pull-pinned: pulled from " + p.Describe()
	}
	return "--image-archive " + p.Describe()
}

// Pin checks that the archive holds the image ref pins by digest, and
// returns it. Not holding it is an error naming both: what the archive
// holds and what the release pins.
func (a *Archive) Pin(ref string) (*Pinned, error) {
	d, err := name.NewDigest(ref)
	if err != nil {
		return nil, fmt.Errorf("the release pins %s by no digest: nothing to check %s against", ref, a.Path)
	}
	m, ok := a.held(d.DigestStr())
	if !ok {
		return nil, a.notHeld(ref)
	}
	p := &Pinned{Ref: ref, Archive: a.Path, Format: a.Format, Digest: m.Digest, Compared: "manifest digest " + m.Digest}
	if m.Index {
		// The lab runs the image of its own platform (platformImage).
		img, ok := a.platformOf(m.Digest)
		if !ok {
			return nil, fmt.Errorf("%s holds the index %s the release pins (%s), but no linux/%s image of it", a.Path, m.Digest, ref, runtime.GOARCH)
		}
		p.Compared = fmt.Sprintf("index digest %s (its %s image %s runs here)", m.Digest, img.Platform, img.Digest)
	}
	return p, nil
}

// platformOf is the image of this machine's platform that the index
// digest names and the archive holds.
func (a *Archive) platformOf(digest string) (ArchiveManifest, bool) {
	for _, c := range a.Manifests {
		if c.In == digest && !c.Index && !c.Absent && c.Platform == "linux/"+runtime.GOARCH {
			return c, true
		}
	}
	return ArchiveManifest{}, false
}

// notHeld says why the archive is not the pinned image, naming both.
func (a *Archive) notHeld(ref string) error {
	holds := fmt.Sprintf("%s (%s) is not the image the release pins: it holds %s; the release pins %s", a.Path, a.Format, a.Holds(), ref)
	switch a.Format {
	case "docker-archive":
		return fmt.Errorf("%s. A `docker save` of Docker's classic image store keeps the image's config and its layers, uncompressed, not the registry manifest whose digest a release pins, so the two cannot be compared offline: save the pinned image as an OCI layout or oci-archive (skopeo copy docker://REF oci-archive:FILE), or with `docker save` on Docker's containerd image store, which keep it", holds)
	case "docker-archive with an OCI index":
		return fmt.Errorf("%s. Its OCI index does not hold the pin's digest: the classic image store's `docker save` writes that manifest afresh; save the pinned image as an OCI layout or oci-archive (skopeo copy docker://REF oci-archive:FILE)", holds)
	}
	return fmt.Errorf("%s. If the pin is a multi-platform index, the archive must hold the index itself (skopeo copy --all)", holds)
}

// layoutImage is the image of the layout directory dir with digest: an
// image manifest, or this platform's image of an index ("": its first
// entry, an index read the same way).
func layoutImage(dir, digest string) (v1.Image, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, err
	}
	if digest == "" {
		im, err := idx.IndexManifest()
		if err != nil {
			return nil, err
		}
		if len(im.Manifests) == 0 {
			return nil, errors.New("no image in the layout's index.json")
		}
		return imageOf(idx, im.Manifests[0])
	}
	h, err := v1.NewHash(digest)
	if err != nil {
		return nil, err
	}
	parent, desc, err := find(idx, h)
	if err != nil {
		return nil, err
	}
	return imageOf(parent, desc)
}

// find is the descriptor of h among idx's entries and those of its nested
// indexes, with the index that names it.
func find(idx v1.ImageIndex, h v1.Hash) (v1.ImageIndex, v1.Descriptor, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, v1.Descriptor{}, err
	}
	for _, d := range im.Manifests {
		if d.Digest == h {
			return idx, d, nil
		}
	}
	for _, d := range im.Manifests {
		if !d.MediaType.IsIndex() {
			continue
		}
		if child, err := idx.ImageIndex(d.Digest); err == nil {
			if p, found, err := find(child, h); err == nil {
				return p, found, nil
			}
		}
	}
	return nil, v1.Descriptor{}, fmt.Errorf("no manifest or index %s in the layout", h)
}

// imageOf opens the image d names in idx: itself, or for an index the
// image of this machine's platform.
func imageOf(idx v1.ImageIndex, d v1.Descriptor) (v1.Image, error) {
	if !d.MediaType.IsIndex() {
		return idx.Image(d.Digest)
	}
	child, err := idx.ImageIndex(d.Digest)
	if err != nil {
		return nil, err
	}
	h, err := platformChild(child)
	if err != nil {
		return nil, fmt.Errorf("the index %s: %w", d.Digest, err)
	}
	return child.Image(h)
}

// platformChild is the digest of this machine's image (linux/GOARCH) in
// idx: the one the lab runs.
func platformChild(idx v1.ImageIndex) (v1.Hash, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return v1.Hash{}, err
	}
	var platforms []string
	for _, c := range im.Manifests {
		if c.Platform == nil || !c.MediaType.IsImage() {
			continue
		}
		if c.Platform.OS == "linux" && c.Platform.Architecture == runtime.GOARCH {
			return c.Digest, nil
		}
		platforms = append(platforms, c.Platform.OS+"/"+c.Platform.Architecture)
	}
	return v1.Hash{}, fmt.Errorf("no linux/%s image (it has %s)", runtime.GOARCH, strings.Join(platforms, ", "))
}
