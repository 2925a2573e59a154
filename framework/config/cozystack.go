package config

import (
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cozystack/vlan-conformance/framework/image"
)

// registerCozystack binds the flags of the release under test. The release
// itself is framework/subject: validateCozystack checks these flags
// against the run's others, subject.Of opens it, its Prepare writes its
// files.
func registerCozystack(fs *flag.FlagSet, c *Config) {
	c.fs = fs
	fs.StringVar(&c.Cozystack, "cozystack", "", "the Cozystack release under test: a checkout of cozystack/cozystack (git clone --depth 1 --branch <tag> https://github.com/cozystack/cozystack); its charts are rendered with Helm's engine and become the subject (default: the suite's own reference subject, and the report says no release was tested)")
	fs.Var(&c.ImageArchives, "image-archive", "`FILE` (repeatable): an image the release pins, as an air-gapped mirror holds it: an OCI layout directory, an oci-archive tarball, or a docker save tarball that keeps the registry's digest (one from Docker's containerd image store); its manifest or index digest must be the one the release's rendered multus chart pins, else it is bad input naming both; the lab's stager specs then run that image unchanged instead of the suite's build of its /cni-plugins; needs --cozystack, lab tier")
	fs.BoolVar(&c.PullPinned, "pull-pinned", false, "pull the image the release pins for the lab's stager specs (install-cni-plugins' multus image) by its digest reference, unless an --image-archive holds it, and run it unchanged as an --image-archive is run; kept as an OCI layout in $VCF_CACHE/pinned/<digest>, which later runs reuse without the network (a digest names one image); a registry that cannot be reached or lacks the digest is bad input naming the reference and the mirror; credentials from ~/.docker/config.json; needs --cozystack, lab tier")
	fs.Var(&c.RegistryMirrors, "registry-mirror", "`HOST=MIRROR` (repeatable): --pull-pinned pulls the images pinned on HOST from MIRROR (host[:port][/prefix]; http://... for plain HTTP, implied for localhost) by the same repository path and the pin's digest, as an air-gapped mirror keeps them, e.g. ghcr.io=localhost:5000")
	fs.StringVar(&c.Guide, "guide", "", "the guide the release's claims are judged by and its specs take their NAD and userData from: the page as the website ships it (content/en/docs/<version>/networking/vm-external-vlan.md of cozystack/website), or a copy; a markdown file, or a directory holding exactly one vm-external-vlan.md; needs --cozystack (default: the release's docs/vm-external-vlan.md; with neither, the report says no guide was given and which claims therefore have no verdict)")
}

// validateCozystack checks the release's flags against the others. The
// release itself is opened and rendered by framework/subject (Of), once
// these flags are valid.
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
	_, err := c.Mirrors()
	return err
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

// Mirrors parses --registry-mirror, which only --pull-pinned reads.
func (c *Config) Mirrors() ([]image.Mirror, error) {
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

// MultusProvenance is the provenance file beside the multus image archive
// of --images-archive, "" when none is loaded.
func (c *Config) MultusProvenance() string {
	for _, a := range strings.Split(c.Cluster.ImagesArchives, ",") {
		if filepath.Base(a) == "multus.tar" {
			return filepath.Join(filepath.Dir(a), "multus.provenance")
		}
	}
	return ""
}

// Given tells whether the flag was given on the command line.
func (c *Config) Given(name string) bool {
	set := false
	if c.fs != nil {
		c.fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	}
	return set
}
