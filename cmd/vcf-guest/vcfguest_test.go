package main

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
)

// fakeNIC lays out sysfs as the kernel does for a virtio-net NIC at pciAddr
// (or, with virtio false, a NIC whose driver binds the PCI function).
func fakeNIC(t *testing.T, sys, ifname, pciAddr string, virtio bool, headerType byte, acpiIndex string) {
	t.Helper()
	pci := filepath.Join(sys, "devices/pci0000:00/0000:00:02.0", pciAddr)
	dev := pci
	if virtio {
		dev = filepath.Join(pci, "virtio"+ifname)
	}
	netdir := filepath.Join(dev, "net", ifname)
	if err := os.MkdirAll(netdir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := make([]byte, 64)
	cfg[0x0e] = headerType
	os.WriteFile(filepath.Join(pci, "config"), cfg, 0o644)
	if acpiIndex != "" {
		os.WriteFile(filepath.Join(pci, "acpi_index"), []byte(acpiIndex+"\n"), 0o644)
	}
	os.Symlink("../..", filepath.Join(netdir, "device"))
	os.MkdirAll(filepath.Join(sys, "class/net"), 0o755)
	rel, _ := filepath.Rel(filepath.Join(sys, "class/net"), netdir)
	if err := os.Symlink(rel, filepath.Join(sys, "class/net", ifname)); err != nil {
		t.Fatal(err)
	}
}

func TestPredictableName(t *testing.T) {
	sys := t.TempDir()
	fakeNIC(t, sys, "eth0", "0000:01:00.0", true, 0, "")
	fakeNIC(t, sys, "eth1", "0000:02:00.0", true, 0, "")
	fakeNIC(t, sys, "eth2", "0000:03:00.1", false, 0x80, "")
	fakeNIC(t, sys, "eth3", "0000:04:00.0", false, 0x80, "")
	fakeNIC(t, sys, "eth4", "0000:05:00.0", true, 0, "3")
	for ifname, want := range map[string]string{
		"eth0": "enp1s0", "eth1": "enp2s0", "eth2": "enp3s0f1", "eth3": "enp4s0f0", "eth4": "eno3",
	} {
		if got, ok := predictableName(sys, ifname); !ok || got != want {
			t.Errorf("%s: got %q (%v), want %s", ifname, got, ok, want)
		}
	}
	os.MkdirAll(filepath.Join(sys, "devices/virtual/net/lo"), 0o755)
	os.Symlink("../../devices/virtual/net/lo", filepath.Join(sys, "class/net/lo"))
	if got, ok := predictableName(sys, "lo"); ok {
		t.Errorf("lo has no PCI path, got %q", got)
	}
}

func TestDHCPMessageRoundTrip(t *testing.T) {
	mac, _ := net.ParseMAC("02:00:00:00:00:01")
	xid := [4]byte{1, 2, 3, 4}
	req := dhcpMessage(dhcpRequest, xid, mac, net.IPv4(10, 0, 2, 15), net.IPv4(10, 0, 2, 2))
	if req[0] != 1 || binary.BigEndian.Uint16(req[10:12]) != 0x8000 || !bytes.Equal(req[28:34], mac) {
		t.Fatalf("bad request header % x", req[:40])
	}
	// A reply as KubeVirt's server builds one: address, mask, router,
	// classless routes, DNS, MTU, infinite lease.
	rep := make([]byte, 240)
	rep[0] = 2
	copy(rep[4:8], xid[:])
	copy(rep[16:20], []byte{10, 244, 0, 5})
	copy(rep[28:34], mac)
	copy(rep[236:240], dhcpCookie)
	for _, o := range [][]byte{
		{53, 1, dhcpAck}, {1, 4, 255, 255, 255, 0}, {3, 4, 10, 244, 0, 1}, {54, 4, 10, 244, 0, 1},
		{121, 14, 32, 10, 244, 0, 1, 0, 0, 0, 0, 0, 10, 244, 0, 1}, {6, 4, 10, 96, 0, 10}, {26, 2, 0x05, 0xaa},
		{51, 4, 0xff, 0xff, 0xff, 0xff}, {0}, {255},
	} {
		rep = append(rep, o...)
	}
	ls, typ, ok := parseDHCP(rep, xid, mac)
	if !ok || typ != dhcpAck {
		t.Fatalf("parse: ok %v type %d", ok, typ)
	}
	if ls.addr != netip.MustParsePrefix("10.244.0.5/24") || ls.mtu != 1450 || len(ls.dns) != 1 || !ls.server.Equal(net.IPv4(10, 244, 0, 1)) {
		t.Errorf("lease %+v", ls)
	}
	if len(ls.routes) != 2 || ls.routes[0].dst != netip.MustParsePrefix("10.244.0.1/32") || !ls.routes[0].gw.Equal(net.IPv4zero) ||
		ls.routes[1].dst != netip.MustParsePrefix("0.0.0.0/0") || !ls.routes[1].gw.Equal(net.IPv4(10, 244, 0, 1)) {
		t.Errorf("classless routes %+v", ls.routes)
	}
	if _, _, ok := parseDHCP(rep, [4]byte{9, 9, 9, 9}, mac); ok {
		t.Error("another transaction's reply must be ignored")
	}
	if b := broadcast(netip.MustParsePrefix("10.244.0.5/24")); !b.Equal(net.IPv4(10, 244, 0, 255)) {
		t.Errorf("broadcast %s", b)
	}
}

func TestLabelOf(t *testing.T) {
	iso := make([]byte, 0x8800)
	iso[0x8000] = 1
	copy(iso[0x8001:], "CD001")
	copy(iso[0x8028:0x8048], "cidata                          ")
	if fs, l := labelOf(iso); fs != "iso9660" || l != "cidata" {
		t.Errorf("iso: %q %q", fs, l)
	}
	fat := make([]byte, 512)
	fat[510], fat[511] = 0x55, 0xaa
	copy(fat[0x2b:], "CIDATA     ")
	copy(fat[0x36:], "FAT12   ")
	if fs, l := labelOf(fat); fs != "vfat" || l != "CIDATA" {
		t.Errorf("fat: %q %q", fs, l)
	}
	if fs, _ := labelOf(make([]byte, 0x8800)); fs != "" {
		t.Errorf("zeroes: %q", fs)
	}
}
