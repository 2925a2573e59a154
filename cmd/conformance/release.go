package main

import (
	"fmt"
	"strings"

	"github.com/cozystack/vlan-conformance/framework/claims"
	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/cozystack"
	"github.com/cozystack/vlan-conformance/framework/report"
	"github.com/cozystack/vlan-conformance/framework/stager"
)

// describeRelease fills the report's release rows: which Cozystack commit
// was the subject, its guide (which file, from --guide or the release, its
// hash; or why it has none), and every change the suite made to
// what it renders and ships. Without --cozystack they stay empty and the
// report says no release was tested.
func describeRelease(cfg *config.Config, env *report.Environment) {
	s := cfg.Subject()
	if s == nil {
		return
	}
	rel := s.Release
	env.Release = fmt.Sprintf("%s (commit read from %s; checkout %s)", rel.Commit, rel.CommitFrom, rel.Dir)
	env.Guide = guideName(s)
	if s.Guide == nil {
		env.NoGuide = config.NoGuide
	}
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
// (report.ForRelease): its guide (--guide, or as it ships it), and
// whether it stages.
func releaseVerdicts(cfg *config.Config, vs []report.Verdict) []report.Verdict {
	s := cfg.Subject()
	if s == nil {
		return vs
	}
	return report.ForRelease(vs, guideOf(s), s.NoStaging)
}

// guideOf is the subject's guide as the report names it, nil when it has none.
func guideOf(s *config.Subject) *report.Guide {
	if s.Guide == nil {
		return nil
	}
	return &report.Guide{Name: s.Guide.Origin(), SHA256: s.Guide.SHA256, Text: s.Guide.Text}
}

// guideName is the report's guide row: which guide, or why none.
func guideName(s *config.Subject) string {
	if g := guideOf(s); g != nil {
		return g.String()
	}
	return "none: " + config.NoGuide
}

// guideLines are what a dry run says of the release's guide: which one
// the verdicts would rest on, and which claims would get none, and why
// ("" without a release).
func guideLines(cfg *config.Config) string {
	s := cfg.Subject()
	if s == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# the guide: %s\n", guideName(s))
	const planned = "planned"
	var vs []report.Verdict
	for _, c := range claims.All {
		vs = append(vs, report.Verdict{Claim: c, Verdict: planned})
	}
	unjudged := map[string][]string{}
	var order []string
	for _, v := range releaseVerdicts(cfg, vs) {
		if v.Verdict == planned {
			continue
		}
		if unjudged[v.Verdict] == nil {
			order = append(order, v.Verdict)
		}
		unjudged[v.Verdict] = append(unjudged[v.Verdict], v.Claim.ID)
	}
	for _, verdict := range order {
		fmt.Fprintf(&b, "# %s, whatever the specs find: %s\n", verdict, strings.Join(unjudged[verdict], ", "))
	}
	return b.String()
}
