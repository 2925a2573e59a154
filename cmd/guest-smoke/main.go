// Command guest-smoke boots the VMs' guest (images/guest-debian) without
// KubeVirt and checks it through the suite's own console driver
// (framework/platform/cluster/console), the one the cluster tier logs in
// with: QEMU TCG on q35 with the devices KubeVirt gives a vm-instance VM,
// the guide's userData on a cidata ISO made as virt-launcher makes it.
//
//	pcie-root-port 1: virtio-net, the pod NIC  -> enp1s0, DHCP (QEMU's user
//	                  network, as virt-launcher's DHCP server)
//	pcie-root-port 2: virtio-net, the VLAN NIC -> enp2s0, 203.0.113.10/24
//	                  from the guide's netplan; QEMU's user network plays
//	                  the VLAN gateway 203.0.113.1 (answers ARP and ping)
//	pcie-root-port 3: virtio-blk, cidata ISO9660 (xorrisofs -volid cidata
//	                  -joliet -rock, as virt-launcher) with user-data and
//	                  meta-data
//
// QEMU runs in a network namespace of its own (unshare -n): its user
// networks have nowhere to send anything. Checks: systemd is PID 1, Debian's
// cloud-init ran from the NoCloud seed and finished, netplan rendered the
// guide's file for networkd, enp2s0 has the /24 and no default route, ping
// and arping reach the gateway, the ACPI power button powers off. -control
// also boots a seed whose runcmd fails, which must give `status: error`.
// Exit 1 on a failed check, 2 on bad input.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/cozystack/vlan-conformance/fixtures"
	"github.com/cozystack/vlan-conformance/framework/cloudinit"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/console"
)

// The guest's user and the password the suite gives it (--guest-password's default).
const (
	user     = "ubuntu"
	password = "vcf-conformance"
	vlanAddr = "203.0.113.10/24"
)

type options struct {
	kernel, initrd, cpu, append, record string
	bootTimeout                         time.Duration
	control, debug                      bool
}

func main() {
	var o options
	flag.StringVar(&o.kernel, "kernel", "", "the guest's kernel (images/guest-debian/build.sh: $OFFLINE_CACHE/work/guest-debian/vmlinux)")
	flag.StringVar(&o.initrd, "initrd", "", "the guest's initramfs (…/initrd.img)")
	flag.StringVar(&o.cpu, "cpu", "max", "QEMU -cpu")
	// The kernelArgs the suite sets in spec.domain.firmware.kernelBoot.
	flag.StringVar(&o.append, "append", "console=ttyS0 quiet mitigations=off cryptomgr.notests", "kernel command line")
	flag.StringVar(&o.record, "record", "", "file to write the boot-to-shell seconds to (for make bench)")
	flag.DurationVar(&o.bootTimeout, "boot-timeout", 5*time.Minute, "how long the boot to a root shell may take")
	flag.BoolVar(&o.control, "control", false, "also boot a seed whose runcmd fails: it must give status: error")
	flag.BoolVar(&o.debug, "debug", false, "print systemd-analyze and cloud-init analyze")
	flag.Parse()
	if err := o.check(); err != nil {
		fmt.Fprintln(os.Stderr, "guest-smoke:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "guest-smoke: FAIL:", err)
		os.Exit(1)
	}
}

func (o options) check() error {
	for _, f := range []string{o.kernel, o.initrd} {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			return fmt.Errorf("no kernel or initrd at %q (run images/guest-debian/build.sh)", f)
		}
	}
	for _, t := range []string{"qemu-system-x86_64", "xorrisofs", "unshare"} {
		if _, err := exec.LookPath(t); err != nil {
			return fmt.Errorf("%s not found (apt-get install qemu-system-x86 xorriso util-linux)", t)
		}
	}
	return nil
}

func run(ctx context.Context, o options) error {
	dir, err := os.MkdirTemp("", "vcf-guest-smoke.")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	g, err := boot(ctx, o, dir, "good", "")
	if err != nil {
		return err
	}
	defer g.kill()
	fmt.Printf("==> root shell %.1f s after QEMU started\n", g.shellAfter.Seconds())
	if err := goodGuest(ctx, g, o.debug); err != nil {
		return g.failed(err)
	}
	took, err := g.powerdown(90 * time.Second)
	if err != nil {
		return g.failed(err)
	}
	fmt.Printf("ok: the ACPI power button powers off in %.1f s\n", took.Seconds())
	if o.control {
		if err := failingRuncmd(ctx, o, dir); err != nil {
			return err
		}
	}
	if o.record != "" {
		return os.WriteFile(o.record, fmt.Appendf(nil, "%.1f\n", g.shellAfter.Seconds()), 0o644)
	}
	return nil
}

// check is one command in the guest and what its output must hold.
type check struct {
	what, cmd string
	want      *regexp.Regexp
	also      func(out string) error // more to hold, if set
}

var checks = []check{
	{"systemd is PID 1", "cat /proc/1/comm", regexp.MustCompile(`(?m)^systemd$`), nil},
	{"Debian's cloud-init and netplan.io", "dpkg-query -W -f '${Package} ${Version}\\n' cloud-init netplan.io systemd", regexp.MustCompile(`(?m)^netplan\.io 0\.106`), nil},
	{"cloud-init status --wait: done, from the NoCloud seed", "cloud-init status --wait --long", regexp.MustCompile(`(?s)(?m:^status: done$).*DataSourceNoCloud`), nil},
	{"cloud-init.log: the real cloud-init ran runcmd", "grep -o 'Cloud-init v\\. [0-9.]*' /var/log/cloud-init.log | sort -u", regexp.MustCompile(`Cloud-init v\. 22\.4`), nil},
	{"hostname from meta-data's local-hostname", "hostname", regexp.MustCompile(`(?m)^vm-instance-smoke$`), nil},
	{"write_files wrote the netplan file 0600; netplan rendered it for networkd", "stat -c %a /etc/netplan/60-vlan100.yaml; ls /run/systemd/network/", regexp.MustCompile(`(?s)^600\n.*10-netplan-enp2s0\.network`), nil},
	// cloud-init is done once netplan apply returns, which does not wait
	// for networkd to finish the link: seen "configuring" a second later
	// (2 of 11 boots beside another guest). So the check waits for it as
	// networkd's own wait-online does (its unit is masked, the tool is not).
	{"systemd-networkd manages enp2s0 (configured)", "/lib/systemd/systemd-networkd-wait-online -i enp2s0 --timeout=30; SYSTEMD_COLORS=0 networkctl list --no-legend", regexp.MustCompile(`enp2s0 +ether +routable +configured`), nil},
	{"VLAN NIC enp2s0 has the guide's /24", "ip -4 -o addr show dev enp2s0", regexp.MustCompile(`inet 203\.0\.113\.10/24`), nil},
	{"pod NIC enp1s0 has a DHCP lease", "ip -4 -o addr show dev enp1s0", regexp.MustCompile(`inet 10\.0\.2\.15/24`), nil},
	{"default route on the pod NIC, only the connected /24 on enp2s0", "ip -4 route show table main",
		regexp.MustCompile(`(?s)(?m:^default via 10\.0\.2\.2 dev enp1s0 proto dhcp).*(?m:^203\.0\.113\.0/24 dev enp2s0 proto kernel scope link src 203\.0\.113\.10)`),
		onlyConnectedRoute},
	{"arping reaches the VLAN gateway", "arping -c 1 -w 5 -I enp2s0 203.0.113.1", regexp.MustCompile(`[Uu]nicast reply from 203\.0\.113\.1`), nil},
	{"ping reaches the VLAN gateway", "ping -c 1 -W 5 203.0.113.1", regexp.MustCompile(`1 received`), nil},
	{"python3 with AF_PACKET sockets (the cluster tier's ARP prober)", "python3 -c 'import socket; print(socket.AF_PACKET)'", regexp.MustCompile(`(?m)^17$`), nil},
}

// onlyConnectedRoute: the guide's /24 brings up the connected route on
// enp2s0 and nothing else there.
func onlyConnectedRoute(routes string) error {
	var on []string
	for _, l := range strings.Split(routes, "\n") {
		if strings.Contains(l, " dev enp2s0") {
			on = append(on, l)
		}
	}
	if len(on) != 1 {
		return fmt.Errorf("routes on enp2s0 %q, want the connected /24 alone", on)
	}
	return nil
}

func goodGuest(ctx context.Context, g *guest, debug bool) error {
	for _, c := range checks {
		out, code, err := g.con.Run(ctx, c.cmd, 4*time.Minute)
		switch {
		case err != nil:
			return fmt.Errorf("%s: %w", c.what, err)
		case code != 0 || !c.want.MatchString(out):
			return fmt.Errorf("%s (exit %d): %q", c.what, code, out)
		case c.also != nil:
			if err := c.also(out); err != nil {
				return fmt.Errorf("%s: %w", c.what, err)
			}
		}
		fmt.Println("ok:", c.what)
	}
	if debug {
		out, _, err := g.con.Run(ctx, "systemd-analyze; systemd-analyze critical-chain serial-getty@ttyS0.service; systemd-analyze blame | head -n 20; cloud-init analyze show | cut -c1-200", 2*time.Minute)
		if err != nil {
			return err
		}
		fmt.Print(out)
	}
	return nil
}

// failingRuncmd is the negative control: a seed whose runcmd fails must
// give cloud-init's `status: error` and a non-zero exit.
func failingRuncmd(ctx context.Context, o options, dir string) error {
	fmt.Println("==> negative control: a seed whose runcmd fails")
	g, err := boot(ctx, o, dir, "bad", "'false'")
	if err != nil {
		return err
	}
	defer g.kill()
	out, code, err := g.con.Run(ctx, "cloud-init status --wait --long", 4*time.Minute)
	if err != nil {
		return g.failed(err)
	}
	if code == 0 || !regexp.MustCompile(`(?m)^status: error$`).MatchString(out) {
		return g.failed(fmt.Errorf("a failing runcmd must give status: error (exit %d): %q", code, out))
	}
	fmt.Printf("ok: a failing runcmd gives status: error, exit %d\n", code)
	return nil
}

// guest is one QEMU boot, logged in as root.
type guest struct {
	qemu       *exec.Cmd
	exited     chan error
	con        *console.Console
	monitor    net.Conn
	serialLog  string
	shellAfter time.Duration // QEMU start to the suite's root shell
}

// boot makes the seed (extra: one more runcmd line after the guide's),
// starts QEMU and logs in on its serial console.
func boot(ctx context.Context, o options, dir, name, extra string) (*guest, error) {
	iso, err := seed(dir, name, extra)
	if err != nil {
		return nil, err
	}
	serial, mon := filepath.Join(dir, name+".serial"), filepath.Join(dir, name+".monitor")
	g := &guest{exited: make(chan error, 1), serialLog: filepath.Join(dir, name+".console.log")}
	g.qemu = exec.Command("unshare", "-n", "--", "qemu-system-x86_64", "-machine", "q35", "-accel", "tcg", "-cpu", o.cpu, "-m", "1024", "-smp", "1",
		"-nodefaults", "-no-user-config", "-display", "none",
		"-chardev", "socket,id=ser,path="+serial+",server=on,wait=off", "-serial", "chardev:ser",
		"-chardev", "socket,id=mon,path="+mon+",server=on,wait=off", "-mon", "chardev=mon,mode=readline",
		"-kernel", o.kernel, "-initrd", o.initrd, "-append", o.append,
		"-device", "pcie-root-port,id=pci.1,bus=pcie.0,chassis=1,port=0x10,addr=0x2.0,multifunction=on",
		"-device", "pcie-root-port,id=pci.2,bus=pcie.0,chassis=2,port=0x11,addr=0x2.1",
		"-device", "pcie-root-port,id=pci.3,bus=pcie.0,chassis=3,port=0x12,addr=0x2.2",
		"-netdev", "user,id=pod,net=10.0.2.0/24",
		"-device", "virtio-net-pci,netdev=pod,bus=pci.1,addr=0x0,mac=02:00:00:00:01:01",
		"-netdev", "user,id=vlan,net=203.0.113.0/24,host=203.0.113.1,dhcpstart=203.0.113.200",
		"-device", "virtio-net-pci,netdev=vlan,bus=pci.2,addr=0x0,mac=02:00:00:00:02:02",
		"-drive", "file="+iso+",if=none,id=cidata,format=raw,readonly=on",
		"-device", "virtio-blk-pci,drive=cidata,bus=pci.3,addr=0x0")
	qlog, err := os.Create(filepath.Join(dir, name+".qemu.log"))
	if err != nil {
		return nil, err
	}
	g.qemu.Stdout, g.qemu.Stderr = qlog, qlog
	started := time.Now()
	if err := g.qemu.Start(); err != nil {
		return nil, fmt.Errorf("starting QEMU: %w", err)
	}
	go func() { g.exited <- g.qemu.Wait(); qlog.Close() }()
	line, err := g.dial(ctx, serial)
	if err != nil {
		g.kill()
		return nil, err
	}
	if g.monitor, err = g.dial(ctx, mon); err != nil {
		line.Close()
		g.kill()
		return nil, err
	}
	logf, err := os.Create(g.serialLog)
	if err != nil {
		g.kill()
		return nil, err
	}
	g.con = console.New(line, logf)
	fmt.Printf("==> booting %s + %s under TCG (%s)\n", filepath.Base(o.kernel), filepath.Base(o.initrd), name)
	if err := g.con.Login(ctx, user, password, o.bootTimeout); err != nil {
		g.kill()
		return nil, g.failed(err)
	}
	g.shellAfter = time.Since(started)
	return g, nil
}

// dial waits for one of QEMU's sockets to take a connection.
func (g *guest) dial(ctx context.Context, path string) (net.Conn, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("unix", path)
		if err == nil {
			return c, nil
		}
		select {
		case err := <-g.exited:
			g.exited <- err
			return nil, fmt.Errorf("QEMU exited before its socket %s took a connection: %v", path, err)
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("QEMU's socket %s: %w", path, err)
		}
	}
}

// seed writes the cidata ISO as virt-launcher's defaultIsoFunc makes it:
// the guide's userData as the suite renders it, the password appended.
func seed(dir, name, extra string) (string, error) {
	ud := fixtures.CloudInit(vlanAddr)
	if extra != "" {
		ud = strings.Replace(ud, "\n  - netplan apply\n", "\n  - netplan apply\n  - "+extra+"\n", 1)
		if !strings.Contains(ud, extra) {
			return "", errors.New("the guide's userData has no `- netplan apply` line to follow")
		}
	}
	d := filepath.Join(dir, name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(d, "user-data"), []byte(cloudinit.WithConsolePassword(ud, password)), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(d, "meta-data"), []byte(`{"instance-id":"smoke.default","local-hostname":"vm-instance-smoke"}`), 0o644); err != nil {
		return "", err
	}
	iso := d + ".iso"
	if out, err := exec.Command("xorrisofs", "-output", iso, "-volid", "cidata", "-joliet", "-rock", "-partition_cyl_align", "on", d).CombinedOutput(); err != nil {
		return "", fmt.Errorf("xorrisofs: %v: %s", err, out)
	}
	return iso, nil
}

// powerdown presses the ACPI power button, the graceful stop KubeVirt does,
// and waits for QEMU to end.
func (g *guest) powerdown(within time.Duration) (time.Duration, error) {
	start := time.Now()
	if _, err := fmt.Fprintln(g.monitor, "system_powerdown"); err != nil {
		return 0, err
	}
	select {
	case err := <-g.exited:
		g.exited <- err
		return time.Since(start), nil
	case <-time.After(within):
		return 0, fmt.Errorf("no power-off within %s of the ACPI power button", within)
	}
}

// failed adds the console's last lines to err.
func (g *guest) failed(err error) error {
	b, _ := os.ReadFile(g.serialLog)
	lines := strings.Split(strings.ReplaceAll(string(b), "\r", ""), "\n")
	return fmt.Errorf("%w\n--- console (last 40 lines) ---\n%s", err, strings.Join(lines[max(len(lines)-40, 0):], "\n"))
}

// kill ends QEMU if it still runs.
func (g *guest) kill() {
	if g.con != nil {
		g.con.Close()
	}
	if g.monitor != nil {
		g.monitor.Close()
	}
	select {
	case err := <-g.exited:
		g.exited <- err
	default:
		g.qemu.Process.Kill()
		g.exited <- <-g.exited
	}
}
