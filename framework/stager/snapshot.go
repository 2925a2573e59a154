package stager

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// File is one entry of a node's /opt/cni/bin at one moment.
type File struct {
	Name string
	Kind string // "file", "dir", "symlink" or "other"
	Perm fs.FileMode
	Size int64
	Hash string // sha256 of the content; of the sorted entry names for a directory; of the target for a symlink
	Inode
	Provenance
	// Entries are a directory's entry names, sorted.
	Entries []string
}

// Inode is what tells a rewrite in place from a replacement: the inode a
// name points at and its times.
type Inode struct {
	Dev   uint64
	Ino   uint64
	MTime time.Time
	CTime time.Time
}

// Provenance is where a plugin's bytes came from.
type Provenance struct {
	// Version is the upstream release a reference plugin was built from,
	// from its Go build info ("" when it is not one).
	Version string
	// Pristine is set when the bytes equal a known release's copy of this
	// plugin; Of names that copy ("v1.9.1/bridge").
	Pristine bool
	Of       string
}

// Describe is the file's identity for a report: "v1.9.1", "v1.9.1 (modified)",
// "not a reference plugin", "directory".
func (f File) Describe() string {
	switch {
	case f.Kind == "dir":
		return "directory"
	case f.Kind != "file":
		return f.Kind
	case f.Pristine && path0(f.Of) != f.Name:
		return f.Version + " (a copy of " + path0(f.Of) + ")"
	case f.Pristine:
		return f.Version
	case f.Version != "":
		return f.Version + " (modified)"
	}
	return "not a reference plugin"
}

func path0(of string) string { return filepath.Base(of) }

// Snapshot is a node directory's entries by name.
type Snapshot struct {
	Dir   string
	Files map[string]File
}

// Get returns the entry called name.
func (s Snapshot) Get(name string) (File, bool) { f, ok := s.Files[name]; return f, ok }

// Names lists the entries, sorted.
func (s Snapshot) Names() []string {
	out := make([]string, 0, len(s.Files))
	for n := range s.Files {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// take records every entry of dir.
func (c *catalog) take(dir string) (Snapshot, error) {
	s := Snapshot{Dir: dir, Files: map[string]File{}}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return s, err
	}
	for _, e := range ents {
		f, err := c.describe(filepath.Join(dir, e.Name()))
		if err != nil {
			return s, err
		}
		s.Files[f.Name] = f
	}
	return s, nil
}

// Listing describes every entry of dir as Stat does: a node's directory
// as any platform reads it, with no release to tell provenance by.
func Listing(dir string) (map[string]File, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := make(map[string]File, len(ents))
	for _, e := range ents {
		f, err := Stat(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out[f.Name] = f
	}
	return out, nil
}

func (c *catalog) describe(p string) (File, error) {
	f, err := Stat(p)
	if err != nil || f.Kind != "file" {
		return f, err
	}
	if id, ok := c.byHash[f.Hash]; ok {
		f.Pristine, f.Of = true, id
		f.Version = id[:strings.Index(id, "/")]
	} else {
		f.Version = pluginVersion(p)
	}
	return f, nil
}

// Stat describes the entry at p (not following a symlink): its kind, mode,
// content hash and inode. Provenance is a harness catalog's to add.
func Stat(p string) (File, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return File{}, err
	}
	st := fi.Sys().(*syscall.Stat_t)
	f := File{
		Name: filepath.Base(p),
		Perm: fi.Mode().Perm(),
		Size: fi.Size(),
		Inode: Inode{
			Dev:   st.Dev,
			Ino:   st.Ino,
			MTime: time.Unix(st.Mtim.Sec, st.Mtim.Nsec),
			CTime: time.Unix(st.Ctim.Sec, st.Ctim.Nsec),
		},
	}
	switch {
	case fi.Mode().IsRegular():
		f.Kind = "file"
		if f.Hash, err = hashFile(p); err != nil {
			return f, err
		}
	case fi.IsDir():
		f.Kind = "dir"
		names, err := dirNames(p)
		if err != nil {
			return f, err
		}
		f.Hash = hashNames(names)
		f.Entries = append([]string{}, names...)
		sort.Strings(f.Entries)
	case fi.Mode()&fs.ModeSymlink != 0:
		f.Kind = "symlink"
		t, err := os.Readlink(p)
		if err != nil {
			return f, err
		}
		f.Hash = hashNames([]string{t})
	default:
		f.Kind = "other"
	}
	return f, nil
}

func dirNames(p string) ([]string, error) {
	d, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Readdirnames(-1)
}
