// Package cloudinit interprets the part of cloud-init userData the guide
// uses: #cloud-config (write_files, runcmd, users, the default user's
// password) and the netplan files it writes (the ethernets subset, see
// Netplan). The lab's guests and the cluster tier's pod workloads are
// configured with it from the host (Apply); the VMs' guest runs Debian's
// own cloud-init and netplan, and crosscheck_test.go holds the two to the
// same reading of the guide's userData.
package cloudinit

import (
	"fmt"

	"github.com/vishvananda/netlink"
)

// Apply reads the userData a guest was given and applies the netplan files
// it writes, but only when the userData runs `netplan apply`, as a real
// guest would. Anything outside the understood subset is an error, so a
// fixture the lab cannot honour fails loudly instead of being half-applied;
// dhcp4 is one (no DHCP server there).
func Apply(h *netlink.Handle, userData string) error {
	cc, err := ParseCloudConfig(userData)
	if err != nil {
		return err
	}
	if !cc.RunsNetplanApply() {
		return nil
	}
	for _, f := range cc.WriteFiles {
		if !IsNetplanPath(f.Path) {
			continue
		}
		data, err := f.Data()
		if err != nil {
			return err
		}
		if err := ApplyNetplan(h, data); err != nil {
			return fmt.Errorf("%s: %w", f.Path, err)
		}
	}
	return nil
}

// ApplyNetplan applies one netplan file's ethernets (no DHCP).
func ApplyNetplan(h *netlink.Handle, content []byte) error {
	np, err := ParseNetplan(content)
	if err != nil {
		return err
	}
	return np.Apply(h)
}
