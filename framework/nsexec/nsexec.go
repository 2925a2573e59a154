// Package nsexec runs code inside a network namespace. Sockets opened and
// processes forked there stay there; netlink work should use
// netlink.NewHandleAt instead, which needs no thread switch.
package nsexec

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// Do runs fn with the calling goroutine's OS thread in the namespace at
// path ("" runs fn where we are). The thread is restored afterwards; if it
// cannot be, it stays locked so the Go runtime discards it rather than
// reusing a thread in the wrong namespace.
func Do(path string, fn func() error) error {
	if path == "" {
		return fn()
	}
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("current netns: %w", err)
	}
	defer orig.Close()
	target, err := netns.GetFromPath(path)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("open netns %s: %w", path, err)
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("enter netns %s: %w", path, err)
	}
	ferr := fn()
	if err := netns.Set(orig); err != nil {
		return fmt.Errorf("leave netns %s: %w (and %v)", path, err, ferr)
	}
	runtime.UnlockOSThread()
	return ferr
}

// NewNamed creates a named namespace (a bind mount under /run/netns) and
// returns a handle to it, leaving the calling thread where it was.
func NewNamed(name string) (netns.NsHandle, error) {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return netns.None(), err
	}
	defer orig.Close()
	h, err := netns.NewNamed(name)
	if serr := netns.Set(orig); serr != nil {
		return h, fmt.Errorf("return from new netns %s: %w", name, serr)
	}
	runtime.UnlockOSThread()
	return h, err
}
