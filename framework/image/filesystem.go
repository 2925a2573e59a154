// Package image reads container images as the suite is given them: OCI
// layouts, oci-archives, docker-archives (`docker save`) and file system
// tarballs (`crane export`). go-containerregistry reads the formats and
// applies the layers; this package picks the form and writes files out.
package image

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// FileSystem opens an image as its flattened file system, a tar stream:
// the layers of a docker-archive or OCI layout applied in order (whiteouts
// honoured, by go-containerregistry), or the tarball itself when it is one
// already. digest picks the image of an OCI index ("": the first).
func FileSystem(p, digest string) (io.ReadCloser, error) {
	if IsLayout(p) {
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

// TaggedFileSystem is FileSystem of the image tag of a docker-archive.
func TaggedFileSystem(p string, tag name.Tag) (io.ReadCloser, error) {
	img, err := tarball.ImageFromPath(p, &tag)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return mutate.Extract(img), nil
}

// IsLayout tells whether p is an OCI layout directory.
func IsLayout(p string) bool {
	fi, err := os.Stat(filepath.Join(p, "oci-layout"))
	return err == nil && fi.Mode().IsRegular()
}

// CopyDir writes the entries under dir of the file system tarball fs into
// dst; dst "" writes nothing. found tells whether dir was there at all.
func CopyDir(fs io.Reader, dir, dst string) (found bool, err error) {
	err = eachEntry(fs, func(h *tar.Header, tr *tar.Reader) error {
		rel := path.Clean(strings.TrimPrefix(strings.TrimPrefix(h.Name, "./"), "/"))
		if rel != dir && !strings.HasPrefix(rel, dir+"/") {
			return nil
		}
		found = true
		if dst == "" {
			return nil
		}
		if rel == dir {
			h.Typeflag = tar.TypeDir
		}
		return writeEntry(tr, h, filepath.Join(dst, strings.TrimPrefix(rel, dir)))
	})
	return found, err
}

// eachEntry calls fn on every entry of the tarball r, in order, until it
// fails.
func eachEntry(r io.Reader, fn func(*tar.Header, *tar.Reader) error) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(h, tr); err != nil {
			return err
		}
	}
}

// topNames lists the top-level file names of a tar archive.
func topNames(p string) (map[string]bool, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]bool{}
	if err := eachEntry(f, func(h *tar.Header, _ *tar.Reader) error {
		if n := path.Clean(strings.TrimPrefix(h.Name, "./")); !strings.Contains(n, "/") {
			out[n] = true
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("%s: not a directory or a tar archive: %w", p, err)
	}
	return out, nil
}

// ociImage unpacks an OCI-layout tarball into a temporary directory (the
// library reads layouts from directories only) and opens the file system
// of its image digest (layoutImage); closing it removes the directory.
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
	dir, err := os.MkdirTemp("", "image-oci-*")
	if err != nil {
		return "", err
	}
	f, err := os.Open(p)
	if err != nil {
		return "", errors.Join(err, os.RemoveAll(dir))
	}
	defer f.Close()
	if err := eachEntry(f, func(h *tar.Header, tr *tar.Reader) error {
		rel := path.Clean(strings.TrimPrefix(h.Name, "/"))
		if rel == "." || strings.HasPrefix(rel, "../") || (keep != nil && !keep(h)) {
			return nil
		}
		return writeEntry(tr, h, filepath.Join(dir, rel))
	}); err != nil {
		return "", errors.Join(err, os.RemoveAll(dir))
	}
	return dir, nil
}

type removeOnClose struct {
	io.ReadCloser
	dir string
}

func (r removeOnClose) Close() error { return errors.Join(r.ReadCloser.Close(), os.RemoveAll(r.dir)) }

// writeEntry writes one tar entry at p; kinds other than files,
// directories and symlinks are left out.
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
