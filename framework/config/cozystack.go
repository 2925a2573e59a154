package config

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/cozystack/vlan-conformance/fixtures"
	"github.com/cozystack/vlan-conformance/framework/atomicfile"
	"github.com/cozystack/vlan-conformance/framework/cozystack"
	"github.com/cozystack/vlan-conformance/framework/image"
	"github.com/cozystack/vlan-conformance/framework/stager"
)

// DefaultVariant is the platform's bundle variant the release is rendered
// for: the kind cluster and the lab are generic Linux, not Talos.
const DefaultVariant = "isp-full-generic"

// Subject is the release under test, rendered: set by Validate when
// --cozystack names a checkout, nil otherwise (the suite's own reference
// subject runs).
type Subject struct {
	Release *cozystack.Release
	Image   *cozystack.MultusImage
	// Platform and Multus are the release's renders with
	// networking.stageCniPlugins unset, as a cluster that never set it has.
	Platform *cozystack.Platform
	Multus   *cozystack.Multus
	// NoStaging lists the parts of plugin staging the release lacks, each
	// naming where it was looked for; empty when it has all three. A
	// release lacking any cannot stage the plugins and makes no STG claim
	// (Stages).
	NoStaging []string
	// Images are the image references of the multus render, as the
	// release pins them; Pinned the --image-archive files, each with the
	// reference whose digest it holds.
	Images []cozystack.ImageRef
	Pinned []*image.Pinned
	// Ledger lists every change the suite makes to the release's output.
	Ledger *cozystack.Ledger
	// Manifest is where Prepare wrote the rendered multus chart.
	Manifest string
	// Guide is the guide of --guide, else the one the release ships: its
	// step 2 NAD and its step 3 userData are what the specs apply
	// (NADConfig, UserData). nil when there is neither: the specs then
	// apply the suite's own objects, the ledger says so, and the claims
	// resting on the guide's words get no verdict (report.ForRelease).
	Guide   *cozystack.Guide
	nad     *cozystack.GuideNAD
	vm      *cozystack.GuideVM
	vlanNIC string
	// The VM lane's renders (cluster tier, --workload=vm): the platform
	// with the iaas bundle on, the instancetypes to apply before any VM,
	// and KubeVirt as Cozystack configures it.
	IaaS          *cozystack.IaaS
	Instancetypes *cozystack.Instancetypes
	KubeVirt      *cozystack.KubeVirt
}

// GuideNADFixture is the fixture the guide's step 2 NAD stands for.
const GuideNADFixture = "vlan100-bridge"

// NADConfig is spec.config of the named NAD fixture. Under a release the
// guide's own step 2 NAD stands for the bridge one; the others (jumbo,
// macvlan) are the suite's variations and stay its fixtures.
func (s *Subject) NADConfig(fixture string) string {
	if s != nil && s.nad != nil && fixture == GuideNADFixture {
		return s.nad.Config
	}
	return fixtures.NAD(fixture)
}

// UserData is the VM's userData at addr: the guide's step 3 cloud-config
// under a release with a guide (its one address replaced, checked by
// Validate), the suite's reference copy otherwise.
func (s *Subject) UserData(addr string) string {
	if s == nil || s.vm == nil {
		return fixtures.CloudInit(addr)
	}
	ud, err := s.vm.UserDataAt(addr)
	if err != nil {
		panic(err) // Validate checked it
	}
	return ud
}

// VLANNIC is the guest interface the guide's netplan gives the VLAN
// address (enp2s0 in the guide): a real guest names its NICs from the
// devices the instancetype and preference give, so a spec reading it in
// the guest checks that the guide's name holds.
func (s *Subject) VLANNIC() string {
	if s == nil || s.vm == nil {
		return fixtures.VLANNIC
	}
	return s.vlanNIC
}

func registerCozystack(fs *flag.FlagSet, c *Config) {
	c.fs = fs
	fs.StringVar(&c.Cozystack, "cozystack", "", "the Cozystack release under test: a checkout of cozystack/cozystack (git clone --depth 1 --branch <tag> https://github.com/cozystack/cozystack); its charts are rendered with Helm's engine and become the subject (default: the suite's own reference subject, and the report says no release was tested)")
	fs.Var(&c.ImageArchives, "image-archive", "`FILE` (repeatable): an image the release pins, as an air-gapped mirror holds it: an OCI layout directory, an oci-archive tarball, or a docker save tarball that keeps the registry's digest (one from Docker's containerd image store); its manifest or index digest must be the one the release's rendered multus chart pins, else it is bad input naming both; the lab's stager specs then run that image unchanged instead of the suite's build of its /cni-plugins; needs --cozystack, lab tier")
	fs.BoolVar(&c.PullPinned, "pull-pinned", false, "pull the image the release pins for the lab's stager specs (install-cni-plugins' multus image) by its digest reference, unless an --image-archive holds it, and run it unchanged as an --image-archive is run; kept as an OCI layout in $VCF_CACHE/pinned/<digest>, which later runs reuse without the network (a digest names one image); a registry that cannot be reached or lacks the digest is bad input naming the reference and the mirror; credentials from ~/.docker/config.json; needs --cozystack, lab tier")
	fs.Var(&c.RegistryMirrors, "registry-mirror", "`HOST=MIRROR` (repeatable): --pull-pinned pulls the images pinned on HOST from MIRROR (host[:port][/prefix]; http://... for plain HTTP, implied for localhost) by the same repository path and the pin's digest, as an air-gapped mirror keeps them, e.g. ghcr.io=localhost:5000")
	fs.StringVar(&c.Guide, "guide", "", "the guide the release's claims are judged by and its specs take their NAD and userData from: the page as the website ships it (content/en/docs/<version>/networking/vm-external-vlan.md of cozystack/website), or a copy; a markdown file, or a directory holding exactly one vm-external-vlan.md; needs --cozystack (default: the release's docs/vm-external-vlan.md; with neither, the report says no guide was given and which claims therefore have no verdict)")
}

// validateCozystack opens and renders the release; a checkout the suite
// cannot read or render is bad input. It writes nothing.
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
	rel, err := cozystack.Open(c.Cozystack)
	if err != nil {
		return fmt.Errorf("--cozystack: %w", err)
	}
	img, err := rel.MultusImage()
	if err != nil {
		return fmt.Errorf("--cozystack: the multus image: %w", err)
	}
	s := &Subject{Release: rel, Image: img, Ledger: &cozystack.Ledger{}}
	if s.Platform, s.Multus, err = rel.StagingOn(DefaultVariant, cozystack.Unset, s.Ledger); err != nil {
		return fmt.Errorf("--cozystack: rendering multus as the platform does (variant %s, networking.stageCniPlugins unset): %w", DefaultVariant, err)
	}
	s.NoStaging = noStaging(img, s.Platform, s.Multus)
	s.Images = s.Multus.Images()
	if err := s.readArchives(c.ImageArchives); err != nil {
		return err
	}
	if err := s.checkMirrors(mirrors); err != nil {
		return err
	}
	if c.PullPinned {
		if err := s.pullPinned(mirrors); err != nil {
			return err
		}
	}
	if s.Stages() {
		if _, err := stager.ParseSubject([]byte(s.Multus.Render.Manifest), rel.Path(cozystack.MultusChart)); err != nil {
			return fmt.Errorf("--cozystack: the rendered multus chart has no stager subject: %w", err)
		}
	}
	if err := s.readGuide(c.Guide); err != nil {
		return err
	}
	if c.Tier == "cluster" && !s.Stages() && c.Cluster.CNIStaging != "installer" {
		// The installer stands for the nodes' provisioning whatever
		// --cni-staging says (platform/cluster/multus).
		if err := c.checkInstallerPlugins(); err != nil {
			return fmt.Errorf("--cozystack: this release does not stage the CNI plugins: %w", err)
		}
	}
	if c.Tier == "cluster" && c.Cluster.Workload == "vm" {
		if err := s.renderVMLane(); err != nil {
			return fmt.Errorf("--cozystack: %w", err)
		}
	}
	if s.Guide == nil {
		s.ledgerNoGuide()
	}
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

// noStaging lists the parts of plugin staging the release lacks: the
// init container in the DaemonSet the platform renders, the platform's
// stageCniPlugins handed to multus, the Dockerfile's plugin stage.
func noStaging(img *cozystack.MultusImage, p *cozystack.Platform, m *cozystack.Multus) []string {
	var out []string
	if !slices.Contains(m.InitContainers(), stager.InitContainerName) {
		out = append(out, fmt.Sprintf("%s renders no init container %s", cozystack.MultusChart, stager.InitContainerName))
	}
	if _, ok := p.MultusValues["stageCniPlugins"]; !ok {
		out = append(out, fmt.Sprintf("%s has no networking.stageCniPlugins", cozystack.PlatformChart))
	}
	if !img.Stages() {
		out = append(out, fmt.Sprintf("%s/Dockerfile has no plugin stage", cozystack.MultusImageDir))
	}
	return out
}

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

// pullPinned pulls the image the stager specs run, unless an archive
// holds it or the release does not stage (no stager specs run), and
// adds it as an --image-archive is added.
func (s *Subject) pullPinned(mirrors []image.Mirror) error {
	im, ok := s.StagerImageRef()
	if !ok || !s.Stages() || s.PinnedFor(im) != nil {
		return nil
	}
	p, err := image.Pull(im.Ref, mirrors, PulledCache())
	if err != nil {
		return fmt.Errorf("--pull-pinned: %w", err)
	}
	s.Pinned = append(s.Pinned, p)
	return nil
}

// PulledCache is where --pull-pinned keeps what it pulled, by digest.
func PulledCache() string { return filepath.Join(CacheRoot(), "pinned") }

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
// unchanged. nil without one.
func (c *Config) StagerPinned() *image.Pinned {
	s := c.Subject()
	if s == nil {
		return nil
	}
	if im, ok := s.StagerImageRef(); ok {
		return s.PinnedFor(im)
	}
	return nil
}

// Stages tells whether the subject stages the CNI plugins: the suite's
// reference does; a release does when it has every part of it.
func (s *Subject) Stages() bool { return s == nil || len(s.NoStaging) == 0 }

// readGuide reads the guide of --guide (flag), else the release's own, and
// checks that its step 2 NAD and step 3 values are there and that its
// userData can be given each VM's address. A release that ships none,
// with no --guide, leaves Guide nil: no other text is read as its guide.
func (s *Subject) readGuide(flag string) (err error) {
	what := "--cozystack"
	if flag != "" {
		what = "--guide"
		var p string
		if p, err = cozystack.FindGuide(flag); err == nil {
			s.Guide, err = cozystack.ReadGuide(p, cozystack.FromFlag)
		}
	} else if s.Guide, err = s.Release.Guide(); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	// Which file a broken block is in: the release's, or the one given.
	defer func() {
		if err != nil {
			err = fmt.Errorf("%s: %s: %w", what, s.Guide.Path, err)
		}
	}()
	if s.nad, err = s.Guide.NAD(); err != nil {
		return err
	}
	if s.vm, err = s.Guide.VMValues(); err != nil {
		return err
	}
	if _, err = s.vm.UserDataAt("192.0.2.1/24"); err != nil {
		return err
	}
	_, s.vlanNIC, err = s.vm.Address()
	return err
}

// NoGuide says why a release's run has no guide, for the report and the ledger.
const NoGuide = "no guide was given (--guide) and the release ships none (" + cozystack.GuidePath + ")"

// ledgerNoGuide lists what the specs apply in the guide's place: the
// suite's own objects, so that no verdict seems to rest on a guide.
func (s *Subject) ledgerNoGuide() {
	why := NoGuide + ": the claims that rest on the guide's words get no verdict; the others are judged on the suite's own objects"
	s.Ledger.Add(cozystack.Change{Kind: "subject", Object: "the guide's step 2 NAD (" + GuideNADFixture + ")", What: "the suite's own fixtures/nad/" + GuideNADFixture + ".json", Why: why})
	s.Ledger.Add(cozystack.Change{Kind: "subject", Object: "the guide's step 3 userData", What: "the suite's own fixtures/cloud-init/vlan100.yaml, at each VM's address", Why: why})
	if s.IaaS != nil {
		s.Ledger.Add(cozystack.Change{Kind: "subject", Object: "every VM", What: "the suite's own VirtualMachine (workload.RenderVM), not " + cozystack.VMInstance + " rendered with the guide's step 3 values", Why: why})
	}
}

// renderVMLane renders what the VM lane takes from the release.
func (s *Subject) renderVMLane() (err error) {
	if s.IaaS, err = s.Release.RenderIaaS(DefaultVariant, s.Ledger); err != nil {
		return fmt.Errorf("rendering the platform with the iaas bundle (variant %s): %w", DefaultVariant, err)
	}
	if s.Instancetypes, err = s.Release.RenderInstancetypes(s.IaaS); err != nil {
		return err
	}
	if s.KubeVirt, err = s.Release.RenderKubeVirt(s.IaaS, s.Ledger); err != nil {
		return err
	}
	return nil
}

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

// Subject is the rendered release, nil without --cozystack.
func (c *Config) Subject() *Subject { return c.subject }

// Prepare makes the validated configuration ready to run: with
// --cozystack it writes the rendered multus chart to
// <report-dir>/cozystack/multus.yaml and, where the release stages the
// plugins, makes it the stager's subject, unless --stager-manifest was
// given (then that one is, and the ledger says so), and the stager's
// reference image carries the plugins the release's Dockerfile extracts.
func (c *Config) Prepare() error {
	s := c.subject
	if s == nil {
		return nil
	}
	dir := filepath.Join(c.ReportDir, "cozystack")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// Each process of the run keeps its own ledger file; the driver's
	// report merges them (LedgerFiles).
	if err := s.Ledger.Persist(filepath.Join(dir, fmt.Sprintf("ledger-%d.json", os.Getpid()))); err != nil {
		return err
	}
	s.Manifest = filepath.Join(dir, "multus.yaml")
	if err := atomicfile.Write(s.Manifest, strings.NewReader(s.Multus.Render.Manifest), 0o644); err != nil {
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

// LedgerFiles are the ledger files of the run's processes (Prepare).
func (c *Config) LedgerFiles() string {
	return filepath.Join(c.ReportDir, "cozystack", "ledger-*.json")
}

// flagSet tells whether the flag was given on the command line.
func (c *Config) flagSet(name string) bool {
	set := false
	if c.fs != nil {
		c.fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	}
	return set
}
