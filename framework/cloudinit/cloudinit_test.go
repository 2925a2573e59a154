package cloudinit

import (
	"net"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/cozystack/vlan-conformance/fixtures"
)

// guideUserData is the guide's userData plus the suite's console login.
func guideUserData() string {
	return fixtures.CloudInit("203.0.113.10/24") +
		"password: secret\nchpasswd:\n  expire: false\n"
}

func TestParseGuideUserData(t *testing.T) {
	cc, err := ParseCloudConfig(guideUserData())
	if err != nil {
		t.Fatal(err)
	}
	if !cc.RunsNetplanApply() {
		t.Error("the guide's runcmd runs netplan apply")
	}
	if len(cc.WriteFiles) != 1 || cc.WriteFiles[0].Path != "/etc/netplan/60-vlan100.yaml" {
		t.Fatalf("write_files: %+v", cc.WriteFiles)
	}
	if m, err := cc.WriteFiles[0].Mode(); err != nil || m != 0o600 {
		t.Errorf("mode %o, %v; want 0600", m, err)
	}
	np, err := ParseNetplan([]byte(cc.WriteFiles[0].Content))
	if err != nil {
		t.Fatal(err)
	}
	if e := np.Network.Ethernets["enp2s0"]; len(e.Addresses) != 1 || e.Addresses[0] != "203.0.113.10/24" {
		t.Errorf("enp2s0: %+v", e)
	}
}

func TestCloudConfigForms(t *testing.T) {
	cc, err := ParseCloudConfig(`#cloud-config
users:
  - default
  - name: ops
    groups: adm, sudo
    sudo: ALL=(ALL) NOPASSWD:ALL
    lock_passwd: false
write_files:
  - path: /a
    permissions: 0640
    encoding: b64
    content: aGVsbG8=
runcmd:
  - [echo, "it's"]
  - echo done
chpasswd:
  users:
    - {name: ops, password: x}
`)
	if err != nil {
		t.Fatal(err)
	}
	if cc.RunsNetplanApply() {
		t.Error("no netplan apply here")
	}
	if m, _ := cc.WriteFiles[0].Mode(); m != 0o640 {
		t.Errorf("unquoted 0640: mode %o", m)
	}
	if d, err := cc.WriteFiles[0].Data(); err != nil || string(d) != "hello" {
		t.Errorf("b64 content %q, %v", d, err)
	}
	if _, err := ParseCloudConfig("#!/bin/sh\necho hi\n"); err == nil {
		t.Error("a shell script is not #cloud-config")
	}
}

func TestNetplanStrict(t *testing.T) {
	if _, err := ParseNetplan([]byte("network:\n  version: 2\n  ethernets:\n    e: {dhcp6: true}\n")); err == nil {
		t.Error("dhcp6 is outside the subset and must be an error")
	}
	if _, err := ParseNetplan([]byte("network:\n  version: 1\n")); err == nil {
		t.Error("version 1 must be an error")
	}
}

// inNetns runs f with a handle into a fresh network namespace.
func inNetns(t *testing.T, f func(h *netlink.Handle)) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	ns, err := netns.New()
	if err != nil {
		t.Skipf("no network namespace: %v", err)
	}
	defer ns.Close()
	if err := netns.Set(orig); err != nil {
		t.Fatal(err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	f(h)
}

func TestApplyGuideUserData(t *testing.T) {
	inNetns(t, func(h *netlink.Handle) {
		mac, _ := net.ParseMAC("02:00:00:00:00:02")
		for _, n := range []string{"enp1s0", "eth1"} {
			la := netlink.NewLinkAttrs()
			la.Name = n
			if n == "eth1" {
				la.HardwareAddr = mac
			}
			if err := h.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: n + "-peer"}); err != nil {
				t.Fatal(err)
			}
		}
		// The guide's file names enp2s0: absent, so Apply must fail loudly.
		if err := Apply(h, guideUserData()); err == nil || !strings.Contains(err.Error(), "no interface enp2s0") {
			t.Fatalf("want a missing-interface error, got %v", err)
		}
		// Matched by MAC and renamed, then applied twice (harmless).
		np, err := ParseNetplan([]byte("network:\n  version: 2\n  ethernets:\n    vlan:\n      match: {macaddress: '02:00:00:00:00:02'}\n      set-name: enp2s0\n      mtu: 1400\n      addresses: [203.0.113.10/24]\n      routes: [{to: 198.51.100.0/24, via: 203.0.113.1}]\n"))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			if err := np.Apply(h); err != nil {
				t.Fatalf("apply %d: %v", i, err)
			}
		}
		l, err := h.LinkByName("enp2s0")
		if err != nil {
			t.Fatal(err)
		}
		if l.Attrs().MTU != 1400 {
			t.Errorf("mtu %d", l.Attrs().MTU)
		}
		addrs, _ := h.AddrList(l, netlink.FAMILY_V4)
		if len(addrs) != 1 || addrs[0].IPNet.String() != "203.0.113.10/24" {
			t.Errorf("addresses %v", addrs)
		}
		routes, _ := h.RouteList(l, netlink.FAMILY_V4)
		found := false
		for _, r := range routes {
			found = found || (r.Dst != nil && r.Dst.String() == "198.51.100.0/24" && r.Gw.String() == "203.0.113.1")
		}
		if !found {
			t.Errorf("routes %v", routes)
		}
		if err := ApplyNetplan(h, []byte("network:\n  version: 2\n  ethernets:\n    enp1s0: {dhcp4: true}\n")); err == nil {
			t.Error("dhcp4 without a DHCP client must be an error")
		}
	})
}

// The control's edit works on the parsed document, whatever the indentation.
func TestAddDefaultRouteEditsTheParsedDocument(t *testing.T) {
	ud := "#cloud-config\nwrite_files:\n- path: /etc/netplan/60-x.yaml\n  content: |\n    network:\n     version: 2\n     ethernets:\n      enp2s0:\n       addresses: [192.0.2.10/24]\nruncmd:\n- netplan apply\n"
	out, err := AddDefaultRoute(ud, "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	cc, err := ParseCloudConfig(out)
	if err != nil {
		t.Fatal(err)
	}
	data, err := cc.WriteFiles[0].Data()
	if err != nil {
		t.Fatal(err)
	}
	np, err := ParseNetplan(data)
	if err != nil {
		t.Fatal(err)
	}
	eth := np.Network.Ethernets["enp2s0"]
	if len(eth.Routes) != 1 || eth.Routes[0].To != "default" || eth.Routes[0].Via != "192.0.2.1" || len(eth.Addresses) != 1 {
		t.Errorf("edited netplan: %+v", eth)
	}
	if !cc.RunsNetplanApply() {
		t.Error("runcmd lost")
	}
}
