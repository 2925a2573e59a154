package kube

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// Manifest is a release manifest of a pinned component.
type Manifest struct {
	Component string // multus, kubevirt-operator
	Version   string
	URL       string
	File      string // under --manifests-dir/<component>/<version>/
}

// Path is where the manifest is cached.
func (m Manifest) Path(dir string) string { return filepath.Join(dir, m.Component, m.Version, m.File) }

// Load reads the manifest from the cache, fetching it from its release URL
// on first use (never in an air-gapped run whose --manifests-dir has it).
func (m Manifest) Load(ctx context.Context, dir string) ([]byte, error) {
	p := m.Path(dir)
	if b, err := os.ReadFile(p); err == nil {
		return b, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.URL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: not in %s and not fetched: %w (an air-gapped run puts it there beforehand)", m.Component, m.Version, p, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: GET %s: %s", m.Component, m.Version, m.URL, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, err
	}
	return b, os.WriteFile(p, b, 0o644)
}

// Describe is the manifest as a plan prints it.
func (m Manifest) Describe(dir string) string {
	return fmt.Sprintf("%s: %s (cached at %s)", m.Version, m.URL, m.Path(dir))
}
