#!/bin/sh
# mmdebstrap customize hook shared by the KubeVirt image roots ($1 is the
# root). Mirrors what KubeVirt's own images carry (cmd/*/BUILD.bazel):
# - user/group qemu 107 (virt-launcher and virt-handler: libvirt runs QEMU
#   as qemu, non-root VMs run as 107) and nonroot-user 1001 (the user of
#   virt-operator, virt-api, virt-controller, the export and sync images);
# - /var/run -> ../run, relative: virt-handler reaches the launcher's sockets
#   through /proc/<pid>/root/var/run, which an absolute link would resolve
#   against virt-handler's own root;
# - OVMF_CODE.fd/OVMF_VARS.fd (and the secure-boot names) as links to the
#   *_4M builds Debian ships, under the names virt-launcher looks for.
set -eu
root=$1
grep -q '^qemu:' "$root/etc/group" || chroot "$root" groupadd -g 107 qemu
grep -q '^qemu:' "$root/etc/passwd" || chroot "$root" useradd -u 107 -g 107 -d /home/qemu -m -s /bin/bash qemu
grep -q '^nonroot-user:' "$root/etc/group" || chroot "$root" groupadd -g 1001 nonroot-user
grep -q '^nonroot-user:' "$root/etc/passwd" || chroot "$root" useradd -u 1001 -g 1001 -d /home/nonroot-user -m -s /bin/bash nonroot-user
rm -rf "$root/var/run"
ln -s ../run "$root/var/run"
ovmf=$root/usr/share/OVMF
if [ -d "$ovmf" ]; then
	ln -sf OVMF_CODE_4M.fd "$ovmf/OVMF_CODE.fd"
	ln -sf OVMF_VARS_4M.fd "$ovmf/OVMF_VARS.fd"
	ln -sf OVMF_CODE_4M.secboot.fd "$ovmf/OVMF_CODE.secboot.fd"
	# Secure boot needs the Microsoft keys enrolled, as upstream's secboot vars.
	ln -sf OVMF_VARS_4M.ms.fd "$ovmf/OVMF_VARS.secboot.fd"
fi
