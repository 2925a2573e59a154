package stager

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"syscall"
)

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

// FileChange is one name's story across a run (a file, directory or
// symlink of the node directory: see File).
type FileChange struct {
	Name          string
	Before, After *File // nil when absent
	Held          Held
	Verdict       Verdict
}

// InodeChanged reports whether the name points at another inode than
// before the run (judged with the old inode held, see holding).
func (c FileChange) InodeChanged() bool {
	return c.Before != nil && c.After != nil && (!c.Held.Held && c.Before.Ino != c.After.Ino || c.Held.Held && !c.Held.AtName)
}

func compare(before, after Snapshot, h *holding) ([]FileChange, error) {
	names := map[string]bool{}
	for n := range before.Files {
		names[n] = true
	}
	for n := range after.Files {
		names[n] = true
	}
	var out []FileChange
	for n := range names {
		c := FileChange{Name: n}
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

func verdict(c FileChange) Verdict {
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
