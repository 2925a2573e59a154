package main

import (
	"errors"
	"fmt"
	"os/exec"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cozystack/vlan-conformance/framework/cloudinit"
)

// netplanMain is the guest's netplan: `apply` configures the NICs from
// /{lib,etc,run}/netplan/*.yaml (the subset framework/cloudinit reads);
// `generate` only checks the files; `dhcp IFACE` is the background DHCP
// client apply starts for a NIC without a lease.
func netplanMain(args []string) error {
	if len(args) == 2 && args[0] == "dhcp" {
		l, err := netlink.LinkByName(args[1])
		if err != nil {
			return err
		}
		h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
		if err != nil {
			return err
		}
		return dhcpIfNeeded(h, l)
	}
	if len(args) != 1 || (args[0] != "apply" && args[0] != "generate") {
		return errors.New("usage: netplan apply|generate")
	}
	np, _, err := cloudinit.LoadNetplan("/")
	if err != nil {
		return err
	}
	if args[0] == "generate" {
		return nil
	}
	return netplanApply(np, dhcpAsync)
}

func netplanApply(np cloudinit.Netplan, dhcp cloudinit.DHCPFunc) error {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer h.Close()
	if err := np.Apply(h, dhcp); err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	return nil
}

// dhcpAsync is `netplan apply`'s DHCPFunc outside boot: like networkd, it
// does not hold the command up; a NIC without a lease gets a background
// client (netplan dhcp IFACE), reparented to init.
func dhcpAsync(h *netlink.Handle, l netlink.Link) error {
	if leased, err := hasGlobalIPv4(h, l); err != nil || leased {
		return err
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"vcf-guest", "netplan", "dhcp", l.Attrs().Name}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	return cmd.Process.Release()
}
