package cozystack

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// MultusImage is what the release's images/multus-cni/Dockerfile builds:
// Multus at a version with the checkout's patches applied, and, where it
// has a plugin stage, the CNI plugins release whose named binaries it
// extracts to /cni-plugins.
type MultusImage struct {
	Dockerfile string // absolute path
	// MultusVersion is ARG VERSION; PluginsVersion is ARG
	// CNI_PLUGINS_VERSION ("" without a plugin stage).
	MultusVersion, PluginsVersion string
	// Plugins are the names its tar line extracts into /cni-plugins, in the
	// Dockerfile's order (none without a plugin stage).
	Plugins []string
	// Patches are the patches/*.diff it applies to Multus, absolute paths.
	Patches []string
}

var (
	argLine = regexp.MustCompile(`(?m)^\s*ARG\s+([A-Za-z_][A-Za-z0-9_]*)=(\S+)`)
	tarWord = regexp.MustCompile(`^\./([A-Za-z0-9._-]+)$`)
)

// MultusImage reads the multus image's Dockerfile: its ARG defaults, the
// tar command that extracts into /cni-plugins and the patches it applies.
// A Dockerfile the suite cannot read this way (no Multus version, half a
// plugin stage) is an error, not a guess.
func (r *Release) MultusImage() (*MultusImage, error) {
	path := r.Path(MultusImageDir + "/Dockerfile")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	text := string(b)
	img := &MultusImage{Dockerfile: path}
	for _, m := range argLine.FindAllStringSubmatch(text, -1) {
		switch m[1] {
		case "VERSION":
			img.MultusVersion = m[2]
		case "CNI_PLUGINS_VERSION":
			img.PluginsVersion = m[2]
		}
	}
	if img.MultusVersion == "" {
		return nil, fmt.Errorf("%s: no ARG VERSION=... default (the Multus version it builds)", path)
	}
	img.Plugins = pluginsExtracted(text)
	switch {
	case img.PluginsVersion == "" && len(img.Plugins) == 0:
		// No plugin stage at all, as in every release before staging
		// (v1.6.x): a valid image that stages nothing (Stages).
	case img.PluginsVersion == "":
		return nil, fmt.Errorf("%s: extracts plugins into /cni-plugins but has no ARG CNI_PLUGINS_VERSION=... default", path)
	case len(img.Plugins) == 0:
		return nil, fmt.Errorf("%s: ARG CNI_PLUGINS_VERSION=%s but no `tar ... -C /cni-plugins ... ./<name>...` line naming the plugins it extracts", path, img.PluginsVersion)
	}
	if strings.Contains(text, "git apply /patches/") {
		img.Patches, _ = filepath.Glob(r.Path(MultusImageDir + "/patches/*.diff"))
		sort.Strings(img.Patches)
	}
	return img, nil
}

// Stages tells whether the image carries plugins to stage: a Dockerfile
// without a plugin stage builds Multus alone.
func (img *MultusImage) Stages() bool { return len(img.Plugins) > 0 }

// pluginsExtracted are the ./<name> operands of the tar command that
// extracts into /cni-plugins, read across the RUN's line continuations.
func pluginsExtracted(text string) []string {
	joined := strings.ReplaceAll(text, "\\\n", " ")
	for _, line := range strings.Split(joined, "\n") {
		for _, cmd := range strings.Split(line, ";") {
			f := strings.Fields(cmd)
			if len(f) == 0 || f[0] != "tar" || !hasPair(f, "-C", "/cni-plugins") {
				continue
			}
			var names []string
			for _, w := range f {
				if m := tarWord.FindStringSubmatch(w); m != nil {
					names = append(names, m[1])
				}
			}
			return names
		}
	}
	return nil
}

func hasPair(f []string, a, b string) bool {
	for i := 0; i+1 < len(f); i++ {
		if f[i] == a && f[i+1] == b {
			return true
		}
	}
	return false
}

// Provenance is what a build of this image must record (images/multus's
// multus.provenance, key=value lines) to be the release's image: the
// versions, the patches by name and sha256, the /cni-plugins names.
func (img *MultusImage) Provenance() (map[string]string, error) {
	b, err := os.ReadFile(img.Dockerfile)
	if err != nil {
		return nil, err
	}
	var patches []string
	for _, p := range img.Patches {
		pb, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		patches = append(patches, filepath.Base(p)+":"+sha256hex(pb))
	}
	return map[string]string{
		"dockerfile_sha256":   sha256hex(b),
		"multus_version":      img.MultusVersion,
		"patches":             strings.Join(patches, " "),
		"cni_plugins_version": img.PluginsVersion,
		"plugins":             strings.Join(img.Plugins, " "),
	}, nil
}

// CheckProvenance compares a build's provenance file with the release's
// Dockerfile; a mismatch names each differing key.
func (img *MultusImage) CheckProvenance(path string) error {
	want, err := img.Provenance()
	if err != nil {
		return err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("the multus image's provenance: %w", err)
	}
	got := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			got[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	var diffs []string
	for _, k := range []string{"multus_version", "patches", "cni_plugins_version", "plugins", "dockerfile_sha256"} {
		if got[k] != want[k] {
			diffs = append(diffs, fmt.Sprintf("%s: built %q, the release's Dockerfile says %q", k, got[k], want[k]))
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("%s is not the release's multus image: %s", path, strings.Join(diffs, "; "))
	}
	return nil
}

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
