package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// epoch is the fixed timestamp of every file and of the image itself, so that
// identical inputs give a byte-identical archive.
var epoch = time.Unix(0, 0).UTC()

// defaultPath is set when the caller gives no PATH: images without a base
// rootfs would otherwise have none, and kubeadm's manifests call binaries by
// name.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Add copies Src (file or directory) to Dest inside the image.
type Add struct {
	Src, Dest string
	Mode      *int64 // unix mode bits (setuid etc. allowed) for a single file
}

// BuildOptions describes one image with one or more names.
type BuildOptions struct {
	Output     string
	Tags       []string
	Base       string
	Adds       []Add
	Entrypoint []string
	Cmd        []string
	Env        []string
	User       string
	Workdir    string
	StopSignal string
	Labels     map[string]string
	Volumes    []string
}

// Build writes the image described by o as a docker-archive tarball.
func Build(o BuildOptions) error {
	for _, t := range o.Tags {
		if _, err := name.NewTag(t); err != nil {
			return fmt.Errorf("--tag %q: %w", t, err)
		}
		// An implicit ":latest" hides mistakes; every caller pins a tag.
		if i := strings.LastIndex(t, ":"); i < 0 || strings.Contains(t[i:], "/") {
			return fmt.Errorf("--tag %q: an explicit tag is required", t)
		}
	}
	scratch, err := os.MkdirTemp(filepath.Dir(o.Output), ".imgtool-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)

	var adds []mutate.Addendum
	// Paths the base already has: parent directories are not re-emitted for
	// them, so a layer never turns e.g. a /bin -> usr/bin symlink into a dir.
	baseHas := map[string]bool{}
	if o.Base != "" {
		gz := filepath.Join(scratch, "base.tar.gz")
		if err := gzipBase(o.Base, gz, baseHas); err != nil {
			return fmt.Errorf("--base %s: %w", o.Base, err)
		}
		l, err := tarball.LayerFromFile(gz)
		if err != nil {
			return err
		}
		adds = append(adds, mutate.Addendum{Layer: l, History: v1.History{
			Created: v1.Time{Time: epoch}, CreatedBy: "imgtool base " + filepath.Base(o.Base)}})
	}
	for i, a := range o.Adds {
		gz := filepath.Join(scratch, fmt.Sprintf("add%d.tar.gz", i))
		if err := writeAddLayer(a, gz, baseHas); err != nil {
			return fmt.Errorf("--add %s:%s: %w", a.Src, a.Dest, err)
		}
		l, err := tarball.LayerFromFile(gz)
		if err != nil {
			return err
		}
		adds = append(adds, mutate.Addendum{Layer: l, History: v1.History{
			Created: v1.Time{Time: epoch}, CreatedBy: "imgtool add " + filepath.Base(a.Src) + " " + a.Dest}})
	}

	img, err := mutate.Append(empty.Image, adds...)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = runtime.GOARCH, "linux"
	cf.Created = v1.Time{Time: epoch}
	cf.Config = configOf(o)
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	return writeArchive(o.Output, scratch, img, o.Tags)
}

func configOf(o BuildOptions) v1.Config {
	c := v1.Config{
		Entrypoint: o.Entrypoint,
		Cmd:        o.Cmd,
		User:       o.User,
		WorkingDir: o.Workdir,
		StopSignal: o.StopSignal,
		Labels:     o.Labels,
	}
	hasPath := false
	for _, e := range o.Env {
		hasPath = hasPath || strings.HasPrefix(e, "PATH=")
	}
	if !hasPath {
		c.Env = append(c.Env, defaultPath)
	}
	c.Env = append(c.Env, o.Env...)
	if len(o.Volumes) > 0 {
		c.Volumes = map[string]struct{}{}
		for _, v := range o.Volumes {
			c.Volumes[v] = struct{}{}
		}
	}
	return c
}

// writeArchive writes a docker-archive ("docker save" format) holding one
// image under all tags, in the order given (tarball.MultiRefWrite orders
// several tags of one image randomly), then renames it into place.
func writeArchive(out, scratch string, img v1.Image, tags []string) error {
	cfgName, err := img.ConfigName()
	if err != nil {
		return err
	}
	rawCfg, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	tmp := filepath.Join(scratch, "out.tar")
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	tw := tar.NewWriter(bw)
	desc := tarball.Descriptor{Config: cfgName.Hex + ".json", RepoTags: tags}
	if err := tarEntry(tw, desc.Config, bytes.NewReader(rawCfg), int64(len(rawCfg))); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		file := d.Hex + ".tar.gz"
		desc.Layers = append(desc.Layers, file)
		if seen[file] {
			continue
		}
		seen[file] = true
		size, err := l.Size()
		if err != nil {
			return err
		}
		rc, err := l.Compressed()
		if err != nil {
			return err
		}
		err = tarEntry(tw, file, rc, size)
		rc.Close()
		if err != nil {
			return err
		}
	}
	m, err := json.Marshal(tarball.Manifest{desc})
	if err != nil {
		return err
	}
	if err := tarEntry(tw, "manifest.json", bytes.NewReader(m), int64(len(m))); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

func tarEntry(tw *tar.Writer, name string, r io.Reader, size int64) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: size,
		Typeflag: tar.TypeReg, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
		return err
	}
	n, err := io.Copy(tw, r)
	if err == nil && n != size {
		err = fmt.Errorf("%s: wrote %d bytes, want %d", name, n, size)
	}
	return err
}

// gzipBase compresses the rootfs tarball once (ggcr would otherwise compress
// it again for the digest and for the write) and records its paths.
func gzipBase(src, dst string, has map[string]bool) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	var r io.Reader = bufio.NewReaderSize(in, 1<<20)
	magic, _ := r.(*bufio.Reader).Peek(2)
	if bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		// Already compressed: use as is, only record the paths.
		zr, err := gzip.NewReader(r)
		if err != nil {
			return err
		}
		if err := scanTar(zr, has); err != nil {
			return err
		}
		return copyFile(src, dst)
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer out.Close()
	zw, _ := gzip.NewWriterLevel(out, gzip.DefaultCompression)
	if err := scanTar(io.TeeReader(r, zw), has); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return out.Close()
}

func scanTar(r io.Reader, has map[string]bool) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if p := cleanPath(h.Name); p != "" {
			has[p] = true
		}
	}
	// Pass the end-of-archive blocks through as well.
	_, err := io.Copy(io.Discard, r)
	return err
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// cleanPath turns "./usr/bin/" or "/usr/bin" into "usr/bin"; "" is the root.
func cleanPath(p string) string {
	p = strings.TrimPrefix(path.Clean("/"+p), "/")
	return p
}

// layerWriter writes one deterministic, root-owned layer.
type layerWriter struct {
	tw      *tar.Writer
	baseHas map[string]bool
	dirs    map[string]bool
}

func (lw *layerWriter) header(h *tar.Header) error {
	h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
	h.ModTime, h.AccessTime, h.ChangeTime = epoch, time.Time{}, time.Time{}
	h.PAXRecords, h.Xattrs = nil, nil //nolint:staticcheck // clear host xattrs too
	h.Format = tar.FormatPAX
	return lw.tw.WriteHeader(h)
}

// parents emits the missing ancestor directories of p (0755, root-owned).
func (lw *layerWriter) parents(p string) error {
	dir := path.Dir(p)
	if dir == "." || dir == "/" || lw.dirs[dir] || lw.baseHas[dir] {
		return nil
	}
	if err := lw.parents(dir); err != nil {
		return err
	}
	lw.dirs[dir] = true
	return lw.header(&tar.Header{Name: dir + "/", Typeflag: tar.TypeDir, Mode: 0o755})
}

func writeAddLayer(a Add, dst string, baseHas map[string]bool) error {
	fi, err := os.Lstat(a.Src)
	if err != nil {
		return err
	}
	dest := cleanPath(a.Dest)
	if !fi.IsDir() && (strings.HasSuffix(a.Dest, "/") || dest == "") {
		dest = path.Join(dest, filepath.Base(a.Src))
	}
	if a.Mode != nil && fi.IsDir() {
		return errors.New("MODE applies to a single file, not a directory")
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer out.Close()
	zw, _ := gzip.NewWriterLevel(out, gzip.DefaultCompression)
	lw := &layerWriter{tw: tar.NewWriter(zw), baseHas: baseHas, dirs: map[string]bool{}}

	if fi.IsDir() {
		// WalkDir visits in lexical order: the layer does not depend on the
		// order the filesystem returns entries in.
		err = filepath.WalkDir(a.Src, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(a.Src, p)
			if err != nil {
				return err
			}
			target := cleanPath(path.Join(dest, filepath.ToSlash(rel)))
			if target == "" { // the image root itself has no entry
				return nil
			}
			return lw.entry(p, target, nil)
		})
	} else {
		err = lw.entry(a.Src, dest, a.Mode)
	}
	if err != nil {
		return err
	}
	if err := lw.tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return out.Close()
}

// entry writes src as target: a directory, a symlink (kept as a link) or a
// regular file.
func (lw *layerWriter) entry(src, target string, mode *int64) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if err := lw.parents(target); err != nil {
		return err
	}
	link := ""
	if fi.Mode()&fs.ModeSymlink != 0 {
		if link, err = os.Readlink(src); err != nil {
			return err
		}
	}
	h, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		return err
	}
	h.Name = target
	if mode != nil {
		h.Mode = *mode
	}
	switch {
	case fi.IsDir():
		h.Name += "/"
		lw.dirs[target] = true
		return lw.header(h)
	case fi.Mode()&fs.ModeSymlink != 0:
		return lw.header(h)
	case fi.Mode().IsRegular():
		if err := lw.header(h); err != nil {
			return err
		}
		f, err := os.Open(src)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(lw.tw, f)
		return err
	}
	return fmt.Errorf("%s: unsupported file type %s", src, fi.Mode().Type())
}
