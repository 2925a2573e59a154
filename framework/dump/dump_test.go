package dump

import (
	"errors"
	"testing"

	"github.com/vishvananda/netlink"
)

func TestConsistentReadsAgainUntilNoChangeInterrupts(t *testing.T) {
	calls := 0
	got, err := Consistent(func() ([]int, error) {
		calls++
		if calls < 3 {
			return []int{1}, netlink.ErrDumpInterrupted
		}
		return []int{1, 2}, nil
	})
	if err != nil || len(got) != 2 || calls != 3 {
		t.Fatalf("got %v, %v after %d dumps; want [1 2], nil after 3", got, err, calls)
	}
}

func TestConsistentReturnsOtherErrorsAtOnce(t *testing.T) {
	calls := 0
	boom := errors.New("no such namespace")
	if _, err := Consistent(func() ([]int, error) { calls++; return nil, boom }); !errors.Is(err, boom) || calls != 1 {
		t.Fatalf("got %v after %d dumps; want %v after 1", err, calls, boom)
	}
}

func TestConsistentGivesUpOnADumpAlwaysInterrupted(t *testing.T) {
	calls := 0
	_, err := Consistent(func() ([]int, error) { calls++; return nil, netlink.ErrDumpInterrupted })
	if !errors.Is(err, netlink.ErrDumpInterrupted) || calls != attempts {
		t.Fatalf("got %v after %d dumps; want ErrDumpInterrupted after %d", err, calls, attempts)
	}
}
