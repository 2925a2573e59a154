package suitejob

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ExitCode is the file in the tarball that holds the run's exit code
// (0 passed, 1 a claim failed, 2 bad input): certify exits with it.
const ExitCode = "exit-code"

// Pack writes dir's files and directories as a gzipped tar, named
// relative to dir: the run's results (the sockets and links a run may
// leave are not results).
func Pack(dir string, w io.Writer) error { return pack(dir, w, false) }

// PackInputs is Pack keeping symbolic links too (a chart's link to a
// library chart): the files certify carries in.
func PackInputs(dir string, w io.Writer) error { return pack(dir, w, true) }

func pack(dir string, w io.Writer, links bool) error {
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		switch {
		case links && info.Mode()&fs.ModeSymlink != 0:
			if link, err = os.Readlink(path); err != nil {
				return err
			}
		case !info.Mode().IsRegular() && !info.IsDir():
			return nil
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if info.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// Unpack extracts a tarball Pack wrote into dir; a name that would land
// outside dir, or a link (results have none: one could lead a later write
// or read out of dir), is an error.
func Unpack(r io.Reader, dir string) error { return unpack(r, dir, false) }

// UnpackInputs extracts a tarball PackInputs wrote (certify's own, in the
// pod): links too, each to a target its name's directory keeps inside dir.
func UnpackInputs(r io.Reader, dir string) error { return unpack(r, dir, true) }

func unpack(r io.Reader, dir string, links bool) error {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(filepath.FromSlash(hdr.Name))
		if !filepath.IsLocal(name) {
			return fmt.Errorf("results: %q is outside the results", hdr.Name)
		}
		path := filepath.Join(dir, name)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			if !links {
				return fmt.Errorf("results: %q is a link (%s)", hdr.Name, hdr.Linkname)
			}
			if filepath.IsAbs(hdr.Linkname) || !filepath.IsLocal(filepath.Join(filepath.Dir(name), hdr.Linkname)) {
				return fmt.Errorf("results: %q links outside the results (%s)", hdr.Name, hdr.Linkname)
			}
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			if err := os.Symlink(hdr.Linkname, path); err != nil {
				return err
			}
		default:
			return fmt.Errorf("results: %q is not a file, a directory or a link", hdr.Name)
		}
	}
}

// ReadExitCode is the run's exit code from unpacked results in dir.
func ReadExitCode(dir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, ExitCode))
	if err != nil {
		return 0, err
	}
	var code int
	if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &code); err != nil {
		return 0, fmt.Errorf("%s: %q: %w", ExitCode, b, err)
	}
	return code, nil
}
