#!/usr/bin/env bash
# Builds the guest image of the cluster tier's KubeVirt VMs, offline:
#
#   images/guest/build.sh
#
# -> $OFFLINE_CACHE/images/guest.tar, ${LOCAL_REGISTRY}/guest:${GUEST_VERSION}:
#    /boot/vmlinux     Debian's kernel (${GUEST_KERNEL_PACKAGE}) as the ELF
#                      inside its bzImage: QEMU boots it directly (PVH), which
#                      spares the XZ decompression that costs ~20 s under TCG
#    /boot/vmlinuz     the same kernel as packaged (bzImage), for firmware
#                      that cannot boot an ELF (EFI)
#    /boot/initrd.img  the whole guest: a Debian bookworm minbase userland
#                      (bash, sudo, iproute2, ping, arping, python3-minimal),
#                      the virtio/iso9660/vfat modules, and cmd/vcf-guest as
#                      /init, cloud-init and netplan
# for spec.domain.firmware.kernelBoot.container (no disk, no bootloader; see
# images/guest/README.md). Inputs: images/rootfs/rootfs.sh, the kernel .deb
# from apt, the suite's module (cmd/vcf-guest, framework/cloudinit), and
# $OFFLINE_CACHE/bin/imgtool. Cached: a stamp of every input's hash.
set -euo pipefail

t0=$(date +%s)
cd "$(dirname "$0")/../.."
# shellcheck source=images/env.sh
source images/env.sh
# shellcheck source=images/guest/root.sh
source images/guest/root.sh
export PATH=/usr/local/go/bin:$PATH

cache=$OFFLINE_CACHE
work=$cache/work/guest
ref=${LOCAL_REGISTRY}/guest:${GUEST_VERSION}
out=$cache/images/guest.tar
stamp=$cache/images/guest.stamp
bindir=$cache/bin/guest/$GUEST_VERSION
imgtool=$cache/bin/imgtool
mkdir -p "$cache/images" "$bindir"

# The guest's default user (cloud-init's default_user): the suite's
# --guest-user default, as on the guide's Ubuntu image.
guest_user=ubuntu
packages=(sudo iproute2 iputils-ping iputils-arping kmod procps python3-minimal)
# Modules for what KubeVirt attaches: virtio NICs and disks (the cidata disk
# is virtio unless its bus says otherwise; sata and scsi cdroms too), the
# seed's filesystems, the ACPI power button (graceful stop) and a few
# helpers. Their dependencies come along.
modules=(virtio_pci virtio_net virtio_blk virtio_scsi virtio_balloon virtio_console virtio_rng
	sd_mod sr_mod ahci isofs vfat nls_utf8 nls_cp437 nls_ascii nls_iso8859_1
	button evdev 8021q)

log() { echo "==> $*" >&2; }

# 1. Kernel: the .deb once, unpacked once (shared with images/guest-debian).
kx=$(images/guest/kernel.sh | tail -1)
kernel_sum=$(cat "$kx.sum")
rel=${GUEST_KERNEL_PACKAGE#linux-image-}

# 2. Userland: a minbase rootfs (cached by images/rootfs).
log "rootfs (images/rootfs/rootfs.sh guest bookworm ${packages[*]})"
rootfs=$(images/rootfs/rootfs.sh guest "$DEBIAN_SUITE" "${packages[@]}" | tail -1)
[ -s "$rootfs" ] || { echo "guest: rootfs.sh gave no tarball" >&2; exit 1; }

# 3. The guest binary, static.
log "building cmd/vcf-guest"
CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags=-s -o "$bindir/vcf-guest.new" ./cmd/vcf-guest
mv -f "$bindir/vcf-guest.new" "$bindir/vcf-guest"

# Everything the image is made of; equal sums mean nothing to do.
want=$(printf '%s\n' "version=$GUEST_VERSION" "kernel=$kernel_sum" "user=$guest_user" \
	"modules=${modules[*]}" "rootfs=$(sha256sum <"$rootfs" | cut -d' ' -f1)" \
	"guest=$(sha256sum <"$bindir/vcf-guest" | cut -d' ' -f1)" \
	"imgtool=$(sha256sum <"$imgtool" 2>/dev/null | cut -d' ' -f1)" \
	"script=$(cat images/guest/build.sh images/guest/root.sh images/guest/kernel.sh images/guest/cloud.cfg | sha256sum | cut -d' ' -f1)")
if [ -s "$out" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
	echo "cached: guest image $ref ($out)" >&2
	echo "==> guest: done in $(($(date +%s) - t0)) s" >&2
	exit 0
fi
log "building guest image $ref (cold, ~1 min)"

# 4. Stage the root, pruned of what a RAM-only guest never uses (root.sh).
root=$work/root
stage_root "$rootfs" "$root"
mkdir -p "$root"/{etc/cloud,var/lib/cloud}

# 5. Modules: the closure of the wanted ones, resolved by the rootfs's own
# kmod against the kernel package's tree (hard-linked in, not copied).
log "modules: ${modules[*]}"
kt=$root/tmp/ktree
mkdir -p "$kt/lib/modules"
cp -al "$kx/lib/modules/$rel" "$kt/lib/modules/"
chroot "$root" /sbin/depmod -b /tmp/ktree "$rel"
mapfile -t kos < <(chroot "$root" /sbin/modprobe -d /tmp/ktree -S "$rel" --show-depends -a "${modules[@]}" |
	awk '$1 == "insmod" {print $2}' | sort -u)
[ "${#kos[@]}" -gt 0 ] || { echo "guest: no modules resolved" >&2; exit 1; }
md=$root/lib/modules/$rel
mkdir -p "$md"
for ko in "${kos[@]}"; do
	r=${ko#/tmp/ktree/lib/modules/"$rel"/}
	mkdir -p "$md/$(dirname "$r")"
	cp "$kt/lib/modules/$rel/$r" "$md/$r"
done
cp "$kt/lib/modules/$rel"/modules.{builtin,builtin.modinfo,order} "$md/"
rm -rf "$kt"
chroot "$root" /sbin/depmod "$rel"

# 6. The system: vcf-guest as init, cloud-init and netplan; cloud-init's
# defaults (the default user).
install -m 0755 "$bindir/vcf-guest" "$root/usr/sbin/vcf-guest"
ln -sf usr/sbin/vcf-guest "$root/init"
ln -sf vcf-guest "$root/usr/sbin/netplan"
ln -sf ../sbin/vcf-guest "$root/usr/bin/cloud-init"
for n in poweroff halt reboot; do ln -sf vcf-guest "$root/usr/sbin/$n"; done
sed "s/@USER@/$guest_user/" images/guest/cloud.cfg >"$root/etc/cloud/cloud.cfg"
echo localhost >"$root/etc/hostname"
: >"$root/etc/fstab"

# 7. The initramfs: newc cpio, gzip (the kernel unpacks it in ~1 s under TCG).
log "initramfs"
initrd=$work/initrd.img
(cd "$root" && find . -mindepth 1 -print0 | LC_ALL=C sort -z |
	cpio --null --create --format=newc --reproducible --quiet) | gzip -6 -n >"$initrd.new"
mv -f "$initrd.new" "$initrd"
ln -f "$kx/boot/vmlinuz-$rel" "$work/vmlinuz"
ln -f "$kx/vmlinux" "$work/vmlinux"
log "kernel $(du -h "$work/vmlinux" | cut -f1) (bzImage $(du -h "$work/vmlinuz" | cut -f1)), initramfs $(du -h "$initrd" | cut -f1) (unpacked $(du -sh "$root" | cut -f1))"

# 8. The image: two files, no base layer (the kernel-boot container only
# serves them; KubeVirt runs its own binary in it).
for _ in $(seq 1 40); do
	[ -x "$imgtool" ] && break
	log "waiting for $imgtool (images/imgtool/build.sh)"
	sleep 60
done
"$imgtool" build -o "$out.new" --tag "$ref" \
	--add "$work/vmlinux:/boot/vmlinux:0644" --add "$work/vmlinuz:/boot/vmlinuz:0644" --add "$initrd:/boot/initrd.img:0644" \
	--label "org.opencontainers.image.description=vlan-conformance guest: kernelBoot kernel + initramfs" \
	--label "io.vcf.guest.user=$guest_user"
mv -f "$out.new" "$out"
# The stamp names imgtool's hash as it is now (it may have just appeared).
want=$(printf '%s\n' "$want" | sed "s/^imgtool=.*/imgtool=$(sha256sum <"$imgtool" | cut -d' ' -f1)/")
printf '%s' "$want" >"$stamp"
log "guest: $ref -> $out ($(du -h "$out" | cut -f1)) in $(($(date +%s) - t0)) s"
