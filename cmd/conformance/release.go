package main

import (
	"fmt"
	"strings"

	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/cozystack"
	"github.com/cozystack/vlan-conformance/framework/report"
	"github.com/cozystack/vlan-conformance/framework/stager"
)

// describeRelease fills the report's release rows: which Cozystack commit
// was the subject, its guide's hash, and every change the suite made to
// what it renders and ships. Without --cozystack they stay empty and the
// report says no release was tested.
func describeRelease(cfg *config.Config, env *report.Environment) {
	s := cfg.Subject()
	if s == nil {
		return
	}
	rel := s.Release
	env.Release = fmt.Sprintf("%s (commit read from %s; checkout %s)", rel.Commit, rel.CommitFrom, rel.Dir)
	env.Guide = fmt.Sprintf("%s as the release ships it, sha256 %s", cozystack.GuidePath, s.Guide.SHA256)
	defer func() { env.Changes = s.Ledger.Markdown() }()
	if !s.Stages() {
		env.StagerSubject = fmt.Sprintf("none: this release does not stage the CNI plugins (%s), so it makes no STG claim and their specs were left out", strings.Join(s.NoStaging, "; "))
	}
	if cfg.Tier == "lab" && cfg.StagerImage == "" && s.Stages() {
		s.Ledger.Add(cozystack.Change{
			Kind:   "image",
			Object: "init container " + stager.InitContainerName,
			What: fmt.Sprintf("runs container-less with the suite's build of its image's /cni-plugins: %s of CNI plugins %s from --plugin-dir %s, not %s",
				strings.Join(s.Image.Plugins, " "), s.Image.PluginsVersion, cfg.PluginDir, imageRef(s)),
			Why: "the lab has no image registry; the names and the version are read from " + s.Image.Dockerfile,
		})
	}
	if err := s.Ledger.Merge(cfg.LedgerFiles()); err != nil {
		s.Ledger.Add(cozystack.Change{Kind: "report", Object: cfg.LedgerFiles(), What: "unreadable: " + err.Error(), Why: "a process's changes may be missing from this list"})
	}
	if cfg.StagerManifest != s.Manifest {
		return
	}
	env.StagerSubject = fmt.Sprintf("install-cni-plugins of the release's %s, rendered with Helm (variant %s, networking.stageCniPlugins unset) to %s", cozystack.MultusChart, config.DefaultVariant, cfg.StagerManifest)
}

func imageRef(s *config.Subject) string {
	subj, err := stager.ParseSubject([]byte(s.Multus.Render.Manifest), "")
	if err != nil {
		return "the image the chart names"
	}
	return subj.Container.Image
}

// releaseVerdicts is what the release under test makes of each claim
// (report.ForRelease): its guide as it ships it, and whether it stages.
func releaseVerdicts(cfg *config.Config, vs []report.Verdict) []report.Verdict {
	s := cfg.Subject()
	if s == nil {
		return vs
	}
	return report.ForRelease(vs, report.Guide{Path: cozystack.GuidePath, SHA256: s.Guide.SHA256, Text: s.Guide.Text}, s.NoStaging)
}
