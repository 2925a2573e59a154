package stager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A killed run, as a kubelet leaves one when the node shuts down or the
// container is OOM-killed: SIGKILL, no EXIT trap, whatever the script had
// half-written stays where it wrote it. The harness makes one honestly, from
// the script under test: the image's /cni-plugins/<plugin> becomes a FIFO
// that yields the first half of the plugin and then nothing, so the
// script's copy stalls mid-file wherever the script writes it; once the
// node directory holds something new, the run's process group is killed.
// What the killed run left is then observed, never assumed from a name.

// killSettle bounds how long the harness waits, once the FIFO has been read,
// for the copy to show up in the node directory before it kills anyway.
const killSettle = 2 * time.Second

// ErrNotInterrupted means the script never read the stalled plugin, so the
// run ended on its own and no killed run could be made of it.
var ErrNotInterrupted = errors.New("the script did not read the stalled plugin, so it could not be killed mid-copy")

type interrupt struct {
	plugin  string
	fifo    string // the node image's /cni-plugins/<plugin> on the host
	feed    []byte
	nodeDir string
	before  Snapshot

	mu     sync.Mutex
	fed    bool
	killed bool
	note   string
	fire   chan struct{} // closed when the run is to be killed
	ended  chan struct{} // closed when the run's process has been waited for
	quit   chan struct{} // closed by stop
	wg     sync.WaitGroup
	pid    int
	killer chan struct{} // closed when watch's goroutine is done
}

// StageKilled runs the subject as Stage does and kills it (SIGKILL to its
// process group) while it copies plugin; the image's copy is put back
// afterwards. The Result is the killed run's (Killed set), or, with
// ErrNotInterrupted, a run that ended on its own.
func (h *Harness) StageKilled(ctx context.Context, n *FakeNode, plugin string) (Result, error) {
	src := filepath.Join(h.payload, plugin)
	data, err := os.ReadFile(src)
	if err != nil {
		return Result{}, fmt.Errorf("the image has no %s to stall: %w", plugin, err)
	}
	fi, err := os.Stat(src)
	if err != nil {
		return Result{}, err
	}
	fifo := filepath.Join(n.imageDir, PluginsDir, plugin)
	if err := os.Remove(fifo); err != nil {
		return Result{}, err
	}
	if err := unix.Mkfifo(fifo, uint32(fi.Mode().Perm())); err != nil {
		return Result{}, fmt.Errorf("mkfifo %s: %w", fifo, err)
	}
	it := &interrupt{plugin: plugin, fifo: fifo, feed: data[:len(data)/2],
		fire: make(chan struct{}), ended: make(chan struct{}), quit: make(chan struct{}), killer: make(chan struct{})}
	res, err := h.stage(ctx, n, it)
	rerr := os.Remove(fifo)
	if rerr == nil {
		rerr = copyFile(src, fifo, fi.Mode().Perm())
	}
	if err == nil {
		err = rerr
	}
	if err == nil && !res.Killed {
		err = ErrNotInterrupted
	}
	return res, err
}

// start feeds the FIFO and decides when to kill, from the host's side.
func (it *interrupt) start(nodeDir string, before Snapshot) {
	it.nodeDir, it.before = nodeDir, before
	it.wg.Add(1)
	go func() {
		defer it.wg.Done()
		fd := -1
		for fd < 0 { // a writer's open succeeds once a reader has the FIFO open
			f, err := unix.Open(it.fifo, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
			if err == nil {
				fd = f
				break
			}
			select {
			case <-it.quit:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
		defer unix.Close(fd)
		_ = unix.SetNonblock(fd, false)
		for b := it.feed; len(b) > 0; { // returns once the reader has taken all but a pipe's worth
			w, err := unix.Write(fd, b)
			if err != nil {
				return // the reader went away: the script gave up on the plugin
			}
			b = b[w:]
		}
		it.mu.Lock()
		it.fed = true
		it.mu.Unlock()
		deadline := time.Now().Add(killSettle)
		for time.Now().Before(deadline) && !it.somethingNew() {
			select {
			case <-it.quit:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
		close(it.fire)
		<-it.quit // hold the FIFO open: the copy must not see its end
	}()
}

// somethingNew: the node directory has an entry it did not have, holding
// bytes (or a directory).
func (it *interrupt) somethingNew() bool {
	ents, err := os.ReadDir(it.nodeDir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if _, old := it.before.Get(e.Name()); old {
			continue
		}
		if fi, err := e.Info(); err == nil && (fi.IsDir() || fi.Size() > 0) {
			return true
		}
	}
	return false
}

// watch kills the run's process group when start says so.
func (it *interrupt) watch(pid int) {
	it.pid = pid
	go func() {
		defer close(it.killer)
		select {
		case <-it.fire:
			it.mu.Lock()
			it.killed = true
			it.mu.Unlock()
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		case <-it.ended:
		}
	}()
}

// exited is called once the run's process has been waited for.
func (it *interrupt) exited() {
	close(it.ended)
	if it.pid != 0 {
		<-it.killer
	}
}

// stop ends the feeding and tells whether the run was killed.
func (it *interrupt) stop() bool {
	close(it.quit)
	it.wg.Wait()
	it.mu.Lock()
	defer it.mu.Unlock()
	switch {
	case it.killed:
		it.note = fmt.Sprintf("killed with SIGKILL mid-copy: /%s/%s yielded %d of its bytes, then nothing", PluginsDir, it.plugin, len(it.feed))
	case it.fed:
		it.note = fmt.Sprintf("not killed: /%s/%s was read, but the run ended first", PluginsDir, it.plugin)
	default:
		it.note = fmt.Sprintf("not killed: the script never read /%s/%s", PluginsDir, it.plugin)
	}
	return it.killed
}

// Stranded lists what a killed run left in the node directory: names that
// were not there before and that are not plugins the image offers (those
// the script installed before it was killed), sorted.
func (h *Harness) Stranded(killed Result) []string {
	var out []string
	for _, n := range killed.After.Names() {
		if _, before := killed.Before.Get(n); !before && !h.Image.Offers(n) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// TempPaths finds where the script under test writes plugin before it
// publishes it: on a throwaway node of the layout it kills a run mid-copy
// of plugin and returns what that run left (names in /opt/cni/bin).
func (h *Harness) TempPaths(ctx context.Context, lay Layout, plugin string) ([]string, Result, error) {
	n, err := h.Prepare(Scenario{Name: "probe-" + lay.Name + "-" + plugin, Layout: lay})
	if err != nil {
		return nil, Result{}, errors.Join(err, n.close())
	}
	res, err := h.StageKilled(ctx, n, plugin)
	if cerr := n.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, res, err
	}
	return h.Stranded(res), res, nil
}

// DropFromImage removes plugin from the node's image, as a newer image
// that no longer carries it.
func (n *FakeNode) DropFromImage(plugin string) error {
	return os.Remove(filepath.Join(n.imageDir, PluginsDir, plugin))
}

func (n *FakeNode) close() error {
	if n == nil {
		return nil
	}
	return n.Close()
}
