// Package subject is the release under test as the suite takes it: a
// Cozystack checkout rendered with Helm's engine, the guide its claims are
// judged by, the images it pins (from archives, or pulled through
// mirrors), and the ledger of every change the suite makes to its output.
// config builds it from the flags (Open); the platforms, the specs and the
// report read it. Without --cozystack there is none (a nil *Subject): the
// suite's own reference subject runs, and the accessors answer for it.
package subject

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cozystack/vlan-conformance/fixtures"
	"github.com/cozystack/vlan-conformance/framework/atomicfile"
	"github.com/cozystack/vlan-conformance/framework/cozystack"
	"github.com/cozystack/vlan-conformance/framework/image"
	"github.com/cozystack/vlan-conformance/framework/stager"
)

// DefaultVariant is the platform's bundle variant the release is rendered
// for: the kind cluster and the lab are generic Linux, not Talos.
const DefaultVariant = "isp-full-generic"

// Subject is the release under test, rendered (Open).
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
	// Manifest is where Write wrote the rendered multus chart.
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

// Options are what the run's flags ask of the release under test.
type Options struct {
	Dir      string   // --cozystack: a checkout of cozystack/cozystack
	Guide    string   // --guide: a guide other than the release's own
	Archives []string // --image-archive: images the release pins
	// Pull is --pull-pinned: pull the stager's pinned image, unless an
	// archive holds it, from Mirrors (--registry-mirror) or its registry,
	// and keep it in PullCache.
	Pull      bool
	Mirrors   []image.Mirror
	PullCache string
	// WithoutStaging checks what stands in for staging when the release
	// has none (the cluster's installer); nil when nothing needs to.
	WithoutStaging func() error
	// VMLane renders what the cluster's VM lane takes from the release.
	VMLane bool
}

// Open opens and renders the release; a checkout the suite cannot read or
// render, or an image or guide that does not fit it, is bad input, named
// by its flag. It writes nothing but what Pull pulls, in PullCache.
func Open(o Options) (*Subject, error) {
	rel, err := cozystack.Open(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("--cozystack: %w", err)
	}
	img, err := rel.MultusImage()
	if err != nil {
		return nil, fmt.Errorf("--cozystack: the multus image: %w", err)
	}
	s := &Subject{Release: rel, Image: img, Ledger: &cozystack.Ledger{}}
	if s.Platform, s.Multus, err = rel.StagingOn(DefaultVariant, cozystack.Unset, s.Ledger); err != nil {
		return nil, fmt.Errorf("--cozystack: rendering multus as the platform does (variant %s, networking.stageCniPlugins unset): %w", DefaultVariant, err)
	}
	s.NoStaging = noStaging(img, s.Platform, s.Multus)
	s.Images = s.Multus.Images()
	if err := s.readArchives(o.Archives); err != nil {
		return nil, err
	}
	if err := s.checkMirrors(o.Mirrors); err != nil {
		return nil, err
	}
	if o.Pull {
		if err := s.pullPinned(o.Mirrors, o.PullCache); err != nil {
			return nil, err
		}
	}
	if s.Stages() {
		if _, err := stager.ParseInitContainer([]byte(s.Multus.Render.Manifest), rel.Path(cozystack.MultusChart)); err != nil {
			return nil, fmt.Errorf("--cozystack: the rendered multus chart has no stager subject: %w", err)
		}
	}
	if err := s.readGuide(o.Guide); err != nil {
		return nil, err
	}
	if !s.Stages() && o.WithoutStaging != nil {
		if err := o.WithoutStaging(); err != nil {
			return nil, fmt.Errorf("--cozystack: this release does not stage the CNI plugins: %w", err)
		}
	}
	if o.VMLane {
		if err := s.renderVMLane(); err != nil {
			return nil, fmt.Errorf("--cozystack: %w", err)
		}
	}
	if s.Guide == nil {
		s.ledgerNoGuide()
	}
	return s, nil
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

// Stages tells whether the subject stages the CNI plugins: the suite's
// reference does; a release does when it has every part of it.
func (s *Subject) Stages() bool { return s == nil || len(s.NoStaging) == 0 }

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
// Open), the suite's reference copy otherwise.
func (s *Subject) UserData(addr string) string {
	if s == nil || s.vm == nil {
		return fixtures.CloudInit(addr)
	}
	ud, err := s.vm.UserDataAt(addr)
	if err != nil {
		panic(err) // Open checked it
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

// Write writes the run's files into dir: this process's ledger, saved
// again after every change (each process of the run keeps its own; the
// driver's report merges them, LedgerFiles), and the rendered multus
// chart (Manifest).
func (s *Subject) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := s.Ledger.Persist(filepath.Join(dir, fmt.Sprintf("ledger-%d.json", os.Getpid()))); err != nil {
		return err
	}
	s.Manifest = filepath.Join(dir, "multus.yaml")
	return atomicfile.Write(s.Manifest, strings.NewReader(s.Multus.Render.Manifest), 0o644)
}

// LedgerFiles are the ledger files the run's processes Write under a
// report dir (into Dir(reportDir)).
func LedgerFiles(reportDir string) string { return filepath.Join(Dir(reportDir), "ledger-*.json") }
