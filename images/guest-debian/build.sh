#!/usr/bin/env bash
# Builds the real guest of the cluster tier's KubeVirt VMs, offline: Debian
# bookworm with its own cloud-init, netplan.io and systemd-networkd (issue 16).
#
#   images/guest-debian/build.sh
#
# -> $OFFLINE_CACHE/images/guest-debian.tar, ${LOCAL_REGISTRY}/guest-debian:${GUEST_DEBIAN_VERSION}:
#    /boot/vmlinux     the kernel as an ELF (PVH; images/guest-debian/kernel.sh)
#    /boot/vmlinuz     the same kernel as packaged, for EFI firmware
#    /boot/initrd.img  the whole Debian root, systemd as /init (no disk)
# for spec.domain.firmware.kernelBoot.container, the layout KubeVirt v1.8.4
# was seen booting here (see images/guest-debian/README.md for why not a
# containerDisk). Cached: a stamp of every input's hash.
set -euo pipefail

t0=$(date +%s)
cd "$(dirname "$0")/../.."
# shellcheck source=images/env.sh
source images/env.sh

cache=$OFFLINE_CACHE
work=$cache/work/guest-debian
ref=${LOCAL_REGISTRY}/guest-debian:${GUEST_DEBIAN_VERSION}
out=$cache/images/guest-debian.tar
stamp=$cache/images/guest-debian.stamp
imgtool=$cache/bin/imgtool
mkdir -p "$work" "$cache/images"
log() { echo "==> $*" >&2; }

# The suite's --guest-user default, as on the guide's Ubuntu image.
guest_user=ubuntu
# Modules for what KubeVirt attaches (virtio NICs and disks, sata/scsi
# cdroms, the cidata filesystems), the ACPI power button (graceful stop);
# udev loads them by modalias at boot.
modules=(virtio_pci virtio_net virtio_blk virtio_scsi virtio_balloon virtio_console virtio_rng
	sd_mod sr_mod ahci isofs vfat nls_utf8 nls_cp437 nls_ascii nls_iso8859_1
	button evdev 8021q)
# Units a VM that lives minutes in a test never needs: timers, getty on a
# VGA console KubeVirt does not show, first-boot prompts on the serial line,
# and early units whose work a RAM root already has (users made by the
# packages, no machine-id to commit, a volatile journal). With one vCPU,
# each of them takes time from cloud-init, which login waits for.
mask=(dev-hugepages.mount dev-mqueue.mount kmod-static-nodes.service modprobe@drm.service
	systemd-ask-password-console.path systemd-ask-password-wall.path systemd-journal-flush.service
	systemd-machine-id-commit.service systemd-random-seed.service systemd-sysusers.service
	systemd-update-utmp.service systemd-update-utmp-runlevel.service
	apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer e2scrub_reap.service
	fstrim.timer systemd-firstboot.service systemd-pstore.service systemd-repart.service
	systemd-pcrphase.service systemd-pcrphase-sysinit.service systemd-binfmt.service
	proc-sys-fs-binfmt_misc.automount sys-kernel-debug.mount sys-kernel-tracing.mount
	sys-fs-fuse-connections.mount sys-kernel-config.mount cloud-init-hotplugd.socket
	getty@tty1.service systemd-networkd-wait-online.service remote-fs.target)

kx=$(images/guest-debian/kernel.sh | tail -1)
rel=${GUEST_KERNEL_PACKAGE#linux-image-}
mapfile -t packages < <(grep -v '^#' images/guest-debian/packages)
rootfs=$(nice -n 10 images/rootfs/rootfs.sh guest-debian "$DEBIAN_SUITE" "${packages[@]}" | tail -1)
[ -s "$rootfs" ] || { echo "guest-debian: rootfs.sh gave no tarball" >&2; exit 1; }

want=$(printf '%s\n' "version=$GUEST_DEBIAN_VERSION" "kernel=$(cat "$kx.sum")" "user=$guest_user" \
	"modules=${modules[*]}" "mask=${mask[*]}" "rootfs=$(stat -c '%s %Y' "$rootfs")" \
	"imgtool=$(sha256sum <"$imgtool" 2>/dev/null | cut -d' ' -f1)" \
	"script=$(cat images/guest-debian/build.sh images/guest-debian/cloud.cfg | sha256sum | cut -d' ' -f1)")
if [ -s "$out" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
	echo "cached: guest image $ref ($out)" >&2
	exit 0
fi
log "building $ref"

# 1. Stage the root, pruned of what a RAM-only guest never uses: package
# management (apt, debconf, the perl its maintainer scripts need), docs,
# locales and iconv's charset modules, ~25 MB the kernel would unpack at
# every boot for nothing (dpkg stays, with its status, to show what the
# image holds). Python's compiled bytecode stays: it is what makes
# cloud-init start faster.
root=$work/root
rm -rf "$root" && mkdir -p "$root"
tar -xpf "$rootfs" -C "$root" --numeric-owner
(cd "$root" && rm -rf var/cache/apt/* var/lib/apt/lists/* usr/share/doc/* usr/share/man/* usr/share/info/* \
	usr/share/locale/* usr/share/zoneinfo/right usr/share/zoneinfo/posix \
	usr/bin/apt* usr/lib/apt usr/lib/x86_64-linux-gnu/libapt-* etc/apt etc/cron.daily/apt-compat \
	usr/bin/debconf* usr/share/debconf var/cache/debconf usr/bin/perl* usr/lib/x86_64-linux-gnu/perl-base \
	usr/share/perl5 usr/lib/x86_64-linux-gnu/gconv var/lib/dpkg/info/*.md5sums)
mkdir -p "$root"/{dev,proc,sys,run,tmp,etc/netplan} && chmod 1777 "$root/tmp"
# The kernel opens /dev/console for init before devtmpfs is mounted.
[ -e "$root/dev/console" ] || mknod -m 600 "$root/dev/console" c 5 1

# 2. Modules: the closure of the wanted ones, resolved by the root's own kmod.
kt=$root/tmp/ktree
mkdir -p "$kt/lib/modules"
cp -al "$kx/lib/modules/$rel" "$kt/lib/modules/"
chroot "$root" /sbin/depmod -b /tmp/ktree "$rel"
mapfile -t kos < <(chroot "$root" /sbin/modprobe -d /tmp/ktree -S "$rel" --show-depends -a "${modules[@]}" 2>/dev/null |
	awk '$1 == "insmod" {print $2}' | sort -u)
[ "${#kos[@]}" -gt 0 ] || { echo "guest-debian: no modules resolved" >&2; exit 1; }
md=$root/lib/modules/$rel
for ko in "${kos[@]}"; do
	r=${ko#/tmp/ktree/lib/modules/"$rel"/}
	mkdir -p "$md/$(dirname "$r")"
	cp "$kt/lib/modules/$rel/$r" "$md/$r"
done
cp "$kt/lib/modules/$rel"/modules.{builtin,builtin.modinfo,order} "$md/"
rm -rf "$kt"
chroot "$root" /sbin/depmod "$rel"

# 3. systemd as init straight from the initramfs (no /etc/initrd-release:
# systemd boots it as the real root, no switch_root).
ln -sf lib/systemd/systemd "$root/init"
systemctl --root="$root" mask "${mask[@]}" >/dev/null 2>&1 ||
	for u in "${mask[@]}"; do ln -sf /dev/null "$root/etc/systemd/system/$u"; done
# netplan renders for networkd; networkd must run for `netplan apply`.
ln -sf /lib/systemd/system/systemd-networkd.service "$root/etc/systemd/system/multi-user.target.wants/systemd-networkd.service"
mkdir -p "$root/etc/systemd/system/sockets.target.wants"
ln -sf /lib/systemd/system/systemd-networkd.socket "$root/etc/systemd/system/sockets.target.wants/systemd-networkd.socket"
# The serial login only once cloud-init's config stage has set the
# password: Debian starts the getty after cloud-init's network stage (the
# user exists) but before set-passwords, so the first logins are refused.
mkdir -p "$root/etc/systemd/system/serial-getty@ttyS0.service.d"
printf '[Unit]\nAfter=cloud-config.service\n' >"$root/etc/systemd/system/serial-getty@ttyS0.service.d/vcf-after-cloud-config.conf"
mkdir -p "$root/etc/systemd/journald.conf.d"
printf '[Journal]\nStorage=volatile\n' >"$root/etc/systemd/journald.conf.d/vcf.conf"
sed "s/@USER@/$guest_user/" images/guest-debian/cloud.cfg >"$root/etc/cloud/cloud.cfg.d/90-vcf.cfg"
echo localhost >"$root/etc/hostname"
: >"$root/etc/fstab"
: >"$root/etc/machine-id"
# What the image holds, for the report's guest row.
# shellcheck disable=SC2016 # ${Package} is dpkg-query's format, not the shell's
chroot "$root" dpkg-query -W -f '${Package} ${Version}\n' cloud-init netplan.io systemd iproute2 iputils-ping iputils-arping >"$work/versions.txt"
cat "$work/versions.txt" >&2

# 4. The initramfs: newc cpio, uncompressed: QEMU hands it over by DMA and
# the kernel only copies it, where a decompressor runs for seconds under TCG.
initrd=$work/initrd.img
(cd "$root" && find . -mindepth 1 -print0 | LC_ALL=C sort -z |
	cpio --null --create --format=newc --reproducible --quiet) >"$initrd.new"
mv -f "$initrd.new" "$initrd"
ln -f "$kx/boot/vmlinuz-$rel" "$work/vmlinuz"
ln -f "$kx/vmlinux" "$work/vmlinux"
log "kernel $(du -h "$work/vmlinux" | cut -f1), initramfs $(du -h "$initrd" | cut -f1)"

# 5. The image: the boot files, no base layer (KubeVirt only reads them).
[ -x "$imgtool" ] || { echo "guest-debian: no $imgtool (run images/imgtool/build.sh)" >&2; exit 1; }
"$imgtool" build -o "$out.new" --tag "$ref" \
	--add "$work/vmlinux:/boot/vmlinux:0644" --add "$work/vmlinuz:/boot/vmlinuz:0644" --add "$initrd:/boot/initrd.img:0644" \
	--label "org.opencontainers.image.description=vlan-conformance real guest: Debian cloud-init + netplan, kernelBoot" \
	--label "io.vcf.guest.user=$guest_user" \
	--label "io.vcf.guest.versions=$(tr '\n' ';' <"$work/versions.txt")"
mv -f "$out.new" "$out"
want=$(printf '%s\n' "$want" | sed "s/^imgtool=.*/imgtool=$(sha256sum <"$imgtool" | cut -d' ' -f1)/")
printf '%s' "$want" >"$stamp"
log "guest-debian: $ref -> $out ($(du -h "$out" | cut -f1)) in $(($(date +%s) - t0)) s"
