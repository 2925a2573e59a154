package cabling

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/kernel"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/node"
	"github.com/cozystack/vlan-conformance/framework/probe"
)

// Two "node containers" stand in for kind nodes: processes in network
// namespaces of their own, found by PID as kind's runtime would report it.
// The cabling must build the guide's step 1 inside them and take it all out
// again, leaving the processes and their namespaces alone.
//
// It needs root and CONFIG_VLAN_8021Q. Where the kernel lacks it, run it in
// the lab VM:
//
//	go test -c -o bin/cabling.test ./framework/platform/cluster/cabling
//	bin/labvm-smoke -- $PWD/bin/cabling.test -test.run TestCablingNodeContainers -test.v
func TestCablingNodeContainers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("cabling needs root (network namespaces, veths)")
	}
	missing, err := kernel.Missing()
	if err != nil {
		t.Skipf("cannot probe kernel options: %v", err)
	}
	for _, o := range missing {
		if o.Name == "CONFIG_VLAN_8021Q" || o.Name == "CONFIG_BRIDGE" || o.Name == "CONFIG_VETH" {
			t.Skipf("this kernel lacks %s (%s); run this test in the lab VM: go test -c -o bin/cabling.test ./framework/platform/cluster/cabling && bin/labvm-smoke -- $PWD/bin/cabling.test -test.run TestCablingNodeContainers -test.v", o.Name, o.Why)
		}
	}
	cfg := &config.Config{VLAN: 100, OtherVLAN: 200, Subnet: "203.0.113.0/24", Gateway: "203.0.113.1", OtherSubnet: "198.51.100.0/24", OtherGateway: "198.51.100.1", ARPProfile: "tuned"}
	c := New(cfg)
	nodes := &node.Set{PIDs: map[string]int{}}
	names := []string{"vcf-t-worker", "vcf-t-worker2"}
	for _, n := range names {
		cmd := exec.Command("sleep", "300")
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		nodes.PIDs[n] = cmd.Process.Pid
	}
	subnet := netip.MustParsePrefix(cfg.Subnet)
	var specs []fabric.NodeSpec
	for i, n := range names {
		specs = append(specs, fabric.NodeSpec{Name: n, Wiring: fabric.GuideBridge, Address: NodeAddr(subnet, i)})
	}
	gw, otherGW := netip.MustParsePrefix("203.0.113.1/24"), netip.MustParsePrefix("198.51.100.1/24")
	if _, err := c.Cable(specs, gw, otherGW, false, nodes); err != nil {
		t.Fatal(err)
	}
	defer func() { c.Close() }() // the cabling of the moment
	// A run on a cluster `make kind-up` cabled and kept cables it again: the
	// earlier uplinks and bridges go, the new ones work.
	c = New(cfg)
	g, err := c.Cable(specs, gw, otherGW, false, nodes)
	if err != nil {
		t.Fatalf("cabling nodes that are cabled already: %v", err)
	}
	standby := platform.StandbyOf(g)
	if standby == nil || standby.Address() != StandbyAddr(gw).Addr() {
		t.Fatalf("the gateway must have its standby router at %s: %v", StandbyAddr(gw), standby)
	}
	for i, n := range nodes.Bridge {
		h := n.Step1().Handle
		sub, err := h.LinkByName("uplink.100")
		if err != nil {
			t.Fatalf("%s: %v", n.Name(), err)
		}
		br, err := h.LinkByName("br100")
		if err != nil {
			t.Fatalf("%s: %v", n.Name(), err)
		}
		if v, ok := sub.(*netlink.Vlan); !ok || v.VlanId != 100 || sub.Attrs().MasterIndex != br.Attrs().Index {
			t.Fatalf("%s: uplink.100 must be VLAN 100 enslaved to br100: %+v", n.Name(), sub.Attrs())
		}
		addrs, _ := h.AddrList(br, netlink.FAMILY_V4)
		if len(addrs) != 1 || addrs[0].IPNet.String() != NodeAddr(subnet, i).String() {
			t.Fatalf("%s: br100 addresses %v", n.Name(), addrs)
		}
		if n.NetnsPath() != fmt.Sprintf("/proc/%d/ns/net", nodes.PIDs[n.Name()]) {
			t.Fatalf("the node is reached through its PID's netns")
		}
		res, err := probe.Ping(context.Background(), c.GatewayNetns(), n.Address().Addr())
		if err != nil || !res.Succeeded() {
			t.Fatalf("the gateway must reach %s at %s over VLAN 100: %+v %v", n.Name(), n.Address(), res, err)
		}
		// The standby router is on the same VLAN, through its own port.
		res, err = standby.Ping(context.Background(), n.Address().Addr())
		if err != nil || !res.Succeeded() {
			t.Fatalf("the standby router must reach %s at %s over VLAN 100: %+v %v", n.Name(), n.Address(), res, err)
		}
	}
	cabled := nodes.Bridge
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, n := range cabled {
		h, err := netlink.NewHandleAt(mustNS(t, n.NetnsPath()), unix.NETLINK_ROUTE)
		if err != nil {
			t.Fatal(err)
		}
		links, _ := h.LinkList()
		for _, l := range links {
			if l.Attrs().Name != "lo" {
				t.Errorf("%s: link %s left behind", n.Name(), l.Attrs().Name)
			}
		}
		h.Close()
	}
	for _, ns := range []string{"vcf-gw", "vcf-gw-standby"} {
		if _, err := os.Stat("/run/netns/" + ns); err == nil {
			t.Errorf("the netns %s is left behind", ns)
		}
	}

}

func mustNS(t *testing.T, path string) netnsHandle {
	t.Helper()
	h, err := openNS(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}
