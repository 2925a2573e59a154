#!/usr/bin/env bash
# The guest's kernel (images/guest-debian/build.sh):
# Debian's ${GUEST_KERNEL_PACKAGE} (apt-get download once), unpacked once,
# with the ELF inside its bzImage extracted as vmlinux (QEMU boots it
# directly, PVH, sparing the XZ decompression that costs ~20 s under TCG).
#
#   images/guest-debian/kernel.sh   -> prints DIR (last line of stdout):
#     DIR/vmlinux, DIR/boot/vmlinuz-REL, DIR/lib/modules/REL, DIR.sum (the .deb's sha256)
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=images/env.sh
source images/env.sh
work=$OFFLINE_CACHE/work/guest # its cache since the minimal guest, kept so a warm cache stays warm
mkdir -p "$work/dl"
log() { echo "==> $*" >&2; }

# One download and unpack at a time (builds may run in parallel).
exec 9>"$work/kernel.lock"
flock 9
deb=$(find "$work/dl" -maxdepth 1 -name "${GUEST_KERNEL_PACKAGE}_*.deb" | sort | tail -1)
if [ -z "$deb" ]; then
	log "downloading $GUEST_KERNEL_PACKAGE (apt-get download, ~70 MB)"
	fetch() { (cd "$work/dl" && apt-get download "$GUEST_KERNEL_PACKAGE" 2>&1 | grep -v '^W: Download is performed unsandboxed' >&2); }
	# A new machine's package lists may predate the pinned kernel: they
	# are refreshed once before the pin is called gone (as rootfs.sh does).
	fetch || { log "not in this machine's package lists: apt-get update, once" && apt-get update >&2 && fetch; } ||
		{ echo "guest: apt-get download $GUEST_KERNEL_PACKAGE failed (the mirror may have dropped it: set GUEST_KERNEL_PACKAGE in images/versions.env to what 'apt-cache depends linux-image-amd64' names)" >&2; exit 1; }
	deb=$(find "$work/dl" -maxdepth 1 -name "${GUEST_KERNEL_PACKAGE}_*.deb" | sort | tail -1)
fi
kernel_sum=$(sha256sum "$deb" | cut -d' ' -f1)
rel=${GUEST_KERNEL_PACKAGE#linux-image-}
kx=$work/kernel-$rel
if [ "$(cat "$kx.sum" 2>/dev/null)" != "$kernel_sum" ]; then
	log "unpacking $(basename "$deb")"
	rm -rf "$kx" && mkdir -p "$kx"
	dpkg-deb -x "$deb" "$kx"
	vmlinuz=$kx/boot/vmlinuz-$rel
	off=$(LC_ALL=C grep -m1 -obUaP '\xfd7zXZ\x00' "$vmlinuz" | cut -d: -f1)
	[ -n "$off" ] || { echo "guest: no XZ payload in $vmlinuz" >&2; exit 1; }
	# xz stops after the first stream; tail's SIGPIPE then is expected.
	(set +o pipefail; tail -c +$((off + 1)) "$vmlinuz" | xz -dc --single-stream >"$kx/vmlinux")
	[ "$(head -c 4 "$kx/vmlinux" | od -An -tx1 | tr -d ' ')" = 7f454c46 ] || { echo "guest: $vmlinuz holds no ELF kernel" >&2; exit 1; }
	echo "$kernel_sum" >"$kx.sum"
fi
echo "$kx"
