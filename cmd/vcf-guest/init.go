package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The guest's PID 1. No systemd: what the suite needs of one is a few
// mounts, modules for the devices present (udev's coldplug), NIC names,
// cloud-init before logins are allowed, a getty on the serial console,
// zombie reaping and a clean power-off on ACPI shutdown (KubeVirt stops a
// VM with the power button before killing it).

const guestPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func say(format string, args ...any) {
	fmt.Fprintf(os.Stdout, "vcf-guest: "+format+"\n", args...)
}

func initMain() error {
	if os.Getpid() != 1 {
		return errors.New("init must run as PID 1")
	}
	start := time.Now()
	os.Setenv("PATH", guestPath)
	if err := mountAll(); err != nil {
		say("mounts: %v", err)
	}
	coldplug()
	if err := nameNICs(); err != nil {
		say("NIC names: %v", err)
	}
	if lo, err := netlink.LinkByName("lo"); err == nil {
		netlink.LinkSetUp(lo)
	}
	unix.Sethostname([]byte("localhost"))
	if cmdlineHas("vcf.debug") {
		debugDump()
	}

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGPWR, unix.SIGUSR1, unix.SIGUSR2)
	power := make(chan struct{}, 1)
	go watchPowerButton(power)
	exits := make(chan int, 16)
	go reap(exits)

	// cloud-init runs as a child: it closes fd 3 when logins may start
	// (users and passwords set), then goes on with runcmd.
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	ci, err := spawn([]string{"/usr/bin/cloud-init", "boot"}, []*os.File{w}, false)
	w.Close()
	if err != nil {
		say("cloud-init: %v", err)
		r.Close()
	}
	loginsOK := make(chan struct{})
	go func() {
		if r != nil {
			io.Copy(io.Discard, r)
			r.Close()
		}
		close(loginsOK)
	}()

	tty := consoleTTY()
	gettyPid := 0
	var lastGetty time.Time
	startGetty := func() {
		if d := time.Since(lastGetty); d < time.Second {
			time.Sleep(time.Second - d) // a getty that dies at once must not spin
		}
		lastGetty = time.Now()
		pid, err := spawn([]string{"/sbin/agetty", "-o", "-p -- \\u", "--keep-baud", "115200,57600,38400,9600", tty, "vt220"}, nil, true)
		if err != nil {
			say("getty on %s: %v", tty, err)
			return
		}
		gettyPid = pid
	}
	for {
		select {
		case <-loginsOK:
			loginsOK = nil
			// From here on the console belongs to the login session: only
			// emergencies from the kernel may interrupt it.
			os.WriteFile("/proc/sys/kernel/printk", []byte("1 4 1 7"), 0)
			say("up in %.1fs since init started; login on %s", time.Since(start).Seconds(), tty)
			startGetty()
		case pid := <-exits:
			switch {
			case pid == gettyPid && pid != 0:
				startGetty()
			case pid == ci && pid != 0:
				ci = 0
			}
		case <-power:
			shutdown(unix.LINUX_REBOOT_CMD_POWER_OFF)
		case s := <-sigs:
			if s == unix.SIGINT { // ctrl-alt-del
				shutdown(unix.LINUX_REBOOT_CMD_RESTART)
			}
			shutdown(unix.LINUX_REBOOT_CMD_POWER_OFF)
		}
	}
}

// spawn starts a child of PID 1; reap collects it.
func spawn(argv []string, extra []*os.File, session bool) (int, error) {
	files := []*os.File{os.Stdin, os.Stdout, os.Stderr}
	files = append(files, extra...)
	p, err := os.StartProcess(argv[0], argv, &os.ProcAttr{
		Env:   []string{"PATH=" + guestPath, "TERM=vt220", "HOME=/root", "LANG=C.UTF-8"},
		Files: files,
		Sys:   &syscall.SysProcAttr{Setsid: session},
	})
	if err != nil {
		return 0, err
	}
	pid := p.Pid
	p.Release() // reap does the waiting
	return pid, nil
}

// reap waits for every child, ours and the orphans the kernel hands to PID 1.
func reap(exits chan<- int) {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.ECHILD {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if err == nil {
			exits <- pid
		}
	}
}

func mountAll() error {
	const nosuid, nodev, noexec = unix.MS_NOSUID, unix.MS_NODEV, unix.MS_NOEXEC
	var errs []error
	for _, x := range []struct {
		src, dst, fstype string
		flags            uintptr
		data             string
	}{
		{"proc", "/proc", "proc", nosuid | nodev | noexec, ""},
		{"sysfs", "/sys", "sysfs", nosuid | nodev | noexec, ""},
		{"devtmpfs", "/dev", "devtmpfs", nosuid, "mode=0755"},
		{"devpts", "/dev/pts", "devpts", nosuid | noexec, "gid=5,mode=0620,ptmxmode=0666"},
		{"tmpfs", "/dev/shm", "tmpfs", nosuid | nodev, "mode=1777"},
		{"tmpfs", "/run", "tmpfs", nosuid | nodev, "mode=0755,size=20%"},
	} {
		os.MkdirAll(x.dst, 0o755)
		if err := unix.Mount(x.src, x.dst, x.fstype, x.flags, x.data); err != nil && !errors.Is(err, unix.EBUSY) {
			errs = append(errs, fmt.Errorf("mount %s: %w", x.dst, err))
		}
	}
	for l, t := range map[string]string{"/dev/fd": "/proc/self/fd", "/dev/stdin": "/proc/self/fd/0", "/dev/stdout": "/proc/self/fd/1", "/dev/stderr": "/proc/self/fd/2"} {
		os.Symlink(t, l)
	}
	os.Chmod("/tmp", 0o1777)
	os.MkdirAll("/run/lock", 0o1777)
	// utmp for login and who.
	if f, err := os.OpenFile("/run/utmp", os.O_CREATE|os.O_WRONLY, 0o664); err == nil {
		f.Close()
		os.Chown("/run/utmp", 0, utmpGID())
	}
	return errors.Join(errs...)
}

func utmpGID() int {
	f, err := os.Open("/etc/group")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Split(sc.Text(), ":")
		if len(fs) > 2 && fs[0] == "utmp" {
			var g int
			fmt.Sscan(fs[2], &g)
			return g
		}
	}
	return 0
}

// coldplug loads the modules for the devices present, as udev does from
// each device's modalias; a loaded bus driver (virtio_pci) brings new
// devices (virtio-net, virtio-blk), hence rounds until nothing new shows.
// Aliases are matched here (modprobe -a stops at the first alias without
// a module), then modprobe loads the modules with their dependencies.
func coldplug() {
	table := moduleAliases()
	seen, loaded := map[string]bool{}, map[string]bool{}
	for round := 0; round < 8; round++ {
		var mods []string
		for _, g := range []string{"/sys/bus/*/devices/*/modalias", "/sys/class/input/*/modalias"} {
			ms, _ := filepath.Glob(g)
			for _, m := range ms {
				b, err := os.ReadFile(m)
				a := strings.TrimSpace(string(b))
				if err != nil || a == "" || seen[a] {
					continue
				}
				seen[a] = true
				for _, t := range table {
					if ok, _ := path.Match(t[0], a); ok && !loaded[t[1]] {
						loaded[t[1]] = true
						mods = append(mods, t[1])
					}
				}
			}
		}
		if len(mods) == 0 && round > 0 {
			return
		}
		if len(mods) > 0 {
			if out, err := exec.Command("/sbin/modprobe", append([]string{"-a", "-b"}, mods...)...).CombinedOutput(); err != nil {
				say("modprobe %s: %v: %s", strings.Join(mods, " "), err, strings.TrimSpace(string(out)))
			}
		}
		// Let the drivers probe the new devices (virtio-blk scans its disk).
		settle()
	}
}

// moduleAliases reads the running kernel's modules.alias: (pattern, module).
func moduleAliases() [][2]string {
	var u unix.Utsname
	unix.Uname(&u)
	rel := unix.ByteSliceToString(u.Release[:])
	b, err := os.ReadFile(filepath.Join("/lib/modules", rel, "modules.alias"))
	if err != nil {
		say("modules: %v", err)
		return nil
	}
	var out [][2]string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "alias" {
			out = append(out, [2]string{f[1], f[2]})
		}
	}
	return out
}

// settle waits until no new netdev or block device appeared for a while.
func settle() {
	count := func() int {
		a, _ := filepath.Glob("/sys/class/net/*")
		b, _ := filepath.Glob("/sys/class/block/*")
		c, _ := filepath.Glob("/sys/bus/virtio/devices/*")
		return len(a) + len(b) + len(c)
	}
	n := count()
	for i := 0; i < 10; i++ {
		time.Sleep(20 * time.Millisecond)
		if m := count(); m != n {
			n, i = m, 0
		}
	}
}

// consoleTTY is the last console= of the kernel command line (where the
// kernel writes, hence where a getty belongs), ttyS0 when none is given.
func consoleTTY() string {
	tty := "ttyS0"
	b, _ := os.ReadFile("/proc/cmdline")
	for _, f := range strings.Fields(string(b)) {
		if v, ok := strings.CutPrefix(f, "console="); ok {
			if n, _, _ := strings.Cut(v, ","); strings.HasPrefix(n, "tty") && n != "tty0" {
				tty = n
			}
		}
	}
	return tty
}

// watchPowerButton signals on KEY_POWER from any input device (the ACPI
// power button KubeVirt presses for a graceful stop).
func watchPowerButton(power chan<- struct{}) {
	seen := map[string]bool{}
	for {
		evs, _ := filepath.Glob("/dev/input/event*")
		for _, e := range evs {
			if seen[e] {
				continue
			}
			seen[e] = true
			go func(path string) {
				f, err := os.Open(path)
				if err != nil {
					return
				}
				defer f.Close()
				// struct input_event on 64-bit: timeval (16), type, code (u16), value (s32).
				var ev [24]byte
				for {
					if _, err := io.ReadFull(f, ev[:]); err != nil {
						return
					}
					typ, code := binary.LittleEndian.Uint16(ev[16:]), binary.LittleEndian.Uint16(ev[18:])
					val := int32(binary.LittleEndian.Uint32(ev[20:]))
					if typ == 1 && code == 116 && val == 1 { // EV_KEY, KEY_POWER, press
						select {
						case power <- struct{}{}:
						default:
						}
					}
				}
			}(e)
		}
		time.Sleep(2 * time.Second)
	}
}

// shutdown ends every process, syncs, and powers off (or reboots).
func shutdown(cmd int) {
	say("shutting down")
	unix.Kill(-1, unix.SIGTERM)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := unix.Wait4(-1, nil, unix.WNOHANG, nil); err == unix.ECHILD {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	unix.Kill(-1, unix.SIGKILL)
	unix.Sync()
	unix.Reboot(cmd)
	select {}
}

func cmdlineHas(word string) bool {
	b, _ := os.ReadFile("/proc/cmdline")
	for _, f := range strings.Fields(string(b)) {
		if f == word {
			return true
		}
	}
	return false
}

// debugDump prints what coldplug and naming left (vcf.debug on the kernel
// command line).
func debugDump() {
	mods, _ := os.ReadFile("/proc/modules")
	var names []string
	for _, l := range strings.Split(strings.TrimSpace(string(mods)), "\n") {
		names = append(names, strings.Fields(l + " ")[0])
	}
	say("modules: %s", strings.Join(names, " "))
	nets, _ := filepath.Glob("/sys/class/net/*")
	blocks, _ := filepath.Glob("/sys/class/block/*")
	say("net: %v", nets)
	say("block: %v", blocks)
	for _, b := range blocks {
		fs, label := fsLabel("/dev/" + filepath.Base(b))
		say("  %s: %q %q", filepath.Base(b), fs, label)
	}
}
