package evidence_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
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

// fakeTap hands back fixed frames, as a node agent's capture would.
type fakeTap struct {
	frames  evidence.Frames
	started bool
}

func (f *fakeTap) Tap(context.Context, string) (func() (evidence.Frames, error), error) {
	f.started = true
	return func() (evidence.Frames, error) { return f.frames, nil }, nil
}

func (f *fakeTap) MTU(iface string) (int, error) { return 1400, nil }

// A capture through a Tap records what the tap hands back at Stop, into
// the pcap the spec keeps, and the point's MTU is the tap's.
func TestACaptureThroughATap(t *testing.T) {
	frame := evidence.Decode([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 1, 0x08, 0x06, 0, 1})
	frame.Time = time.Unix(1700000000, 0)
	tap := &fakeTap{frames: evidence.Frames{frame}}
	at := evidence.Point{Iface: "eno1", Via: tap}
	pcap := filepath.Join(t.TempDir(), "trunk.pcap")
	c, err := evidence.StartCapture(at, pcap)
	if err != nil || !tap.started {
		t.Fatalf("started %v: %v", tap.started, err)
	}
	got, err := c.Stop()
	if err != nil || len(got) != 1 {
		t.Fatalf("%v: %v", got, err)
	}
	f, err := os.Open(pcap)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	kept, err := evidence.ReadPcap(f)
	if err != nil || len(kept) != 1 || !kept[0].Time.Equal(frame.Time) || !bytes.Equal(kept[0].Raw, frame.Raw) {
		t.Errorf("the pcap kept %v (%v)", kept, err)
	}
	if mtu, err := at.MTU(); mtu != 1400 || err != nil {
		t.Errorf("MTU %d, %v", mtu, err)
	}
}
