package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
)

// predictableName is the name systemd-udev's net_id gives a NIC under
// Ubuntu's NamePolicy (onboard, slot, path), as it resolves on KubeVirt:
// eno<N> when the firmware gives the device an ACPI index, else the PCI
// path enp<bus>s<slot>[f<function>]. A q35 pcie-root-port's hotplug slot
// has physical slot number 0, which net_id ignores, so no ens<N> arises;
// that is why the guide's guest sees its NICs as enp1s0 and enp2s0
// (libvirt puts each NIC behind its own root port, buses 1, 2, ...).
// sysfs is normally "/sys"; ok is false for NICs not on PCI.
func predictableName(sysfs, ifname string) (string, bool) {
	dev, err := filepath.EvalSymlinks(filepath.Join(sysfs, "class/net", ifname, "device"))
	if err != nil {
		return "", false
	}
	// virtio-net: the netdev hangs off virtioN, whose parent is the PCI function.
	if strings.HasPrefix(filepath.Base(dev), "virtio") {
		dev = filepath.Dir(dev)
	}
	var domain, bus, slot, fn uint
	if n, _ := fmt.Sscanf(filepath.Base(dev), "%x:%x:%x.%x", &domain, &bus, &slot, &fn); n != 4 {
		return "", false
	}
	devPort := readUint(filepath.Join(sysfs, "class/net", ifname, "dev_port"))
	suffix := ""
	if devPort > 0 {
		suffix = fmt.Sprintf("d%d", devPort)
	}
	if idx := readUint(filepath.Join(dev, "acpi_index")); idx > 0 && idx <= 16383 {
		return fmt.Sprintf("eno%d%s", idx, suffix), true
	}
	name := "en"
	if domain > 0 {
		name += fmt.Sprintf("P%d", domain)
	}
	name += fmt.Sprintf("p%ds%d", bus, slot)
	if fn > 0 || multifunction(dev) {
		name += fmt.Sprintf("f%d", fn)
	}
	return name + suffix, true
}

func readUint(p string) uint64 {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0
	}
	v, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 0, 64)
	return v
}

// multifunction reads the header-type bit of the PCI config space.
func multifunction(dev string) bool {
	b, err := os.ReadFile(filepath.Join(dev, "config"))
	return err == nil && len(b) > 0x0e && b[0x0e]&0x80 != 0
}

// nameNICs renames every PCI NIC to its predictable name, as udev does at
// boot before anything configures them.
func nameNICs() error {
	links, err := netlink.LinkList()
	if err != nil {
		return err
	}
	var errs []error
	for _, l := range links {
		old := l.Attrs().Name
		name, ok := predictableName("/sys", old)
		if !ok || name == old {
			continue
		}
		if err := netlink.LinkSetName(l, name); err != nil {
			errs = append(errs, fmt.Errorf("rename %s to %s: %w", old, name, err))
		}
	}
	return errors.Join(errs...)
}

// nics lists the PCI NICs by name (the fallback DHCP NIC is the first).
func nics() ([]netlink.Link, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, err
	}
	var out []netlink.Link
	for _, l := range links {
		if _, ok := predictableName("/sys", l.Attrs().Name); ok {
			out = append(out, l)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Attrs().Name < out[j].Attrs().Name })
	return out, nil
}

// ifnameMain prints the predictable name of each NIC given (debugging aid).
func ifnameMain(args []string) error {
	for _, a := range args {
		n, ok := predictableName("/sys", a)
		if !ok {
			return fmt.Errorf("%s: not a PCI NIC", a)
		}
		fmt.Println(n)
	}
	return nil
}
