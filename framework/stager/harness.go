package stager

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cozystack/vlan-conformance/framework/image"
	"golang.org/x/sys/unix"
)

// Options parameterise a Harness (from the suite's flags).
type Options struct {
	Manifest string // --stager-manifest
	// Image is --stager-image: the multus image's root (see CheckImage).
	// "" builds the suite's reference image, as Cozystack's Dockerfile does:
	// ImagePlugins (default StagedPlugins) of the Release at /cni-plugins.
	Image string
	// Pinned is the release's own image instead (--image-archive): read
	// unchanged from its archive, which may carry no /cni-plugins at all.
	Pinned       *image.Pinned
	ImagePlugins []string
	Release      string // --plugin-dir: the upstream release (node layouts; the reference image)
	OlderRelease string // --old-plugin-dir: an older release, for node layouts
	WorkDir      string // --work-dir ("" = the system temp dir)
}

// Harness is where the init container runs without a container runtime:
// it builds fake nodes (node directories and images) from scenarios and
// runs the init container against them. Close removes everything it made.
type Harness struct {
	InitContainer InitContainer
	Security      Security
	Image         ImageInfo
	release       string // abs release dirs
	older         string
	payload       string // the image's /cni-plugins, as files
	dir           string
	cat           *catalog
	nodes         []*FakeNode
}

// NewHarness reads the init container from the manifest and hashes the
// releases.
func NewHarness(o Options) (*Harness, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the container-less stager run needs root (mount namespace, binds, chroot)")
	}
	ic, err := LoadInitContainer(o.Manifest)
	if err != nil {
		return nil, err
	}
	sec, err := ic.Security()
	if err != nil {
		return nil, err
	}
	h := &Harness{InitContainer: ic, Security: sec}
	if h.release, err = filepath.Abs(o.Release); err != nil {
		return nil, err
	}
	if h.older, err = filepath.Abs(o.OlderRelease); err != nil {
		return nil, err
	}
	base0, err := catalogOf(h.release, h.older)
	if err != nil {
		return nil, err
	}
	if base0.version[h.release] == base0.version[h.older] {
		return nil, fmt.Errorf("--plugin-dir and --old-plugin-dir both hold %s: the layouts need an older release", base0.version[h.release])
	}
	base := o.WorkDir
	if base == "" {
		base = os.TempDir()
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return nil, err
	}
	if err := sweep(base); err != nil {
		return nil, err
	}
	if h.dir, err = os.MkdirTemp(base, "stager-cni-*"); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(h.dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return nil, errors.Join(err, os.RemoveAll(h.dir))
	}
	if err := h.loadImage(o, base0); err != nil {
		return nil, errors.Join(err, os.RemoveAll(h.dir))
	}
	return h, nil
}

// ImageVersion is the release the image must carry (e.g. v1.9.1): the one
// at --plugin-dir, as the guide has "the same upstream version (v1.9.1 on
// both sides)".
func (h *Harness) ImageVersion() string { return h.cat.version[h.release] }

// OlderVersion is the older release layouts use (e.g. v1.6.2).
func (h *Harness) OlderVersion() string { return h.cat.version[h.older] }

// ImageHash is the content hash of the image's copy of plugin ("" when the
// image does not carry it).
func (h *Harness) ImageHash(plugin string) string {
	if e, ok := h.Image.Entry(plugin); ok && e.Kind == "file" {
		return e.Hash
	}
	return ""
}

// OlderHash is the content hash of the older release's copy of plugin.
func (h *Harness) OlderHash(plugin string) string {
	return h.cat.byName[h.OlderVersion()+"/"+plugin]
}

// Close closes every fake node still open and removes the harness's
// directory.
func (h *Harness) Close() error {
	var errs []error
	for _, n := range h.nodes {
		errs = append(errs, n.Close())
	}
	h.nodes = nil
	if h.dir != "" {
		errs = append(errs, os.RemoveAll(h.dir))
	}
	return errors.Join(errs...)
}

// FakeNode is one prepared scenario: a node directory standing for a node's
// /opt/cni/bin, and the image the init container will see there.
type FakeNode struct {
	Scenario Scenario
	// Dir is the node's /opt/cni/bin as the node (and the suite) sees it.
	Dir          string
	base         string
	imageDir     string // holds cni-plugins/ unless the image has none
	imageSummary string
	tmpfs        bool
	immutable    []string
	closed       bool
}

// patchMarker is appended to an image copy to make a locally patched plugin.
const patchMarker = "\n# locally patched on this node\n"

// standIn is the content of a foreign plugin's stand-in.
func standIn(name string) []byte {
	return []byte("#!/bin/sh\n# lab stand-in for " + name + ", a CNI plugin that is not an upstream reference plugin\nexit 0\n")
}

// Prepare builds the scenario's node directory and image. The caller must
// Close the fake node (Harness.Close does it too).
func (h *Harness) Prepare(sc Scenario) (*FakeNode, error) {
	n, err := h.newNode(sc)
	if err != nil {
		return nil, err
	}
	n.Dir = filepath.Join(n.base, "node", "opt", "cni", "bin")
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return n, err
	}
	full := int64(-1)
	for _, f := range sc.Faults {
		if f.Kind == FullFileSystem {
			full = f.Bytes
		}
	}
	if full >= 0 {
		if err := unix.Mount("stager-cni-node", n.Dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
			return n, fmt.Errorf("mount a tmpfs at %s: %w", n.Dir, err)
		}
		n.tmpfs = true
	}
	if err := h.populate(n.Dir, sc.Layout); err != nil {
		return n, err
	}
	if full >= 0 {
		// Shrink the tmpfs to what the layout uses plus the free space asked for.
		var st unix.Statfs_t
		if err := unix.Statfs(n.Dir, &st); err != nil {
			return n, err
		}
		used := int64(st.Blocks-st.Bfree) * st.Bsize
		if err := unix.Mount("stager-cni-node", n.Dir, "tmpfs", unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("size=%d", used+full)); err != nil {
			return n, fmt.Errorf("shrink the tmpfs at %s to %d bytes: %w", n.Dir, used+full, err)
		}
	}
	if err := h.buildImage(n, sc); err != nil {
		return n, err
	}
	for _, f := range sc.Faults {
		if err := n.inject(f); err != nil {
			return n, fmt.Errorf("inject %s: %w", f, err)
		}
	}
	return n, nil
}

// Attach makes a fake node of a real node's /opt/cni/bin, dir: the runs
// act on dir itself, with the image as the harness read it (a platform's
// nodes, which the stager fills as it would under the Multus DaemonSet).
// Close leaves dir as the runs left it.
func (h *Harness) Attach(name, dir string) (*FakeNode, error) {
	if fi, err := os.Stat(dir); err != nil {
		return nil, err
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	n, err := h.newNode(Scenario{Name: name, Image: ImageWithPlugins})
	if err != nil {
		return nil, err
	}
	n.Dir = dir
	return n, h.buildImage(n, n.Scenario)
}

// newNode makes the scratch directory of a fake node (its image and runs).
func (h *Harness) newNode(sc Scenario) (*FakeNode, error) {
	if sc.Name == "" || strings.ContainsAny(sc.Name, "/ ") {
		return nil, fmt.Errorf("scenario name %q: want a short name without slashes or spaces", sc.Name)
	}
	n := &FakeNode{Scenario: sc, base: filepath.Join(h.dir, sc.Name)}
	if err := os.Mkdir(n.base, 0o755); err != nil {
		return nil, err
	}
	h.nodes = append(h.nodes, n)
	return n, nil
}

// Payload lists the image's /cni-plugins as the node's runs see it (none
// when the image has no such directory).
func (n *FakeNode) Payload() (map[string]File, error) {
	return Listing(filepath.Join(n.imageDir, PluginsDir))
}

func (h *Harness) populate(dir string, lay Layout) error {
	for _, f := range lay.Files {
		dst := filepath.Join(dir, f.Name)
		plugin := f.Plugin
		if plugin == "" {
			plugin = f.Name
		}
		var err error
		switch f.From {
		case FromImage: // the node's own copy of the release, not the multus image's
			err = copyFile(filepath.Join(h.release, plugin), dst, 0o755)
		case FromOlder:
			err = copyFile(filepath.Join(h.older, plugin), dst, 0o755)
		case FromImagePatched:
			if err = copyFile(filepath.Join(h.release, plugin), dst, 0o755); err == nil {
				err = appendFile(dst, []byte(patchMarker))
			}
		case FromStandIn:
			err = os.WriteFile(dst, standIn(f.Name), 0o755)
		case FromDirectory:
			err = os.Mkdir(dst, 0o755)
		default:
			err = fmt.Errorf("from %q unknown", f.From)
		}
		if err != nil {
			return fmt.Errorf("layout %s: %s: %w", lay.Name, f.Name, err)
		}
	}
	return nil
}

// buildImage gives the node its own copy of the image's /cni-plugins at
// <base>/image/cni-plugins (not a bind of the harness's: the subject may
// move or chmod what it finds, and faults change it).
func (h *Harness) buildImage(n *FakeNode, sc Scenario) error {
	n.imageDir = filepath.Join(n.base, "image")
	if err := os.Mkdir(n.imageDir, 0o755); err != nil {
		return err
	}
	n.imageSummary = sc.Image.String()
	if sc.Image == ImageWithoutPluginsDir {
		return nil
	}
	if sc.Image == ImageWithPlugins && h.Image.NoPluginsDir {
		n.imageSummary = h.Image.String() // the pinned image, as it is
		return nil
	}
	dst := filepath.Join(n.imageDir, PluginsDir)
	if sc.Image == ImageWithEmptyPluginsDir {
		return os.Mkdir(dst, 0o755)
	}
	n.imageSummary = h.Image.String()
	return copyTree(h.payload, dst)
}

func (n *FakeNode) inject(f Fault) error {
	switch f.Kind {
	case FullFileSystem:
		return nil // mounted before the layout was written
	case DirectoryAtDestination:
		return os.Mkdir(filepath.Join(n.Dir, f.Plugin), 0o755)
	case UnreadableSource:
		p := filepath.Join(n.imageDir, "cni-plugins", f.Plugin)
		if _, err := os.Stat(p); err != nil {
			return err
		}
		return os.Chmod(p, 0)
	case ImmutableDestination:
		p := filepath.Join(n.Dir, f.Plugin)
		if err := setImmutable(p, true); err != nil {
			return err
		}
		n.immutable = append(n.immutable, p)
		return nil
	case UnclearableTemp:
		if len(f.Paths) == 0 {
			return errors.New("no temporary path to make unclearable")
		}
		for _, name := range f.Paths {
			d := filepath.Join(n.Dir, name)
			if filepath.Dir(d) != n.Dir {
				return fmt.Errorf("temporary path %q is not a name in /opt/cni/bin", name)
			}
			if err := os.RemoveAll(d); err != nil {
				return err
			}
			if err := os.Mkdir(d, 0o755); err != nil {
				return err
			}
			p := filepath.Join(d, pinnedName)
			if err := os.WriteFile(p, []byte("left by an earlier run; immutable, so no rm clears it\n"), 0o644); err != nil {
				return err
			}
			if err := setImmutable(p, true); err != nil {
				return err
			}
			n.immutable = append(n.immutable, p)
		}
		return nil
	}
	return fmt.Errorf("unknown fault %d", f.Kind)
}

// Close lifts immutable flags, unmounts the node's tmpfs and removes the
// scenario's directory. It is safe to call twice.
func (n *FakeNode) Close() error {
	if n.closed {
		return nil
	}
	n.closed = true
	var errs []error
	for _, p := range n.immutable {
		if err := setImmutable(p, false); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("lift the immutable flag of %s: %w", p, err))
		}
	}
	if len(n.immutable) > 0 {
		liftImmutable(n.base) // the subject may have moved a flagged file
	}
	if n.tmpfs {
		if err := unix.Unmount(n.Dir, unix.MNT_DETACH); err != nil {
			errs = append(errs, fmt.Errorf("unmount %s: %w", n.Dir, err))
		}
	}
	if len(errs) == 0 {
		errs = append(errs, os.RemoveAll(n.base))
	}
	return errors.Join(errs...)
}

// fsImmutableFL is FS_IMMUTABLE_FL of <linux/fs.h> (chattr +i); x/sys/unix
// does not name it.
const fsImmutableFL = 0x00000010

// setImmutable sets or clears FS_IMMUTABLE_FL (chattr +i / -i).
func setImmutable(p string, on bool) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil {
		return fmt.Errorf("FS_IOC_GETFLAGS: %w", err)
	}
	if on {
		flags |= fsImmutableFL
	} else {
		flags &^= fsImmutableFL
	}
	if err := unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags)); err != nil {
		return fmt.Errorf("FS_IOC_SETFLAGS: %w", err)
	}
	return nil
}

func copyFile(src, dst string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(dst, perm)
}

func appendFile(p string, b []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
