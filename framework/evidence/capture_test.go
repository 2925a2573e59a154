package evidence_test

import (
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/nsexec"
)

// A capture stops on a link that is never quiet for its read timeout (a
// gateway's ping stream every 20 ms): ARP-04 once waited on it forever.
func TestCaptureStopsOnABusyLink(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: makes a network namespace")
	}
	ns, err := fabric.NewNamespace("test-capture-busy")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Delete() })
	c, err := evidence.StartCapture(evidence.Point{Netns: ns.Path, Iface: "lo"}, "")
	if err != nil {
		t.Fatal(err)
	}
	var fd int
	if err := nsexec.Do(ns.Path, func() (err error) {
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	quit := make(chan struct{})
	defer close(quit)
	go func() {
		to := &unix.SockaddrInet4{Port: 9, Addr: [4]byte{127, 0, 0, 1}}
		for {
			select {
			case <-quit:
				return
			default:
				unix.Sendto(fd, []byte("busy"), 0, to)
			}
		}
	}()
	time.Sleep(300 * time.Millisecond)
	stopped := make(chan evidence.Frames, 1)
	go func() {
		frames, _ := c.Stop()
		stopped <- frames
	}()
	select {
	case frames := <-stopped:
		if len(frames) == 0 {
			t.Error("the capture recorded nothing of the traffic on lo")
		}
	case <-time.After(time.Second):
		t.Fatal("Stop did not return within 1 s on a link that is never quiet")
	}
}
