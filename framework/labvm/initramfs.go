package labvm

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Marker lines the guest's init prints on the serial console.
const (
	markerStart = "labvm-init: command start"
	markerProbe = "labvm-init: probe ok"
)

// initScript is PID 1 of the guest. It stays in the initramfs (so its own
// busybox tools remain usable after the command exits) and runs the command in
// a chroot of the host's root shared read-only over 9p. The labctl share
// carries the command script in, and its output and exit code out.
const initScript = `#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
say() { echo "labvm-init: $*" >/dev/console; }
halt() { echo o >/proc/sysrq-trigger; sleep 60; }
die() { say "FATAL: $*"; halt; }
grep -q labvm.probe /proc/cmdline && { say probe ok; halt; }
for m in @MODULES@; do
	a=; [ $m = dummy ] && a=numdummies=0 # no stray dummy0
	insmod /lib/modules/$m.ko $a || say "insmod $m failed"
done
o=trans=virtio,version=9p2000.L,msize=262144
mount -t 9p -o $o labctl /ctl || die "cannot mount labctl"
. /ctl/config
r=/newroot
mount -t 9p -o $o,ro,cache=loose hostroot $r || die "cannot mount hostroot"
mount -t tmpfs -o mode=1777 tmpfs $r/tmp
mount -t tmpfs -o mode=755 tmpfs $r/run
# /var: host content, writable through a tmpfs overlay.
mount -t tmpfs tmpfs /varrw && mkdir /varrw/u /varrw/w
mount -t overlay -o lowerdir=$r/var,upperdir=/varrw/u,workdir=/varrw/w overlay $r/var ||
	mount -t tmpfs tmpfs $r/var
mount -t proc proc $r/proc
mount -t sysfs sysfs $r/sys
mount -t devtmpfs devtmpfs $r/dev
mkdir -p $r/dev/pts $r/dev/shm
# What udev links on a real system: nft reads its rules from /dev/stdin.
ln -sf /proc/self/fd $r/dev/fd
for f in stdin:0 stdout:1 stderr:2; do ln -sf /proc/self/fd/${f#*:} $r/dev/${f%:*}; done
mount -t devpts -o newinstance,ptmxmode=0666 devpts $r/dev/pts
mount -t tmpfs tmpfs $r/dev/shm
# WorkDir may lie under a tmpfs just mounted (e.g. /tmp): create the mount point.
mkdir -p "$r$WORKDIR" 2>/dev/null
mount -t 9p -o $o,cache=mmap labwork "$r$WORKDIR" || die "cannot mount labwork at $WORKDIR"
# Directories outside WorkDir the command writes to (a report dir in /tmp).
i=0
while [ $i -lt "${NSHARES:-0}" ]; do
	eval d=\"\$SHARE$i\"
	mkdir -p "$r$d" 2>/dev/null
	mount -t 9p -o $o,cache=mmap labshare$i "$r$d" || die "cannot mount labshare$i at $d"
	i=$((i+1))
done
ip link set lo up
hostname labvm
cp /ctl/run.sh $r/run/labvm-run.sh
say command start
env -i /bin/chroot $r /bin/sh /run/labvm-run.sh </dev/null >/ctl/stdout 2>/ctl/stderr
echo $? >/ctl/rc
sync
halt
`

// ensureInitramfs builds dir/initramfs-<hash>.cpio (busybox, init, modules)
// unless a build of the same inputs exists.
func ensureInitramfs(dir string, modules []string) (string, error) {
	busybox, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return "", fmt.Errorf("labvm: /bin/busybox: %v: apt-get install busybox-static", err)
	}
	if e, err := elf.NewFile(bytes.NewReader(busybox)); err != nil || hasInterp(e) {
		return "", fmt.Errorf("labvm: /bin/busybox is not a static binary: apt-get install busybox-static")
	}
	init := strings.Replace(initScript, "@MODULES@", strings.Join(modules, " "), 1)
	h := sha256.New()
	h.Write([]byte(init))
	h.Write(busybox)
	path := filepath.Join(dir, "initramfs-"+hex.EncodeToString(h.Sum(nil))[:12]+".cpio")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}

	var w cpioWriter
	for _, d := range []string{"bin", "dev", "proc", "sys", "ctl", "newroot", "varrw", "lib", "lib/modules"} {
		w.add(d, 0o040755, 0, nil)
	}
	w.add("dev/console", 0o020600, 5<<8|1, nil) // the kernel opens it for init's stdio
	w.add("init", 0o100755, 0, []byte(init))
	w.add("bin/busybox", 0o100755, 0, busybox)
	for _, m := range modules {
		ko, err := os.ReadFile(filepath.Join(dir, "modules", m+".ko"))
		if err != nil {
			return "", err
		}
		w.add("lib/modules/"+m+".ko", 0o100644, 0, ko)
	}
	w.add("TRAILER!!!", 0, 0, nil)

	old, _ := filepath.Glob(filepath.Join(dir, "initramfs-*.cpio"))
	if err := writeAtomic(path, w.buf.Bytes(), 0o644); err != nil {
		return "", err
	}
	// Drop stale builds, sparing recent ones a concurrent run may be using.
	for _, o := range old {
		if fi, err := os.Stat(o); err == nil && time.Since(fi.ModTime()) > time.Hour {
			os.Remove(o)
		}
	}
	return path, nil
}

func hasInterp(e *elf.File) bool {
	for _, p := range e.Progs {
		if p.Type == elf.PT_INTERP {
			return true
		}
	}
	return false
}

// cpioWriter writes the "newc" format the kernel unpacks as initramfs.
type cpioWriter struct {
	buf bytes.Buffer
	ino int
}

func (w *cpioWriter) add(name string, mode uint32, rdev int, data []byte) {
	w.ino++
	nlink := 1
	if mode&0o170000 == 0o040000 {
		nlink = 2
	}
	fmt.Fprintf(&w.buf, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		w.ino, mode, 0, 0, nlink, 0, len(data), 0, 0, rdev>>8, rdev&0xff, len(name)+1, 0)
	w.buf.WriteString(name + "\x00")
	w.pad()
	w.buf.Write(data)
	w.pad()
}

func (w *cpioWriter) pad() {
	for w.buf.Len()%4 != 0 {
		w.buf.WriteByte(0)
	}
}
