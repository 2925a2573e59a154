package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	"github.com/cozystack/vlan-conformance/framework/claims"
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
	if b, err := os.ReadFile(rel.Path(cozystack.GuidePath)); err == nil {
		sum := sha256.Sum256(b)
		env.Guide = fmt.Sprintf("%s as the release ships it, sha256 %s", cozystack.GuidePath, hex.EncodeToString(sum[:]))
	}
	defer func() { env.Changes = s.Ledger.Markdown() }()
	if cfg.Tier == "lab" && cfg.StagerImage == "" {
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

// GuideSilent is the verdict of a claim whose words the release's guide no
// longer carries: no verdict is made up for it.
const GuideSilent = "the guide no longer says this"

// guideVerdicts replaces the verdict of every claim whose quote the
// release's guide lacks; the specs' own outcome stays in the reason.
func guideVerdicts(cfg *config.Config, vs []report.Verdict) []report.Verdict {
	s := cfg.Subject()
	if s == nil {
		return vs
	}
	b, err := os.ReadFile(s.Release.Path(cozystack.GuidePath))
	if err != nil {
		return vs
	}
	guide := claims.Normalize(string(b))
	for i, v := range vs {
		if q := v.Claim.Quote; q != "" && !strings.Contains(guide, claims.Normalize(q)) {
			vs[i].Reason = fmt.Sprintf("%q is not in %s (its specs: %s)", q, cozystack.GuidePath, strings.TrimSpace(v.Verdict+" "+v.Reason))
			vs[i].Verdict = GuideSilent
		}
	}
	return vs
}
