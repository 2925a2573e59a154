package subject

import (
	"fmt"
	"path/filepath"

	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/cozystack"
	"github.com/cozystack/vlan-conformance/framework/stager"
)

// Of is the release under test that cfg's flags name, opened and rendered
// (Open): --cozystack, --guide and the images it pins; nil without
// --cozystack (the suite's own reference subject). cfg is valid
// (config.Validate). A release the suite cannot read or render, or whose
// images do not match what it pins, is bad input. It writes nothing but
// what --pull-pinned pulls, in its cache (config.PulledCache).
func Of(cfg *config.Config) (*Subject, error) {
	if cfg.Cozystack == "" {
		return nil, nil
	}
	mirrors, err := cfg.Mirrors()
	if err != nil {
		return nil, err
	}
	o := Options{
		Dir: cfg.Cozystack, Guide: cfg.Guide,
		Archives: cfg.ImageArchives, Pull: cfg.PullPinned, Mirrors: mirrors, PullCache: config.PulledCache(),
		VMLane: cfg.Tier == "cluster" && cfg.Cluster.Workload == "vm",
	}
	if cfg.Tier == "cluster" && cfg.Cluster.CNIStaging != "installer" {
		// The installer stands for the nodes' provisioning whatever
		// --cni-staging says (platform/cluster/multus).
		o.WithoutStaging = cfg.CheckInstallerPlugins
	}
	s, err := Open(o)
	if err != nil {
		return nil, err
	}
	img := s.Image
	// On a kind cluster the release's image references are pulled as they
	// are, unless --cni-plugins-image names a local build (the offline
	// lane), which must then be the release's build.
	if cfg.Tier == "cluster" && !cfg.ExistingCluster() && cfg.Cluster.CNIPluginsImage != "" {
		if p := cfg.MultusProvenance(); p != "" {
			if err := img.CheckProvenance(p); err != nil {
				return nil, fmt.Errorf("--cozystack: %w (rebuild it: make offline-images COZYSTACK=%s)", err, cfg.Cozystack)
			}
			s.Ledger.Add(cozystack.Change{Kind: "image", Object: "the multus image " + cfg.Cluster.CNIPluginsImage, What: "built here by images/multus/build.sh from the release's Dockerfile (provenance " + p + " checked against it)", Why: "no image registry: the release's pins, patches and plugin names, built from the Go module proxy"})
		}
	}
	if cfg.Tier == "lab" && img.Stages() {
		if v, err := stager.ReleaseVersion(cfg.PluginDir); err == nil && v != img.PluginsVersion {
			return nil, fmt.Errorf("--cozystack: its multus image carries CNI plugins %s (%s), --plugin-dir %s holds %s: build that release with `make plugins PLUGINS_VERSION=%s` and pass --plugin-dir=bin/cni/%s", img.PluginsVersion, img.Dockerfile, cfg.PluginDir, v, img.PluginsVersion, img.PluginsVersion)
		}
	}
	return s, nil
}

// Prepare makes the subject ready to run: it writes the rendered multus
// chart and the ledger to <report-dir>/cozystack (Write), and says in the
// ledger when --stager-manifest stands in for the rendered DaemonSet.
// Nothing for a nil Subject.
func (s *Subject) Prepare(cfg *config.Config) error {
	if s == nil {
		return nil
	}
	if err := s.Write(Dir(cfg.ReportDir)); err != nil {
		return err
	}
	if cfg.Given("stager-manifest") {
		s.Ledger.Add(cozystack.Change{Kind: "subject", Object: "init container " + stager.InitContainerName, What: "taken from --stager-manifest " + cfg.StagerManifest + " instead of the rendered DaemonSet", Why: "the user's (or a negative control's) subject"})
	}
	return nil
}

// Dir is where Prepare writes the release's files under a report dir.
func Dir(reportDir string) string { return filepath.Join(reportDir, "cozystack") }

// StagerManifest is the DaemonSet manifest whose install-cni-plugins init
// container the stager runs: --stager-manifest when given, else the
// release's rendered chart where it stages the plugins (written by
// Prepare), else the suite's reference manifest (the flag's default).
func (s *Subject) StagerManifest(cfg *config.Config) string {
	if s == nil || cfg.Given("stager-manifest") || !s.Stages() || s.Manifest == "" {
		return cfg.StagerManifest
	}
	return s.Manifest
}

// StagerImagePlugins are the plugins the image the suite builds carries:
// the names the release's Dockerfile extracts, else nil (the 14); what the
// run's control makes of them where it needs another image.
func (s *Subject) StagerImagePlugins(cfg *config.Config) []string {
	var carried []string
	if s != nil {
		carried = s.Image.Plugins
	}
	return cfg.SelectedControl().StagerImagePlugins(carried)
}

// StagerOptions are the stager harness's options from the run's flags and
// the subject: the suite's harnesses and the lab's nodes stage from the
// same subject.
func (s *Subject) StagerOptions(cfg *config.Config) stager.Options {
	return stager.Options{
		Manifest:     s.StagerManifest(cfg),
		Image:        cfg.StagerImage,
		Pinned:       s.StagerPinned(),
		ImagePlugins: s.StagerImagePlugins(cfg),
		Release:      cfg.PluginDir,
		OlderRelease: cfg.OldPluginDir,
		WorkDir:      cfg.WorkDir,
	}
}
