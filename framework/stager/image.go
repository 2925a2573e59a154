package stager

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"

	"github.com/cozystack/vlan-conformance/framework/image"
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
	if fi.IsDir() && !image.IsLayout(src) {
		in := filepath.Join(src, PluginsDir)
		if st, err := os.Stat(in); err != nil || !st.IsDir() {
			return fmt.Errorf("%s: no %s/ directory in this image root", src, PluginsDir)
		}
		if dst == "" {
			return nil
		}
		return copyTree(in, dst)
	}
	rc, err := image.FileSystem(src, digest)
	if err != nil {
		return err
	}
	defer rc.Close()
	found, err := image.CopyDir(rc, PluginsDir, dst)
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	if !found {
		return fmt.Errorf("%s: %w", src, ErrNoPluginsDir)
	}
	return nil
}

// imageCache holds each image tarball a harness reads unpacked, once per
// process: every harness (one per Ordered container) copies its /cni-plugins
// from there instead of applying the layers again. DropImageCache removes
// it; a process that dies first leaves it to the next run's sweep (the
// directory carries ownerFile like a harness's).
var imageCache = struct {
	sync.Mutex
	dir   string
	byKey map[string]string // tarball identity and digest -> unpacked cni-plugins, "" when it has none
}{byKey: map[string]string{}}

// cachedPlugins copies the /cni-plugins of the image at src (digest as
// for extractPlugins) into dst, unpacking a tarball only the first time
// this process sees it. An image without /cni-plugins is remembered as
// such: a pinned one is read by every harness of the run.
func cachedPlugins(src, digest, dst string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if fi.IsDir() && !image.IsLayout(src) {
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
