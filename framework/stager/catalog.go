package stager

import (
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// pluginsModule is the Go module of the upstream reference plugins.
const pluginsModule = "github.com/containernetworking/plugins"

// catalog maps content hashes of known release copies to "version/plugin".
type catalog struct {
	byHash  map[string]string
	byName  map[string]string // "version/plugin" -> hash
	version map[string]string // release dir -> version
}

var (
	catalogsMu sync.Mutex
	catalogs   = map[string]*catalog{}
)

// catalogOf hashes the plugins of the given release directories once per
// process.
func catalogOf(dirs ...string) (*catalog, error) {
	key := strings.Join(dirs, "\x00")
	catalogsMu.Lock()
	defer catalogsMu.Unlock()
	if c, ok := catalogs[key]; ok {
		return c, nil
	}
	c := &catalog{byHash: map[string]string{}, byName: map[string]string{}, version: map[string]string{}}
	for _, d := range dirs {
		v, err := releaseVersion(d)
		if err != nil {
			return nil, err
		}
		c.version[d] = v
		ents, err := os.ReadDir(d)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), ".") {
				continue
			}
			h, err := hashFile(filepath.Join(d, e.Name()))
			if err != nil {
				return nil, err
			}
			id := v + "/" + e.Name()
			c.byHash[h] = id
			c.byName[id] = h
		}
	}
	catalogs[key] = c
	return c, nil
}

// releaseVersion reads the version a release directory's bridge reports.
// ReleaseVersion is the upstream release of the plugins in dir (its
// bridge's), e.g. v1.9.1.
func ReleaseVersion(dir string) (string, error) { return releaseVersion(dir) }

func releaseVersion(dir string) (string, error) {
	v := pluginVersion(filepath.Join(dir, "bridge"))
	if v == "" {
		return "", fmt.Errorf("%s: no reference bridge plugin with a version there (build them with `make plugins`)", dir)
	}
	return v, nil
}

// pluginVersion is the upstream release a binary was built from: the
// plugins module's version in its Go build info, or else the version its
// banner prints when run with no CNI_COMMAND ("CNI bridge plugin v1.9.1").
// "" when the file is not a reference plugin.
func pluginVersion(p string) string {
	bi, err := buildinfo.ReadFile(p)
	if err != nil {
		return ""
	}
	mod := bi.Main
	if mod.Path != pluginsModule {
		return ""
	}
	if mod.Version != "" && mod.Version != "(devel)" {
		return mod.Version
	}
	return bannerVersion(p)
}

var banner = regexp.MustCompile(`CNI \S+ plugin (\S+)`)

func bannerVersion(p string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, p)
	cmd.Env = []string{}
	out, _ := cmd.CombinedOutput()
	if m := banner.FindSubmatch(out); m != nil && string(m[1]) != "version" {
		return string(m[1])
	}
	return ""
}

func hashFile(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return hashReader(f)
}

func hashReader(r io.Reader) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func hashNames(names []string) string {
	sort.Strings(names)
	s := sha256.Sum256([]byte(strings.Join(names, "\n")))
	return hex.EncodeToString(s[:])
}
