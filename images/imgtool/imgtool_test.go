package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func write(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // WriteFile honours the umask
		t.Fatal(err)
	}
}

// baseRootfs writes a plain rootfs tar with a merged-/usr style /bin link.
func baseRootfs(t *testing.T, p string) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range []*tar.Header{
		{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "./usr/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "./usr/bin/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "./bin", Typeflag: tar.TypeSymlink, Linkname: "usr/bin", Mode: 0o777},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

type entry struct {
	typ  byte
	mode int64
	link string
	body string
}

func TestBuildAndReadBack(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	write(t, filepath.Join(src, "app", "run.sh"), "#!/bin/sh\n", 0o750)
	write(t, filepath.Join(src, "app", "conf", "a.conf"), "a=1\n", 0o600)
	if err := os.Symlink("run.sh", filepath.Join(src, "app", "start")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(src, "tool"), "binary", 0o644)
	base := filepath.Join(dir, "rootfs.tar")
	baseRootfs(t, base)

	out := filepath.Join(dir, "img.tar")
	tags := []string{"registry.k8s.io/pause:3.10.1", "registry.k8s.io/pause:3.10"}
	args := []string{"build", "-o", out, "--tag", tags[0], "--tag", tags[1],
		"--base", base,
		"--add", filepath.Join(src, "app") + ":/opt/app",
		"--add", filepath.Join(src, "tool") + ":/usr/local/bin/tool:0755",
		"--add", filepath.Join(src, "tool") + ":/bin/",
		"--entrypoint", `["/usr/local/bin/tool","-v"]`, "--cmd", `["serve"]`,
		"--env", "A=1", "--user", "65535:65535", "--workdir", "/opt/app",
		"--stop-signal", "SIGRTMIN+3", "--label", "k=v", "--volume", "/var/lib/x"}
	if err := run(args, io.Discard); err != nil {
		t.Fatal(err)
	}

	opener := func() (io.ReadCloser, error) { return os.Open(out) }
	m, err := tarball.LoadManifest(opener)
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 1 || !reflect.DeepEqual(m[0].RepoTags, tags) {
		t.Fatalf("manifest: %+v", m)
	}
	for _, ref := range tags {
		tag, _ := name.NewTag(ref)
		img, err := tarball.Image(opener, &tag)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		c := cf.Config
		if !reflect.DeepEqual(c.Entrypoint, []string{"/usr/local/bin/tool", "-v"}) ||
			!reflect.DeepEqual(c.Cmd, []string{"serve"}) ||
			!reflect.DeepEqual(c.Env, []string{defaultPath, "A=1"}) ||
			c.User != "65535:65535" || c.WorkingDir != "/opt/app" ||
			c.StopSignal != "SIGRTMIN+3" || c.Labels["k"] != "v" ||
			len(c.Volumes) != 1 || cf.OS != "linux" {
			t.Fatalf("config: %+v", c)
		}
		layers, _ := img.Layers()
		if len(layers) != 4 {
			t.Fatalf("want base + 3 layers, got %d", len(layers))
		}
		// The /bin add layer must not replace the base's /bin symlink.
		for _, n := range layerNames(t, layers[3]) {
			if n == "bin/" {
				t.Fatal("add layer re-emits bin/ over the base symlink")
			}
		}
		files := flatten(t, img)
		want := map[string]entry{
			"bin":                 {tar.TypeSymlink, 0o777, "usr/bin", ""},
			"bin/tool":            {tar.TypeReg, 0o644, "", "binary"},
			"opt":                 {tar.TypeDir, 0o755, "", ""},
			"opt/app":             {tar.TypeDir, 0o755, "", ""},
			"opt/app/run.sh":      {tar.TypeReg, 0o750, "", "#!/bin/sh\n"},
			"opt/app/start":       {tar.TypeSymlink, 0o777, "run.sh", ""},
			"opt/app/conf/a.conf": {tar.TypeReg, 0o600, "", "a=1\n"},
			"usr/local/bin/tool":  {tar.TypeReg, 0o755, "", "binary"},
		}
		for p, w := range want {
			if g, ok := files[p]; !ok || g != w {
				t.Errorf("%s: got %+v (present %v), want %+v", p, g, ok, w)
			}
		}
	}

	// Identical inputs give an identical archive.
	first, _ := os.ReadFile(out)
	if err := run(args, io.Discard); err != nil {
		t.Fatal(err)
	}
	second, _ := os.ReadFile(out)
	if !bytes.Equal(first, second) {
		t.Fatal("rebuild with identical inputs is not byte-identical")
	}

	var report bytes.Buffer
	if err := run([]string{"inspect", "--files", out}, &report); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"refs:        " + tags[0] + " " + tags[1], `stop-signal: "SIGRTMIN+3"`, "/opt/app/start -> run.sh"} {
		if !strings.Contains(report.String(), s) {
			t.Errorf("inspect output lacks %q:\n%s", s, report.String())
		}
	}
}

func TestBuildRejects(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "x.tar")
	for _, args := range [][]string{
		{"build", "-o", out}, // no tag
		{"build", "-o", out, "--tag", "registry.k8s.io/pause"},         // implicit latest
		{"build", "-o", out, "--tag", "a/b:c", "--add", "nosuch:/x"},   // missing source
		{"build", "-o", out, "--tag", "a/b:c", "--add", dir + ":/x:9"}, // bad mode
		{"build", "-o", out, "--tag", "a/b:c", "--entrypoint", "/x"},   // not JSON
	} {
		if err := run(args, io.Discard); err == nil {
			t.Errorf("%q: want an error", args)
		}
	}
}

func layerNames(t *testing.T, l v1.Layer) []string {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var names []string
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || h.ModTime.Unix() != 0 {
			t.Errorf("%s: not root-owned at epoch: %d:%d %v", h.Name, h.Uid, h.Gid, h.ModTime)
		}
		names = append(names, h.Name)
	}
}

func flatten(t *testing.T, img v1.Image) map[string]entry {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string]entry{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		files[cleanPath(h.Name)] = entry{h.Typeflag, h.Mode & 0o7777, h.Linkname, string(body)}
	}
}
