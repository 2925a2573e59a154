package stager

import (
	"debug/buildinfo"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cozystack/vlan-conformance/framework/image"
)

// ImageInfo names the multus image the init container sees: where it came
// from and what its /cni-plugins holds.
type ImageInfo struct {
	// Ref is the init container's image reference in the manifest.
	Ref string
	// Source is --stager-image, or "" for the suite's reference build.
	Source string
	// Pinned is the release's own image, read from the --image-archive
	// that holds it; nil otherwise.
	Pinned *image.Pinned
	// Built says how the reference build was made.
	Built   string
	Entries []ImageEntry // sorted by name
	// NoPluginsDir: the image has no /cni-plugins at all, as a multus
	// image before staging. Only a pinned image gets this far: any other
	// is refused as bad input (CheckImage).
	NoPluginsDir bool
}

// ImageEntry is one entry of the image's /cni-plugins.
type ImageEntry struct {
	Name, Kind string // Kind as File.Kind
	Hash       string
	// Version is the upstream release it was built from ("" when it is not
	// a reference plugin); Package is the Go main package it was built from.
	Version, Package string
	Size             int64 // bytes, regular files only
}

// Reference tells whether the entry is the upstream reference plugin of
// its name: built from the plugins module's package of that name.
func (e ImageEntry) Reference() bool {
	return e.Kind == "file" && e.Version != "" && strings.HasSuffix(e.Package, "/"+e.Name) &&
		strings.HasPrefix(e.Package, pluginsModule+"/plugins/")
}

// Describe is the entry as a listing shows it: "bridge v1.9.1".
func (e ImageEntry) Describe() string {
	switch {
	case e.Kind != "file":
		return e.Name + " (" + e.Kind + ")"
	case e.Reference():
		return e.Name + " " + e.Version
	case e.Version != "":
		return e.Name + " " + e.Version + " (built from " + e.Package + ")"
	}
	return e.Name + " (not a reference plugin)"
}

// Entry is the image's /cni-plugins/<name>.
func (i ImageInfo) Entry(name string) (ImageEntry, bool) {
	for _, e := range i.Entries {
		if e.Name == name {
			return e, true
		}
	}
	return ImageEntry{}, false
}

// Size is what /cni-plugins holds, in bytes (its regular files).
func (i ImageInfo) Size() int64 {
	var n int64
	for _, e := range i.Entries {
		n += e.Size
	}
	return n
}

// Offers tells whether the image carries name at /cni-plugins.
func (i ImageInfo) Offers(name string) bool { _, ok := i.Entry(name); return ok }

// Listing is the image's /cni-plugins, one "name version" per entry.
func (i ImageInfo) Listing() string {
	var out []string
	for _, e := range i.Entries {
		out = append(out, e.Describe())
	}
	return strings.Join(out, ", ")
}

func (i ImageInfo) String() string {
	ref, whose := i.Ref, "the user's image "+i.Source
	switch {
	case i.Pinned != nil:
		ref, whose = i.Pinned.Ref, "the release's pinned image itself, from "+i.Pinned.Source()
	case i.Source == "":
		whose = "the suite's reference image (" + i.Built + ")"
	}
	if ref == "" {
		ref = "no image reference"
	}
	if i.NoPluginsDir {
		return fmt.Sprintf("%s, %s; no /%s", ref, whose, PluginsDir)
	}
	return fmt.Sprintf("%s, %s; /%s holds %d: %s", ref, whose, PluginsDir, len(i.Entries), i.Listing())
}

// loadImage puts the image's /cni-plugins into the harness (readImage) and
// adds its copies to the harness's catalog.
func (h *Harness) loadImage(o Options, base *catalog) error {
	h.payload = filepath.Join(h.dir, "image-root", PluginsDir)
	if err := os.MkdirAll(filepath.Dir(h.payload), 0o755); err != nil {
		return err
	}
	var err error
	h.Image, err = readImage(o, h.release, base.version[h.release]+" at --plugin-dir", h.payload, cachedPlugins)
	if err != nil {
		return err
	}
	h.Image.Ref = h.InitContainer.Container.Image
	h.cat = base.withImage(h.Image.Entries)
	return nil
}

// readImage writes the /cni-plugins of the image o names into dst: the
// pinned image (o.Pinned), --stager-image, or the reference build of
// o.ImagePlugins from release (described as from). extract reads an image.
// A pinned image without /cni-plugins is read as such, not refused: it is
// the release's, and its staging the specs' to judge.
func readImage(o Options, release, from, dst string, extract func(src, digest, dst string) error) (ImageInfo, error) {
	info := ImageInfo{Source: o.Image, Pinned: o.Pinned}
	var err error
	switch {
	case o.Pinned != nil:
		err = extract(o.Pinned.Archive, o.Pinned.Digest, dst)
		if errors.Is(err, ErrNoPluginsDir) {
			info.NoPluginsDir = true
			return info, nil
		}
		if err != nil {
			err = fmt.Errorf("%s: %w", o.Pinned.Flag(), err)
		}
	case o.Image != "":
		if err = extract(o.Image, "", dst); err != nil {
			err = fmt.Errorf("--stager-image: %w", err)
		}
	default:
		names := o.ImagePlugins
		if names == nil {
			names = StagedPlugins
		}
		err = buildReference(release, names, dst)
		info.Built = describeNames(names) + " of " + from
	}
	if err != nil {
		return info, err
	}
	info.Entries, err = listImage(dst)
	return info, err
}

// describeNames: "the 14 staged plugins", or the list when it differs.
func describeNames(names []string) string {
	if strings.Join(names, " ") == strings.Join(StagedPlugins, " ") {
		return "the 14 staged plugins"
	}
	return strings.Join(names, " ")
}

// buildReference fills dst with the named plugins of a release, as
// Cozystack's Dockerfile extracts the 14 from the release tarball.
func buildReference(release string, names []string, dst string) error {
	if err := os.Mkdir(dst, 0o755); err != nil {
		return err
	}
	for _, n := range names {
		if err := copyFile(filepath.Join(release, n), filepath.Join(dst, n), 0o755); err != nil {
			return fmt.Errorf("the reference image: %w", err)
		}
	}
	return nil
}

// ImageListing reads the /cni-plugins of the image o names (readImage)
// without running a harness, for the report.
func ImageListing(o Options) (ImageInfo, error) {
	dir, err := os.MkdirTemp("", "stager-image-*")
	if err != nil {
		return ImageInfo{}, err
	}
	defer os.RemoveAll(dir)
	return readImage(o, o.Release, "the release at "+o.Release, filepath.Join(dir, PluginsDir), extractPlugins)
}

// DescribeSubject is the stager subject of o as the report names it: the
// manifest (path, sha256, workload), the init container's image reference,
// and whose image it ran with and what its /cni-plugins holds.
func DescribeSubject(o Options) string {
	var b strings.Builder
	manifest := o.Manifest
	sum, err := FileSHA256(manifest)
	if err != nil {
		sum = "unreadable: " + err.Error()
	}
	whose := "the suite's reference"
	if manifest != DefaultManifest {
		whose = "the user's"
	}
	fmt.Fprintf(&b, "- manifest: `%s` (%s), sha256 `%s`\n", manifest, whose, sum)
	ic, err := LoadInitContainer(manifest)
	if err != nil {
		fmt.Fprintf(&b, "- %s: %v\n", InitContainerName, err)
		return b.String()
	}
	info, err := ImageListing(o)
	info.Ref = ic.Container.Image
	fmt.Fprintf(&b, "- %s of %s, image reference `%s`\n", InitContainerName, ic.Workload, info.Ref)
	if err != nil {
		fmt.Fprintf(&b, "- image: %v\n", err)
		return b.String()
	}
	switch {
	case o.Pinned != nil:
		fmt.Fprintf(&b, "- image: the release's pinned image itself, `%s`, unchanged, from %s\n", o.Pinned.Ref, o.Pinned.Source())
	case o.Image == "":
		fmt.Fprintf(&b, "- image: the suite's reference build (%s), not the image the reference names\n", info.Built)
	default:
		fmt.Fprintf(&b, "- image: the user's, `%s`\n", o.Image)
	}
	if info.NoPluginsDir {
		fmt.Fprintf(&b, "- /%s: none, the image has no such directory (a multus image that predates staging)\n", PluginsDir)
		return b.String()
	}
	fmt.Fprintf(&b, "- /%s (%d): %s\n", PluginsDir, len(info.Entries), info.Listing())
	return b.String()
}

// DefaultManifest is --stager-manifest's default: the suite's reference.
const DefaultManifest = "fixtures/stager/multus-daemonset.yaml"

func listImage(dir string) ([]ImageEntry, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []ImageEntry
	for _, de := range ents {
		p := filepath.Join(dir, de.Name())
		e := ImageEntry{Name: de.Name(), Kind: "other"}
		switch {
		case de.Type().IsRegular():
			e.Kind = "file"
			if e.Hash, err = hashFile(p); err != nil {
				return nil, err
			}
			if fi, err := de.Info(); err == nil {
				e.Size = fi.Size()
			}
			e.Version = pluginVersion(p)
			if bi, err := buildinfo.ReadFile(p); err == nil {
				e.Package = bi.Path
			}
		case de.IsDir():
			e.Kind = "dir"
		case de.Type()&os.ModeSymlink != 0:
			e.Kind = "symlink"
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// withImage is a copy of the catalog that also knows the image's copies.
func (c *catalog) withImage(entries []ImageEntry) *catalog {
	out := &catalog{byHash: map[string]string{}, byName: map[string]string{}, version: c.version}
	for k, v := range c.byHash {
		out.byHash[k] = v
	}
	for k, v := range c.byName {
		out.byName[k] = v
	}
	for _, e := range entries {
		if _, known := out.byHash[e.Hash]; !known && e.Kind == "file" && e.Version != "" {
			out.byHash[e.Hash] = e.Version + "/" + e.Name
		}
	}
	return out
}

// copyTree copies src to dst (which must not exist) keeping modes: files,
// directories and symlinks.
func copyTree(src, dst string) error {
	return filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case fi.IsDir():
			if err := os.Mkdir(to, 0o755); err != nil {
				return err
			}
			return os.Chmod(to, fi.Mode().Perm())
		case fi.Mode()&os.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(t, to)
		case fi.Mode().IsRegular():
			return copyFile(p, to, fi.Mode().Perm())
		}
		return nil
	})
}

// FileSHA256 is the hex sha256 of a file (the manifest, in the report).
func FileSHA256(p string) (string, error) { return hashFile(p) }
