// Command vcf-guest is the offline guest image's system, one static binary
// called by several names: /init (PID 1: modules, NIC names, the serial
// getty; poweroff and reboot ask it), cloud-init (NoCloud: write_files,
// users, passwords, runcmd, `status --wait`) and netplan (`netplan
// apply`). It reads userData and netplan with framework/cloudinit, as the
// lab tier does, and gives the suite what it uses of the guide's Ubuntu
// guest (predictable NIC names, a DHCP lease on the first NIC, a console
// login with passwordless sudo) while booting in seconds under software
// emulation.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

func main() {
	name, args := filepath.Base(os.Args[0]), os.Args[1:]
	if name == "vcf-guest" && len(args) > 0 {
		name, args = args[0], args[1:]
	}
	var err error
	switch name {
	case "init":
		err = initMain()
	case "cloud-init":
		os.Exit(cloudInitMain(args))
	case "netplan":
		err = netplanMain(args)
	case "ifname":
		err = ifnameMain(args)
	case "poweroff", "halt":
		err = unix.Kill(1, unix.SIGUSR2) // init powers off on it
	case "reboot":
		err = unix.Kill(1, unix.SIGINT) // as ctrl-alt-del: init restarts
	default:
		err = fmt.Errorf("called as %q: want init, cloud-init, netplan, ifname, poweroff or reboot", name)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}
