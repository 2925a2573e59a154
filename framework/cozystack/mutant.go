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
