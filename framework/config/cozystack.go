package config

import (
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cozystack/vlan-conformance/framework/cozystack"
	"github.com/cozystack/vlan-conformance/framework/image"
	"github.com/cozystack/vlan-conformance/framework/stager"
	"github.com/cozystack/vlan-conformance/framework/subject"
)

// registerCozystack binds the flags of the release under test. The release
// itself is framework/subject: validateCozystack checks these flags
// against the run's others and builds it, Prepare writes its files.
func registerCozystack(fs *flag.FlagSet, c *Config) {
	c.fs = fs
	fs.StringVar(&c.Cozystack, "cozystack", "", "the Cozystack release under test: a checkout of cozystack/cozystack (git clone --depth 1 --branch <tag> https://github.com/cozystack/cozystack); its charts are rendered with Helm's engine and become the subject (default: the suite's own reference subject, and the report says no release was tested)")
	fs.Var(&c.ImageArchives, "image-archive", "`FILE` (repeatable): an image the release pins, as an air-gapped mirror holds it: an OCI layout directory, an oci-archive tarball, or a docker save tarball that keeps the registry's digest (one from Docker's containerd image store); its manifest or index digest must be the one the release's rendered multus chart pins, else it is bad input naming both; the lab's stager specs then run that image unchanged instead of the suite's build of its /cni-plugins; needs --cozystack, lab tier")
	fs.BoolVar(&c.PullPinned, "pull-pinned", false, "pull the image the release pins for the lab's stager specs (install-cni-plugins' multus image) by its digest reference, unless an --image-archive holds it, and run it unchanged as an --image-archive is run; kept as an OCI layout in $VCF_CACHE/pinned/<digest>, which later runs reuse without the network (a digest names one image); a registry that cannot be reached or lacks the digest is bad input naming the reference and the mirror; credentials from ~/.docker/config.json; needs --cozystack, lab tier")
	fs.Var(&c.RegistryMirrors, "registry-mirror", "`HOST=MIRROR` (repeatable): --pull-pinned pulls the images pinned on HOST from MIRROR (host[:port][/prefix]; http://... for plain HTTP, implied for localhost) by the same repository path and the pin's digest, as an air-gapped mirror keeps them, e.g. ghcr.io=localhost:5000")
	fs.StringVar(&c.Guide, "guide", "", "the guide the release's claims are judged by and its specs take their NAD and userData from: the page as the website ships it (content/en/docs/<version>/networking/vm-external-vlan.md of cozystack/website), or a copy; a markdown file, or a directory holding exactly one vm-external-vlan.md; needs --cozystack (default: the release's docs/vm-external-vlan.md; with neither, the report says no guide was given and which claims therefore have no verdict)")
}

// validateCozystack checks the release's flags against the others and opens
// and renders the release (subject.Open); a checkout the suite cannot
// read or render is bad input. It writes nothing but what --pull-pinned
// pulls, in its cache (PulledCache).
func (c *Config) validateCozystack() error {
	if c.Cozystack == "" {
		var errs []error
		if c.Guide != "" {
			errs = append(errs, fmt.Errorf("--guide: the guide judges a release's claims: pass --cozystack=DIR too"))
		}
		for _, f := range c.pinnedFlags() {
			errs = append(errs, fmt.Errorf("%s: the image is checked against the digest a release pins: pass --cozystack=DIR too", f))
		}
		return errors.Join(errs...)
	}
	for _, f := range c.pinnedFlags() {
		switch {
		case c.Tier != "lab":
			// Loading them onto the nodes is not done yet: the nodes would
			// run the image --cni-plugins-image names, or pull the pin.
			return fmt.Errorf("%s: the cluster tier does not run pinned images from here yet; its nodes load --images-archive, or pull the pins themselves", f)
		case c.StagerImage != "":
			return fmt.Errorf("%s and --stager-image both name the image install-cni-plugins runs with: give one", f)
		}
	}
	mirrors, err := c.mirrors()
	if err != nil {
		return err
	}
	o := subject.Options{
		Dir: c.Cozystack, Guide: c.Guide,
		Archives: c.ImageArchives, Pull: c.PullPinned, Mirrors: mirrors, PullCache: PulledCache(),
		VMLane: c.Tier == "cluster" && c.Cluster.Workload == "vm",
	}
	if c.Tier == "cluster" && c.Cluster.CNIStaging != "installer" {
		// The installer stands for the nodes' provisioning whatever
		// --cni-staging says (platform/cluster/multus).
		o.WithoutStaging = c.checkInstallerPlugins
	}
	s, err := subject.Open(o)
	if err != nil {
		return err
	}
	img := s.Image
	// On a kind cluster the release's image references are pulled as they
	// are, unless --cni-plugins-image names a local build (the offline
	// lane), which must then be the release's build.
	if c.Tier == "cluster" && !c.ExistingCluster() && c.Cluster.CNIPluginsImage != "" {
		if p := multusProvenance(c.Cluster.ImagesArchives); p != "" {
			if err := img.CheckProvenance(p); err != nil {
				return fmt.Errorf("--cozystack: %w (rebuild it: make offline-images COZYSTACK=%s)", err, c.Cozystack)
			}
			s.Ledger.Add(cozystack.Change{Kind: "image", Object: "the multus image " + c.Cluster.CNIPluginsImage, What: "built here by images/multus/build.sh from the release's Dockerfile (provenance " + p + " checked against it)", Why: "no image registry: the release's pins, patches and plugin names, built from the Go module proxy"})
		}
	}
	if c.Tier == "lab" && img.Stages() {
		if v, err := stager.ReleaseVersion(c.PluginDir); err == nil && v != img.PluginsVersion {
			return fmt.Errorf("--cozystack: its multus image carries CNI plugins %s (%s), --plugin-dir %s holds %s: build that release with `make plugins PLUGINS_VERSION=%s` and pass --plugin-dir=bin/cni/%s", img.PluginsVersion, img.Dockerfile, c.PluginDir, v, img.PluginsVersion, img.PluginsVersion)
		}
	}
	c.subject = s
	return nil
}

// pinnedFlags are the flags given that bring an image the release pins.
func (c *Config) pinnedFlags() []string {
	var out []string
	if len(c.ImageArchives) > 0 {
		out = append(out, "--image-archive")
	}
	if c.PullPinned {
		out = append(out, "--pull-pinned")
	}
	return out
}

// mirrors parses --registry-mirror, which only --pull-pinned reads.
func (c *Config) mirrors() ([]image.Mirror, error) {
	if len(c.RegistryMirrors) > 0 && !c.PullPinned {
		return nil, fmt.Errorf("--registry-mirror: mirrors are where --pull-pinned pulls from: pass --pull-pinned too")
	}
	var out []image.Mirror
	var errs []error
	for _, v := range c.RegistryMirrors {
		m, err := image.ParseMirror(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("--registry-mirror %w", err))
			continue
		}
		if slices.ContainsFunc(out, func(o image.Mirror) bool { return o.Host == m.Host }) {
			errs = append(errs, fmt.Errorf("--registry-mirror %q: another mirror is already given for %s", v, m.Host))
			continue
		}
		out = append(out, m)
	}
	return out, errors.Join(errs...)
}

// PulledCache is where --pull-pinned keeps what it pulled, by digest.
func PulledCache() string { return filepath.Join(CacheRoot(), "pinned") }

// StagerPinned is the release's own image for install-cni-plugins, read
// from the --image-archive that holds it (subject.Subject.StagerPinned):
// the stager specs run it unchanged. nil without one.
func (c *Config) StagerPinned() *image.Pinned { return c.subject.StagerPinned() }

// multusProvenance is the provenance file beside the multus image archive
// of --images-archive, "" when none is loaded.
func multusProvenance(archives string) string {
	for _, a := range strings.Split(archives, ",") {
		if filepath.Base(a) == "multus.tar" {
			return filepath.Join(filepath.Dir(a), "multus.provenance")
		}
	}
	return ""
}

// Subject is the release under test, rendered; nil without --cozystack.
func (c *Config) Subject() *subject.Subject { return c.subject }

// StagerImagePlugins are the plugins the image the suite builds carries:
// with --cozystack the names the release's Dockerfile extracts, else nil
// (the 14); what the run's control makes of them where it needs another
// image.
func (c *Config) StagerImagePlugins() []string {
	var carried []string
	if s := c.Subject(); s != nil {
		carried = s.Image.Plugins
	}
	return c.SelectedControl().StagerImagePlugins(carried)
}

// StagerOptions are the stager harness's options from the run's flags:
// the suite's harnesses and the lab's nodes stage from the same subject.
func (c *Config) StagerOptions() stager.Options {
	return stager.Options{
		Manifest:     c.StagerManifest,
		Image:        c.StagerImage,
		Pinned:       c.StagerPinned(),
		ImagePlugins: c.StagerImagePlugins(),
		Release:      c.PluginDir,
		OlderRelease: c.OldPluginDir,
		WorkDir:      c.WorkDir,
	}
}

// Prepare makes the validated configuration ready to run: with
// --cozystack it writes the rendered multus chart and the ledger to
// <report-dir>/cozystack (subject.Subject.Write) and, where the release
// stages the plugins, makes the chart the stager's subject, unless
// --stager-manifest was given (then that one is, and the ledger says so),
// and the stager's reference image carries the plugins the release's
// Dockerfile extracts.
func (c *Config) Prepare() error {
	s := c.subject
	if s == nil {
		return nil
	}
	if err := s.Write(c.subjectDir()); err != nil {
		return err
	}
	switch {
	case c.flagSet("stager-manifest"):
		s.Ledger.Add(cozystack.Change{Kind: "subject", Object: "init container " + stager.InitContainerName, What: "taken from --stager-manifest " + c.StagerManifest + " instead of the rendered DaemonSet", Why: "the user's (or a negative control's) subject"})
	case s.Stages():
		c.StagerManifest = s.Manifest
	}
	return nil
}

// subjectDir is where Prepare writes the release's files.
func (c *Config) subjectDir() string { return filepath.Join(c.ReportDir, "cozystack") }

// LedgerFiles are the ledger files of the run's processes (Prepare).
func (c *Config) LedgerFiles() string { return subject.LedgerFiles(c.subjectDir()) }

// flagSet tells whether the flag was given on the command line.
func (c *Config) flagSet(name string) bool {
	set := false
	if c.fs != nil {
		c.fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	}
	return set
}
