package nodenet

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"reflect"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/probe"
)

// entered is a node whose namespace the suite enters (the lab's, kind's).
type entered struct {
	platform.Node
	nn *fabric.NodeNetns
}

func (e entered) Name() string             { return "kind-worker" }
func (e entered) Step1() *fabric.NodeNetns { return e.nn }

// agentOnly is a node the suite reaches only through its agent.
type agentOnly struct {
	named
	agent Agent
}

func (r agentOnly) Agent() Agent { return r.agent }

// inProcess is an agent making its observations in nn, as `conformance
// node observe` does in the node's namespace, and answering in JSON.
type inProcess struct{ nn *fabric.NodeNetns }

func (a inProcess) Observe(ctx context.Context, o Observation) ([]byte, error) {
	v, err := Observe(ctx, a.nn, o)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// step1Node is a namespace cabled like the guide's step 1, with a dummy
// port where uplink.100 would be (this kernel may lack 8021q): the port
// in br100, br100's address and the default route via it.
func step1Node(t *testing.T) *fabric.NodeNetns {
	t.Helper()
	ns, err := fabric.NewNamespace(fmt.Sprintf("nodenet-test-%d", os.Getpid()))
	if err != nil {
		t.Skipf("no network namespace here: %v", err)
	}
	t.Cleanup(func() { ns.Delete() })
	h := ns.Handle
	port := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "uplink", MTU: 1500}, PeerName: "trunk"}
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: fabric.BridgeName}}
	addr, _ := netlink.ParseAddr("203.0.113.2/24")
	_, dflt, _ := net.ParseCIDR("0.0.0.0/0")
	for i, step := range []func() error{
		func() error { return h.LinkAdd(port) },
		func() error { return h.LinkAdd(br) },
		func() error { return h.LinkSetMaster(port, br) },
		func() error { return h.LinkSetUp(port) },
		func() error { return h.LinkSetUp(br) },
		func() error { return h.AddrAdd(br, addr) },
		func() error {
			return h.RouteAdd(&netlink.Route{LinkIndex: br.Attrs().Index, Dst: dflt, Gw: net.ParseIP("203.0.113.1")})
		},
	} {
		if err := step(); err != nil {
			t.Fatalf("cabling step %d: %v", i, err)
		}
	}
	return &fabric.NodeNetns{Netns: ns.Path, Handle: h, Parent: "uplink"}
}

// What the agent hands back through JSON is what the suite reads in a
// node it enters, observation by observation: one implementation, on
// either side of the API.
func TestAnAgentObservesWhatTheSuiteReadsItself(t *testing.T) {
	nn := step1Node(t)
	ctx, local, far := context.Background(), entered{nn: nn}, agentOnly{agent: inProcess{nn}}
	for _, tc := range []struct {
		what string
		read func(platform.Node) (any, error)
	}{
		{"links", func(n platform.Node) (any, error) { return Links(ctx, n) }},
		{"routes", func(n platform.Node) (any, error) { return Routes(ctx, n) }},
		{"bridges", func(n platform.Node) (any, error) { return Bridges(ctx, n) }},
		{"fdb", func(n platform.Node) (any, error) { return BridgeFDB(ctx, n) }},
		{"driver", func(n platform.Node) (any, error) { return Driver(ctx, n, "uplink") }},
		// br100's own address answers: what counts is sent and received.
		{"ping", func(n platform.Node) (any, error) {
			r, err := Ping(ctx, n, netip.MustParseAddr("203.0.113.2"), probe.WithCount(2), probe.WithInterval(0))
			if err == nil && r.Received != 2 {
				err = fmt.Errorf("%d of %d replies from br100's own address", r.Received, r.Sent)
			}
			return [3]any{r.Sent, r.Received, r.Err}, err
		}},
	} {
		want, err := tc.read(local)
		if err != nil {
			t.Fatalf("%s, read by the suite: %v", tc.what, err)
		}
		got, err := tc.read(far)
		if err != nil {
			t.Fatalf("%s, through the agent: %v", tc.what, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the agent says\n%+v\nthe suite reads\n%+v", tc.what, got, want)
		}
	}
	if len(Observations()) != 7 {
		t.Errorf("observations %v: each needs its case above, or below", Observations())
	}
	// The one change: a bridge a spec caused goes, through the agent as
	// here; step 1's never does.
	if err := nn.Handle.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br101"}}); err != nil {
		t.Fatal(err)
	}
	if err := DeleteBridge(ctx, far, "br101"); err != nil {
		t.Fatalf("deleting br101 through the agent: %v", err)
	}
	if bridges, err := Bridges(ctx, local); err != nil || len(bridges) != 1 {
		t.Errorf("bridges after deleting br101: %v, %v", bridges, err)
	}
	if err := DeleteBridge(ctx, far, fabric.BridgeName); err == nil {
		t.Errorf("%s was deleted", fabric.BridgeName)
	}
}

// An agent's failure names the node; a node without an agent is not
// observable; a request for no known observation says which there are.
func TestAnAgentsFailureNamesTheNode(t *testing.T) {
	ctx := context.Background()
	_, err := Links(ctx, agentOnly{agent: failing{}})
	if err == nil || err.Error() != "node worker-1, through its agent: command terminated with exit code 1" {
		t.Errorf("got %v", err)
	}
	if _, err := Observe(ctx, &fabric.NodeNetns{}, Observation{What: "tap"}); err == nil {
		t.Error("an unknown observation was made")
	}
	if _, err := Observe(ctx, &fabric.NodeNetns{}, Observation{What: "driver"}); err == nil {
		t.Error("a driver was read without a link")
	}
}

type failing struct{}

func (failing) Observe(context.Context, Observation) ([]byte, error) {
	return nil, fmt.Errorf("command terminated with exit code 1")
}

// Step 1's uplink is found tagged (the VLAN port's parent) and untagged
// (the one port that is no pod's veth); anything else is no one uplink.
func TestStep1Links(t *testing.T) {
	br := fabric.BridgeName
	pod := evidence.Link{Name: "veth1a2b", Kind: "veth", Master: br}
	for _, tc := range []struct {
		name           string
		links          []evidence.Link
		parent, uplink string
	}{
		{"tagged", []evidence.Link{{Name: "eno1", Kind: "device"}, {Name: "eno1.100", Kind: "vlan", Parent: "eno1", Master: br}, pod}, "eno1.100", "eno1"},
		{"access mode", []evidence.Link{{Name: "eno1", Kind: "device", Master: br}, pod}, "eno1", "eno1"},
		{"kind's access mode", []evidence.Link{{Name: fabric.UplinkName, Kind: "veth", Master: br}, pod}, fabric.UplinkName, fabric.UplinkName},
		{"no uplink", []evidence.Link{pod}, "", ""},
		{"two VLANs", []evidence.Link{{Name: "a.100", Kind: "vlan", Parent: "a", Master: br}, {Name: "b.100", Kind: "vlan", Parent: "b", Master: br}}, "", ""},
	} {
		links := map[string]evidence.Link{}
		for _, l := range tc.links {
			links[l.Name] = l
		}
		parent, uplink, err := Step1Links(links)
		if parent != tc.parent || uplink != tc.uplink || (err == nil) != (tc.uplink != "") {
			t.Errorf("%s: got %q %q %v, want %q %q", tc.name, parent, uplink, err, tc.parent, tc.uplink)
		}
	}
}
