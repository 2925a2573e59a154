package stager

import (
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// pluginsModule is the Go module of the upstream reference plugins.
const pluginsModule = "github.com/containernetworking/plugins"

// File is one entry of a node's /opt/cni/bin at one moment.
type File struct {
	Name  string
	Kind  string // "file", "dir", "symlink" or "other"
	Perm  fs.FileMode
	Size  int64
	Hash  string // sha256 of the content; of the sorted entry names for a directory; of the target for a symlink
	MTime time.Time
	CTime time.Time
	Dev   uint64
	Ino   uint64
	// Version is the upstream release a reference plugin was built from,
	// from its Go build info ("" when it is not one).
	Version string
	// Pristine is set when the bytes equal a known release's copy of this
	// plugin; Of names that copy ("v1.9.1/bridge").
	Pristine bool
	Of       string
	// Entries are a directory's entry names, sorted.
	Entries []string
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

func (c *catalog) describe(p string) (File, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return File{}, err
	}
	st := fi.Sys().(*syscall.Stat_t)
	f := File{
		Name:  filepath.Base(p),
		Perm:  fi.Mode().Perm(),
		Size:  fi.Size(),
		MTime: time.Unix(st.Mtim.Sec, st.Mtim.Nsec),
		CTime: time.Unix(st.Ctim.Sec, st.Ctim.Nsec),
		Dev:   st.Dev,
		Ino:   st.Ino,
	}
	switch {
	case fi.Mode().IsRegular():
		f.Kind = "file"
		if f.Hash, err = hashFile(p); err != nil {
			return f, err
		}
		if id, ok := c.byHash[f.Hash]; ok {
			f.Pristine, f.Of = true, id
			f.Version = id[:strings.Index(id, "/")]
		} else {
			f.Version = pluginVersion(p)
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

// holding keeps every regular file and directory of a node directory open
// across a run. A held inode cannot be freed, so its number cannot be
// recycled for a new file: comparing it with what the name points at
// afterwards is sound, and reading it shows whether its bytes were
// rewritten in place.
type holding struct {
	dir   string
	files map[string]*os.File
}

func hold(s Snapshot) (*holding, error) {
	h := &holding{dir: s.Dir, files: map[string]*os.File{}}
	for name, f := range s.Files {
		if f.Kind != "file" && f.Kind != "dir" {
			continue
		}
		fh, err := os.Open(filepath.Join(s.Dir, name))
		if err != nil {
			h.close()
			return nil, fmt.Errorf("hold %s: %w", name, err)
		}
		h.files[name] = fh
	}
	return h, nil
}

func (h *holding) close() {
	for _, f := range h.files {
		f.Close()
	}
}

// Held is what the inode a name pointed at before the run says afterwards.
type Held struct {
	Held bool // the entry was held (regular files and directories)
	// Linked: the held inode still has a name somewhere (nlink > 0).
	Linked bool
	// AtName: the name still points at the held inode.
	AtName bool
	// ContentKept: reading the held inode still yields the old bytes (old
	// entry names for a directory).
	ContentKept bool
}

func (h *holding) examine(name string, before File) (Held, error) {
	fh, ok := h.files[name]
	if !ok {
		return Held{}, nil
	}
	r := Held{Held: true}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(fh.Fd()), &st); err != nil {
		return r, err
	}
	r.Linked = st.Nlink > 0
	var now syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(h.dir, name), &now); err == nil {
		r.AtName = now.Dev == st.Dev && now.Ino == st.Ino
	} else if !errors.Is(err, syscall.ENOENT) {
		return r, err
	}
	var hash string
	var err error
	if before.Kind == "dir" && !r.Linked {
		return r, nil // a removed directory cannot be listed (ENOENT); its entries went first
	}
	if before.Kind == "dir" {
		if _, err = fh.Seek(0, io.SeekStart); err != nil {
			return r, err
		}
		var names []string
		if names, err = fh.Readdirnames(-1); err != nil && !errors.Is(err, io.EOF) {
			return r, err
		}
		hash = hashNames(names)
	} else if hash, err = hashReader(io.NewSectionReader(fh, 0, 1<<40)); err != nil {
		return r, err
	}
	r.ContentKept = hash == before.Hash
	return r, nil
}

// Verdict is what a run did to one name.
type Verdict string

const (
	Absent           Verdict = "absent"             // not there before nor after
	Added            Verdict = "added"              // not there before
	Removed          Verdict = "removed"            // gone afterwards
	Untouched        Verdict = "untouched"          // same inode, bytes, mode, mtime and ctime
	RewrittenInPlace Verdict = "rewritten in place" // same inode, but its bytes or metadata changed
	Replaced         Verdict = "replaced"           // the name points at another inode now
)

// Change is one name's story across a run.
type Change struct {
	Name          string
	Before, After *File // nil when absent
	Held          Held
	Verdict       Verdict
}

// InodeChanged reports whether the name points at another inode than
// before the run (judged with the old inode held, see holding).
func (c Change) InodeChanged() bool {
	return c.Before != nil && c.After != nil && (!c.Held.Held && c.Before.Ino != c.After.Ino || c.Held.Held && !c.Held.AtName)
}

func compare(before, after Snapshot, h *holding) ([]Change, error) {
	names := map[string]bool{}
	for n := range before.Files {
		names[n] = true
	}
	for n := range after.Files {
		names[n] = true
	}
	var out []Change
	for n := range names {
		c := Change{Name: n}
		if f, ok := before.Files[n]; ok {
			c.Before = &f
		}
		if f, ok := after.Files[n]; ok {
			c.After = &f
		}
		if c.Before != nil {
			held, err := h.examine(n, *c.Before)
			if err != nil {
				return nil, fmt.Errorf("examine %s: %w", n, err)
			}
			c.Held = held
		}
		c.Verdict = verdict(c)
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func verdict(c Change) Verdict {
	b, a := c.Before, c.After
	switch {
	case b == nil && a == nil:
		return Absent
	case b == nil:
		return Added
	case a == nil:
		return Removed
	}
	sameInode := c.Held.AtName
	if !c.Held.Held {
		sameInode = b.Dev == a.Dev && b.Ino == a.Ino && b.Kind == a.Kind
	}
	if !sameInode {
		return Replaced
	}
	kept := c.Held.ContentKept || !c.Held.Held && b.Hash == a.Hash
	if kept && b.Hash == a.Hash && b.Perm == a.Perm && b.MTime.Equal(a.MTime) && b.CTime.Equal(a.CTime) {
		return Untouched
	}
	return RewrittenInPlace
}
