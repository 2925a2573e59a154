// Package atomicfile writes a file as a reader must see it: whole, or not
// at all. Every file the suite publishes where something else reads or
// executes it (a node's /opt/cni/bin and /etc/cni/net.d, the report's
// ledger and renders, read by the run's other processes) is written here.
package atomicfile

import (
	"io"
	"os"
	"path/filepath"
)

// Write writes r to a temporary file beside path and renames it over path:
// a reader never sees half a file, and a program executing from path keeps
// its old inode (opening an executing file for writing fails with ETXTBSY;
// seen in CI: a node's bridge ran while a spec placed its own). The
// temporary name is unique, so two writers never share one, and it is
// removed on every error.
func Write(path string, r io.Reader, mode os.FileMode) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), ".vcf-"+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	if _, err = io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Chmod(f.Name(), mode); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// WriteFunc is Write of what produce writes, streamed through a pipe: the
// content is never held in memory whole (a results tarball). A produce
// that fails leaves no file.
func WriteFunc(path string, mode os.FileMode, produce func(io.Writer) error) error {
	r, w := io.Pipe()
	go func() { w.CloseWithError(produce(w)) }()
	err := Write(path, r, mode)
	r.Close() // a Write that failed first must not leave produce blocked
	return err
}
