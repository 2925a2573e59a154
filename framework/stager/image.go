package stager

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// PluginsDir is where the multus image carries the plugins it stages.
const PluginsDir = "cni-plugins"

// ErrNoPluginsDir is an image without /cni-plugins: bad input for
// --stager-image, the release's own failure for a pinned image.
var ErrNoPluginsDir = fmt.Errorf("the image's file system has no /%s/ directory", PluginsDir)

// CheckImage tells whether path (--stager-image) is an image root holding
// cni-plugins/: a directory, a docker-archive (`docker save`), an OCI
// layout (a directory, or an oci-archive tarball of one), or a flattened
// file system tarball (`crane export`, `docker export`). It reads the
// image but writes nothing.
func CheckImage(path string) error {
	return extractPlugins(path, "", "")
}

// extractPlugins copies the image's /cni-plugins entries into dst (which
// must not exist yet); dst "" only checks that there are any. digest picks
// an archive's image by its manifest or index digest ("": the first).
func extractPlugins(src, digest, dst string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if fi.IsDir() && !isLayout(src) {
		in := filepath.Join(src, PluginsDir)
		if st, err := os.Stat(in); err != nil || !st.IsDir() {
			return fmt.Errorf("%s: no %s/ directory in this image root", src, PluginsDir)
		}
		if dst == "" {
			return nil
		}
		return copyTree(in, dst)
	}
	rc, err := rootFS(src, digest)
	if err != nil {
		return err
	}
	defer rc.Close()
	found, err := untarPlugins(tar.NewReader(rc), dst)
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	if !found {
		return fmt.Errorf("%s: %w", src, ErrNoPluginsDir)
	}
	return nil
}

// rootFS opens an image as its flattened file system: the layers of a
// docker-archive or OCI layout applied in order (whiteouts honoured, by
// go-containerregistry), or the tarball itself when it is one already.
// digest picks the image of an OCI index ("": the first).
func rootFS(p, digest string) (io.ReadCloser, error) {
	if isLayout(p) {
		img, err := layoutImage(p, digest)
		if err != nil {
			return nil, fmt.Errorf("%s: read as an OCI layout: %w", p, err)
		}
		return mutate.Extract(img), nil
	}
	names, err := topNames(p)
	if err != nil {
		return nil, err
	}
	switch {
	// `docker save` of Docker 25+ carries both; only its OCI index can
	// keep the registry's digest (ReadArchive).
	case names["oci-layout"] && (digest != "" || !names["manifest.json"]):
		rc, err := ociImage(p, digest)
		if err != nil {
			return nil, fmt.Errorf("%s: read as an OCI layout: %w", p, err)
		}
		return rc, nil
	case names["manifest.json"] && digest == "":
		img, err := tarball.ImageFromPath(p, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: read as a docker-archive: %w", p, err)
		}
		return mutate.Extract(img), nil
	case digest != "":
		return nil, fmt.Errorf("%s: no OCI index to find %s in", p, digest)
	}
	return os.Open(p) // a file system tarball already (crane export)
}

// isLayout tells whether p is an OCI layout directory.
func isLayout(p string) bool {
	fi, err := os.Stat(filepath.Join(p, "oci-layout"))
	return err == nil && fi.Mode().IsRegular()
}

// topNames lists the top-level file names of a tar archive.
func topNames(p string) (map[string]bool, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]bool{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: not a directory or a tar archive: %w", p, err)
		}
		if n := path.Clean(strings.TrimPrefix(h.Name, "./")); !strings.Contains(n, "/") {
			out[n] = true
		}
	}
}

// ociImage unpacks an OCI-layout tarball into a temporary directory (the
// library reads layouts from directories) and opens the file system of its
// image digest (layoutImage); closing it removes the directory.
func ociImage(p, digest string) (io.ReadCloser, error) {
	dir, err := unpackLayout(p, nil)
	if err != nil {
		return nil, err
	}
	img, err := layoutImage(dir, digest)
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	return removeOnClose{mutate.Extract(img), dir}, nil
}

// unpackLayout writes the entries of the tarball p that keep accepts (nil:
// all) into a new temporary directory, which the caller removes.
func unpackLayout(p string, keep func(*tar.Header) bool) (string, error) {
	dir, err := os.MkdirTemp("", "stager-oci-*")
	if err != nil {
		return "", err
	}
	f, err := os.Open(p)
	if err != nil {
		return "", errors.Join(err, os.RemoveAll(dir))
	}
	defer f.Close()
	if err := untarAll(tar.NewReader(f), dir, keep); err != nil {
		return "", errors.Join(err, os.RemoveAll(dir))
	}
	return dir, nil
}

type removeOnClose struct {
	io.ReadCloser
	dir string
}

func (r removeOnClose) Close() error { return errors.Join(r.ReadCloser.Close(), os.RemoveAll(r.dir)) }

// untarAll writes every regular file and directory of tr that keep
// accepts (nil: all) under dir.
func untarAll(tr *tar.Reader, dir string, keep func(*tar.Header) bool) error {
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		rel := path.Clean(strings.TrimPrefix(h.Name, "/"))
		if rel == "." || strings.HasPrefix(rel, "../") || (keep != nil && !keep(h)) {
			continue
		}
		if err := writeEntry(tr, h, filepath.Join(dir, rel)); err != nil {
			return err
		}
	}
}

// untarPlugins writes the entries under cni-plugins/ of a file system
// tarball into dst; found tells whether the directory was there at all.
func untarPlugins(tr *tar.Reader, dst string) (found bool, err error) {
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return found, nil
		}
		if err != nil {
			return found, err
		}
		rel := path.Clean(strings.TrimPrefix(strings.TrimPrefix(h.Name, "./"), "/"))
		if rel != PluginsDir && !strings.HasPrefix(rel, PluginsDir+"/") {
			continue
		}
		found = true
		if dst == "" {
			continue
		}
		if rel == PluginsDir {
			h.Typeflag = tar.TypeDir
		}
		if err := writeEntry(tr, h, filepath.Join(dst, strings.TrimPrefix(rel, PluginsDir))); err != nil {
			return found, err
		}
	}
}

// writeEntry writes one tar entry at p; kinds other than files,
// directories and symlinks are not plugins and are left out.
func writeEntry(tr *tar.Reader, h *tar.Header, p string) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	mode := os.FileMode(h.Mode).Perm()
	switch h.Typeflag {
	case tar.TypeDir:
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
		return os.Chmod(p, mode)
	case tar.TypeSymlink:
		return os.Symlink(h.Linkname, p)
	case tar.TypeReg:
		out, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, tr); err != nil {
			out.Close()
			return err
		}
		if err := out.Close(); err != nil {
			return err
		}
		return os.Chmod(p, mode)
	}
	return nil
}

// imageCache holds each image tarball a lab reads unpacked, once per
// process: every lab (one per Ordered container) copies its /cni-plugins
// from there instead of applying the layers again. DropImageCache removes
// it; a process that dies first leaves it to the next run's sweep (the
// directory carries ownerFile like a lab's).
var imageCache = struct {
	sync.Mutex
	dir   string
	byKey map[string]string // tarball identity and digest -> unpacked cni-plugins, "" when it has none
}{byKey: map[string]string{}}

// cachedPlugins copies the /cni-plugins of the image at src (digest as
// for extractPlugins) into dst, unpacking a tarball only the first time
// this process sees it. An image without /cni-plugins is remembered as
// such: a pinned one is read by every lab of the run.
func cachedPlugins(src, digest, dst string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if fi.IsDir() && !isLayout(src) {
		return extractPlugins(src, digest, dst)
	}
	abs, err := filepath.Abs(src)
	if err != nil {
		return err
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	var ino uint64
	if st != nil {
		ino = st.Ino
	}
	key := fmt.Sprintf("%s\x00%d\x00%d\x00%d\x00%s", abs, fi.Size(), fi.ModTime().UnixNano(), ino, digest)

	imageCache.Lock()
	defer imageCache.Unlock()
	unpacked, ok := imageCache.byKey[key]
	if !ok {
		if imageCache.dir == "" {
			d, err := os.MkdirTemp("", "stager-cni-image-cache-*")
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(d, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
				return errors.Join(err, os.RemoveAll(d))
			}
			imageCache.dir = d
		}
		unpacked = filepath.Join(imageCache.dir, strconv.Itoa(len(imageCache.byKey)))
		switch err := extractPlugins(src, digest, unpacked); {
		case errors.Is(err, ErrNoPluginsDir):
			unpacked = ""
		case err != nil:
			return errors.Join(err, os.RemoveAll(unpacked))
		}
		imageCache.byKey[key] = unpacked
	}
	if unpacked == "" {
		return fmt.Errorf("%s: %w", src, ErrNoPluginsDir)
	}
	return copyTree(unpacked, dst)
}

// DropImageCache removes the unpacked images this process cached.
func DropImageCache() error {
	imageCache.Lock()
	defer imageCache.Unlock()
	d := imageCache.dir
	imageCache.dir, imageCache.byKey = "", map[string]string{}
	if d == "" {
		return nil
	}
	return os.RemoveAll(d)
}
