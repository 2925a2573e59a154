package cozystack

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// CopyTo copies the checkout's files the suite reads (required paths and
// the charts) into dir, so that a negative control can edit its copy; the
// release itself is never written.
func (r *Release) CopyTo(dir string) (*Release, error) {
	for _, p := range []string{"SOURCE", GuidePath, PlatformChart, MultusChart, KubeVirtChart, InstanceTypes, VMInstance, "packages/library"} {
		src := r.Path(p)
		if _, err := os.Stat(src); os.IsNotExist(err) {
			continue
		}
		err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(r.Dir, path)
			dst := filepath.Join(dir, rel)
			if d.IsDir() {
				return os.MkdirAll(dst, 0o755)
			}
			if d.Type()&fs.ModeSymlink != 0 {
				t, err := os.Readlink(path)
				if err != nil {
					return err
				}
				return os.Symlink(t, dst)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			return os.WriteFile(dst, b, 0o644)
		})
		if err != nil {
			return nil, err
		}
	}
	c := *r
	c.Dir = dir
	return &c, nil
}

var (
	stagingHelper = regexp.MustCompile(`(?s)\{\{-?\s*define\s+"cozystack\.platform\.stageCniPlugins"\s*-?\}\}.*?\{\{-?\s*end\s*-?\}\}\s*\n\s*\{\{-?\s*end\s*-?\}\}`)
	failCall      = regexp.MustCompile(`\{\{-?\s*fail\s*\(.*?\)\s*-?\}\}`)
)

// BreakTypoToFalse edits the copy's platform helper
// cozystack.platform.stageCniPlugins so that a spelling it cannot read
// resolves to false instead of failing (the control of STG-10).
func (r *Release) BreakTypoToFalse() error {
	path := r.Path(PlatformChart + "/templates/_helpers.tpl")
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	text := string(b)
	loc := stagingHelper.FindStringIndex(text)
	if loc == nil {
		return fmt.Errorf("%s: no define \"cozystack.platform.stageCniPlugins\" block to break", path)
	}
	block := text[loc[0]:loc[1]]
	if !failCall.MatchString(block) {
		return fmt.Errorf("%s: the stageCniPlugins helper has no fail call to replace", path)
	}
	edited := failCall.ReplaceAllString(block, "false")
	return os.WriteFile(path, []byte(strings.Replace(text, block, edited, 1)), 0o644)
}

var (
	multusStaging   = regexp.MustCompile(`(?s)\{\{-?\s*\$stageCniPlugins\s*:=.*?\n\{\{-?\s*end\s*-?\}\}\n`)
	platformStaging = regexp.MustCompile(`\{\{-?\s*\$multusComponents\s*:=[^\n]*stageCniPlugins[^\n]*\n\{\{\s*include\s+"cozystack\.platform\.package"\s+\(list\s+"cozystack\.multus"\s+"default"\s+\$\s+\$multusComponents\)\s*\}\}`)
)

// DropStaging edits the copy into a release as they were before plugin
// staging (v1.6.x): the multus template without install-cni-plugins, the
// platform handing multus no stageCniPlugins, the Dockerfile without its
// plugin stage. The guide is left as it is (DropGuideSection). Tests that
// cannot fetch such a release use it; an edit that finds nothing to drop
// is an error, so a changed subject cannot pass for one without staging.
func (r *Release) DropStaging() error {
	if err := r.edit(MultusChart+"/templates/multus-daemonset-thick.yml", func(s string) string {
		return multusStaging.ReplaceAllString(s, "")
	}); err != nil {
		return err
	}
	if err := r.edit(PlatformChart+"/templates/bundles/system.yaml", func(s string) string {
		return platformStaging.ReplaceAllString(s, `{{include "cozystack.platform.package.default" (list "cozystack.multus" $) }}`)
	}); err != nil {
		return err
	}
	return r.edit(MultusImageDir+"/Dockerfile", dropPluginStage)
}

// dropPluginStage is a Dockerfile without the instructions (their
// continuation lines joined) and comments that name the CNI plugins.
func dropPluginStage(text string) string {
	var out, inst strings.Builder
	for _, line := range strings.SplitAfter(text, "\n") {
		inst.WriteString(line)
		if strings.HasSuffix(strings.TrimRight(line, "\n"), "\\") {
			continue
		}
		if s := inst.String(); !strings.Contains(s, "cni-plugins") && !strings.Contains(s, "CNI_PLUGINS") {
			out.WriteString(s)
		}
		inst.Reset()
	}
	return out.String() + inst.String()
}

// DropGuideSection removes the copy's guide section under heading, up to
// the next heading of its level or above (headings in fenced blocks are
// not headings).
func (r *Release) DropGuideSection(title string) error {
	return r.edit(GuidePath, func(s string) string {
		var out strings.Builder
		level, inFence := 0, false // level: of the section being dropped, 0 none
		for _, l := range strings.SplitAfter(s, "\n") {
			if fence.MatchString(l) {
				inFence = !inFence
			} else if m := heading.FindStringSubmatch(strings.TrimRight(l, "\n")); m != nil && !inFence {
				switch {
				case m[2] == title:
					level = len(m[1])
				case level > 0 && len(m[1]) <= level:
					level = 0
				}
			}
			if level == 0 {
				out.WriteString(l)
			}
		}
		return out.String()
	})
}

// edit rewrites one file of the copy with f; an f that changes nothing is
// an error naming the file.
func (r *Release) edit(path string, f func(string) string) error {
	p := r.Path(path)
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	edited := f(string(b))
	if edited == string(b) {
		return fmt.Errorf("%s: nothing to edit", p)
	}
	return os.WriteFile(p, []byte(edited), 0o644)
}

// pinnedDigest is the digest part of an image reference pinned by digest.
var pinnedDigest = regexp.MustCompile(`(image:\s*\S+)@sha256:[0-9a-f]{64}`)

// PinMultus edits the copy's multus DaemonSet template so that every image
// reference it pins by digest pins digest instead (name and tag kept): the
// release as it would ship an image built elsewhere, for tests that make
// the pinned image themselves.
func (r *Release) PinMultus(digest string) error {
	return r.edit(MultusChart+"/templates/multus-daemonset-thick.yml", func(s string) string {
		return pinnedDigest.ReplaceAllString(s, "${1}@"+digest)
	})
}
