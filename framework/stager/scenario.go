package stager

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	stagerfixtures "github.com/cozystack/vlan-conformance/fixtures/stager"
)

// StagedPlugins are the 14 upstream reference plugins the guide says staging
// installs, in the order an alphabetical list or glob attempts them
// (fixtures/stager/staged-plugins.txt, the one list).
var StagedPlugins = stagerfixtures.StagedPlugins()

// LeftAlone are the reference plugins staging never writes.
var LeftAlone = []string{"dhcp", "dummy", "loopback", "tap"}

// IsStaged reports whether name is one of StagedPlugins.
func IsStaged(name string) bool {
	for _, p := range StagedPlugins {
		if p == name {
			return true
		}
	}
	return false
}

// Layout is what a node's /opt/cni/bin holds before staging (fixtures in
// fixtures/stager/layouts).
type Layout struct {
	Name  string       `json:"name"`
	Title string       `json:"title"`
	Guide string       `json:"guide"` // the guide's sentence this layout models
	Files []LayoutFile `json:"files"`
}

// Where a layout file comes from.
const (
	FromImage        = "image"         // the release the image carries (byte-identical)
	FromOlder        = "older"         // the older release
	FromImagePatched = "image-patched" // the image release's copy with bytes appended, as a local patch
	FromStandIn      = "stand-in"      // a small file standing in for a foreign plugin (flannel, cilium-cni, ...)
	FromDirectory    = "directory"     // an (empty) directory
)

// LayoutFile is one entry of a layout.
type LayoutFile struct {
	Name string `json:"name"`
	From string `json:"from"`
	// Plugin is the release binary to copy when it differs from Name.
	Plugin string `json:"plugin,omitempty"`
}

// LoadLayouts reads every *.yaml layout in fsys, by name.
func LoadLayouts(fsys fs.FS) (map[string]Layout, error) {
	names, err := fs.Glob(fsys, "*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	out := map[string]Layout{}
	for _, n := range names {
		data, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		var l Layout
		if err := yaml.UnmarshalStrict(data, &l); err != nil {
			return nil, fmt.Errorf("layout %s: %w", n, err)
		}
		if l.Name == "" {
			l.Name = strings.TrimSuffix(path.Base(n), ".yaml")
		}
		for _, f := range l.Files {
			switch f.From {
			case FromImage, FromOlder, FromImagePatched, FromStandIn, FromDirectory:
			default:
				return nil, fmt.Errorf("layout %s: file %s: from %q: want one of image, older, image-patched, stand-in, directory", n, f.Name, f.From)
			}
		}
		if _, dup := out[l.Name]; dup {
			return nil, fmt.Errorf("layout %s: name %q used twice", n, l.Name)
		}
		out[l.Name] = l
	}
	return out, nil
}

// ImageVariant is what the image carries at /cni-plugins.
type ImageVariant int

const (
	ImageWithPlugins         ImageVariant = iota // every plugin of the image release
	ImageWithoutPluginsDir                       // an image that predates staging: no /cni-plugins
	ImageWithEmptyPluginsDir                     // /cni-plugins exists and is empty
)

func (v ImageVariant) String() string {
	switch v {
	case ImageWithoutPluginsDir:
		return "no /cni-plugins"
	case ImageWithEmptyPluginsDir:
		return "an empty /cni-plugins"
	}
	return "the image release at /cni-plugins"
}

// FaultKind is a way a plugin can fail to be written.
type FaultKind int

const (
	DirectoryAtDestination FaultKind = iota + 1 // a directory where the plugin goes
	UnreadableSource                            // the image's copy has mode 000
	ImmutableDestination                        // the node's copy carries the immutable flag
	FullFileSystem                              // the node directory is a tmpfs with little room left
	UnclearableTemp                             // the script's temporary path for the plugin is a directory that will not clear
)

// Fault is one injected cause of failure.
type Fault struct {
	Kind   FaultKind
	Plugin string // the plugin it hits (not for FullFileSystem)
	Bytes  int64  // FullFileSystem: the room left once the layout is in place
	// Paths are UnclearableTemp's names in /opt/cni/bin: where the script
	// under test was seen to write Plugin before publishing it (TempPaths).
	Paths []string
}

// DirectoryAt puts a directory where plugin would be written.
func DirectoryAt(plugin string) Fault { return Fault{Kind: DirectoryAtDestination, Plugin: plugin} }

// Unreadable makes the image's copy of plugin unreadable (mode 000).
func Unreadable(plugin string) Fault { return Fault{Kind: UnreadableSource, Plugin: plugin} }

// Immutable sets the immutable flag on the node's copy of plugin.
func Immutable(plugin string) Fault { return Fault{Kind: ImmutableDestination, Plugin: plugin} }

// FullFS makes the node directory a tmpfs with only free bytes left once the
// layout is written: it fills after a plugin or two.
func FullFS(free int64) Fault { return Fault{Kind: FullFileSystem, Bytes: free} }

// UnclearableAt makes each of paths (names in /opt/cni/bin, found with
// TempPaths) a directory holding an immutable file: an earlier run's
// temporary path for plugin that no rm can clear, whatever the
// capabilities.
func UnclearableAt(plugin string, paths []string) Fault {
	return Fault{Kind: UnclearableTemp, Plugin: plugin, Paths: paths}
}

// pinnedName is the immutable file inside an unclearable temporary path.
const pinnedName = "pinned"

func (f Fault) String() string {
	switch f.Kind {
	case DirectoryAtDestination:
		return "a directory at /opt/cni/bin/" + f.Plugin
	case UnreadableSource:
		return "an unreadable /cni-plugins/" + f.Plugin + " in the image"
	case ImmutableDestination:
		return "an immutable /opt/cni/bin/" + f.Plugin
	case FullFileSystem:
		return fmt.Sprintf("a file system that fills up (/opt/cni/bin is a tmpfs with %d MiB free)", f.Bytes>>20)
	case UnclearableTemp:
		return fmt.Sprintf("a temporary path for %s that will not clear (/opt/cni/bin/%s: a directory holding an immutable file)", f.Plugin, strings.Join(f.Paths, ", /opt/cni/bin/"))
	}
	return "no fault"
}

// Scenario is one node and one image, before staging runs.
type Scenario struct {
	Name   string // names its scratch directory and artifacts
	Layout Layout
	Image  ImageVariant
	Faults []Fault
}
