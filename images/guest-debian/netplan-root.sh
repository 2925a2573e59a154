#!/usr/bin/env bash
# The root the netplan cross-check (framework/cloudinit, `make netplan-check`)
# runs Debian's real netplan and cloud-init in: the real guest's rootfs
# (images/guest-debian/packages, built and cached by images/rootfs/rootfs.sh),
# unpacked once per tarball. Prints the directory as the last line of stdout.
#
#   images/guest-debian/netplan-root.sh
#
# Needs root (the tarball's owners, and the check chroots into it).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=images/env.sh
source images/env.sh

mapfile -t packages < <(grep -v '^#' images/guest-debian/packages)
tar=$(nice -n 10 images/rootfs/rootfs.sh guest-debian "$DEBIAN_SUITE" "${packages[@]}" | tail -1)
[ -s "$tar" ] || { echo "netplan-root: rootfs.sh gave no tarball" >&2; exit 1; }
dir=$OFFLINE_CACHE/work/guest-debian/netplan-root
# The tarball's size and mtime name it (rootfs.sh replaces it atomically).
want=$(stat -c '%s %Y' "$tar")
if [ "$(cat "$dir.stamp" 2>/dev/null)" != "$want" ] || [ ! -x "$dir/usr/sbin/netplan" ]; then
	echo "==> unpacking $(basename "$tar") for the netplan cross-check" >&2
	rm -rf "$dir" && mkdir -p "$dir"
	tar -xpf "$tar" -C "$dir" --numeric-owner
	printf '%s' "$want" >"$dir.stamp"
fi
echo "$dir"
