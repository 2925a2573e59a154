package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cozystack/vlan-conformance/framework/claims"
	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/cozystack"
	"github.com/cozystack/vlan-conformance/framework/report"
	"github.com/cozystack/vlan-conformance/framework/stager"
	"github.com/cozystack/vlan-conformance/framework/subject"
)

// describeRelease fills the report's release rows: which Cozystack commit
// was the subject, its guide (which file, from --guide or the release, its
// hash; or why it has none), and every change the suite made to
// what it renders and ships. Without --cozystack they stay empty and the
// report says no release was tested.
func describeRelease(cfg *config.Config, s *subject.Subject, env *report.Environment) {
	if s == nil {
		return
	}
	rel := s.Release
	env.Release = fmt.Sprintf("%s (commit read from %s; checkout %s)", rel.Commit, rel.CommitFrom, rel.Dir)
	env.Guide = guideName(s)
	if s.Guide == nil {
		env.NoGuide = subject.NoGuide
	}
	defer func() { env.Changes = s.Ledger.Markdown() }()
	if !s.Stages() {
		env.StagerSubject = fmt.Sprintf("none: this release does not stage the CNI plugins (%s), so it makes no STG claim and their specs were left out", strings.Join(s.NoStaging, "; "))
	}
	if c := labStagerImage(cfg, s); c != nil {
		s.Ledger.Add(*c)
	}
	env.Images = pinnedImages(cfg, s)
	if im, ok := s.StagerImageRef(); ok && cfg.Tier == "lab" && s.Stages() && s.PinnedFor(im) == nil {
		env.StagerImage = "an image built from the checkout, not the pinned " + im.Ref
		if cfg.StagerImage != "" {
			env.StagerImage = "the user's --stager-image, not the pinned " + im.Ref
		}
	}
	ledgers := subject.LedgerFiles(cfg.ReportDir)
	if err := s.Ledger.Merge(ledgers); err != nil {
		s.Ledger.Add(cozystack.Change{Kind: "report", Object: ledgers, What: "unreadable: " + err.Error(), Why: "a process's changes may be missing from this list"})
	}
	if m := s.StagerManifest(cfg); m == s.Manifest {
		env.StagerSubject = fmt.Sprintf("install-cni-plugins of the release's %s, rendered with Helm (variant %s, networking.stageCniPlugins unset) to %s", cozystack.MultusChart, subject.DefaultVariant, m)
	}
}

// labStagerImage is the ledger's row for the image the lab's stager specs
// ran install-cni-plugins with, in place of the reference the release
// pins (nil off the lab, or for a release that does not stage). The lab
// has no container runtime: whatever the image, the script runs with the
// host's shell and tools over its /cni-plugins (framework/stager).
func labStagerImage(cfg *config.Config, s *subject.Subject) *cozystack.Change {
	im, ok := s.StagerImageRef()
	if cfg.Tier != "lab" || !s.Stages() || !ok {
		return nil
	}
	c := &cozystack.Change{Kind: "image", Object: im.String()}
	switch p := s.StagerPinned(); {
	case p != nil:
		c.What = im.Ref + ", unchanged: its /cni-plugins read from " + p.Source() + "; the script run container-less"
		c.Why = "the lab has no container runtime: the script runs with the host's /bin/sh and coreutils over the image's /cni-plugins"
	case cfg.StagerImage != "":
		c.What = im.Ref + " → the user's image " + cfg.StagerImage + " (--stager-image), run container-less"
		c.Why = "the user's image in place of the pinned one"
	default:
		c.What = fmt.Sprintf("%s → the suite's build of its /cni-plugins: %s of CNI plugins %s from --plugin-dir %s, run container-less",
			im.Ref, strings.Join(s.Image.Plugins, " "), s.Image.PluginsVersion, cfg.PluginDir)
		c.Why = "no pinned image was given (--image-archive or --pull-pinned gives it); the names and the version are read from " + s.Image.Dockerfile
	}
	return c
}

// pinnedImages is the report's section on the images the release pins:
// for each container of the rendered multus chart, the reference it pins
// and what this run used for it: the pinned image itself, an image built
// from the checkout, or nothing (a container the run does not start);
// then where each pinned image the run read came from, and which pinned
// images it could not inspect (no archive or pull held them).
func pinnedImages(cfg *config.Config, s *subject.Subject) string {
	var b strings.Builder
	b.WriteString("| container | pinned reference | this run used |\n|---|---|---|\n")
	var unread []string
	for _, im := range s.Images {
		fmt.Fprintf(&b, "| %s | `%s` | %s |\n", im, im.Ref, strings.ReplaceAll(imageUsed(cfg, s, im), "|", `\|`))
		if r := "`" + im.Ref + "`"; s.PinnedFor(im) == nil && !slices.Contains(unread, r) {
			unread = append(unread, r)
		}
	}
	for _, p := range s.Pinned {
		if p.Pulled != "" {
			fmt.Fprintf(&b, "\n`--pull-pinned`: `%s`, pulled from %s, kept as the %s %s (its %s).\n", p.Ref, p.Pulled, p.Format, p.Archive, p.Compared)
			continue
		}
		fmt.Fprintf(&b, "\n`--image-archive` %s: holds `%s` (its %s).\n", p.Archive, p.Ref, p.Compared)
	}
	if len(unread) > 0 {
		fmt.Fprintf(&b, "\nNot inspected by the suite: %s (no --image-archive held it; --pull-pinned did not pull it).\n", strings.Join(unread, ", "))
	}
	return b.String()
}

// imageUsed is what the run used for the image im pins.
func imageUsed(cfg *config.Config, s *subject.Subject, im cozystack.ImageRef) string {
	stagerImage := im.Field == "initContainer" && im.Name == stager.InitContainerName
	if cfg.Tier == "cluster" {
		if cfg.ExistingCluster() {
			return "none: the suite applies no Multus to an existing cluster (--kubeconfig); it runs the cluster's own"
		}
		if img := cfg.Cluster.CNIPluginsImage; img != "" {
			return "an image built from the checkout: `" + img + "`, by images/multus/build.sh from the release's Dockerfile"
		}
		return "the pinned reference itself, pulled by the nodes"
	}
	switch {
	case !stagerImage:
		return "none: the lab starts no Multus daemon"
	case !s.Stages():
		return "none: the release does not stage the CNI plugins, so its stager specs were left out"
	case s.PinnedFor(im) != nil:
		return "the pinned image itself, unchanged, from " + s.PinnedFor(im).Source() + ": the STG verdicts hold for it"
	case cfg.StagerImage != "":
		return "the user's image `" + cfg.StagerImage + "` (--stager-image), not the pinned one: the STG verdicts hold for that image"
	}
	return fmt.Sprintf("an image built from the checkout: the suite's build of its /cni-plugins (%s of CNI plugins %s, from --plugin-dir %s, as %s extracts them), not the pinned image: the STG verdicts hold for that build (--image-archive or --pull-pinned gives the pinned one)",
		strings.Join(s.Image.Plugins, " "), s.Image.PluginsVersion, cfg.PluginDir, cozystack.MultusImageDir+"/Dockerfile")
}

// releaseVerdicts is what the release under test makes of each claim
// (report.ForRelease): its guide (--guide, or as it ships it), and
// whether it stages.
func releaseVerdicts(s *subject.Subject, vs []report.Verdict) []report.Verdict {
	if s == nil {
		return vs
	}
	return report.ForRelease(vs, guideOf(s), s.NoStaging)
}

// guideOf is the subject's guide as the report names it, nil when it has none.
func guideOf(s *subject.Subject) *report.Guide {
	if s.Guide == nil {
		return nil
	}
	return &report.Guide{Name: s.Guide.Origin(), SHA256: s.Guide.SHA256, Text: s.Guide.Text}
}

// guideName is the report's guide row: which guide, or why none.
func guideName(s *subject.Subject) string {
	if g := guideOf(s); g != nil {
		return g.String()
	}
	return "none: " + subject.NoGuide
}

// guideLines are what a dry run says of the release's guide: which one
// the verdicts would rest on, and which claims would get none, and why
// ("" without a release).
func guideLines(s *subject.Subject) string {
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
	for _, v := range releaseVerdicts(s, vs) {
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
