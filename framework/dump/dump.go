// Package dump reads netlink dumps whole. The kernel marks a dump that
// raced a change of what it lists (NLM_F_DUMP_INTR: an address finishing
// DAD, a link coming up while a guest boots beside), and netlink returns
// what it got with ErrDumpInterrupted. Such a list may miss the very entry a
// spec asserts on, so it is read again rather than trusted or failed on
// (seen in CI: the lab's bridge binding listing a pod's addresses).
package dump

import (
	"errors"
	"time"

	"github.com/vishvananda/netlink"
)

// attempts bounds the re-reads: a dump interrupted this often in a row
// means something keeps changing it, which the caller should hear.
const attempts = 10

// Consistent returns list's result from the first dump no change
// interrupted, or list's last error.
func Consistent[T any](list func() ([]T, error)) ([]T, error) {
	var (
		got []T
		err error
	)
	for i := range attempts {
		got, err = list()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return got, err
		}
		time.Sleep(time.Duration(i+1) * time.Millisecond)
	}
	return got, err
}
