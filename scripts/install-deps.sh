#!/bin/sh
# Installs what the suite needs on a fresh Debian 12 machine (idempotent):
# iproute2 for failure dumps, QEMU + static busybox + xz for the lab VM
# (the Debian kernel itself is fetched with apt on first use, into .cache/),
# util-linux (setpriv, unshare) and e2fsprogs (chattr) for the stager suite,
# and the shellcheck package for `make lint`.
set -eu
pkgs="iproute2 qemu-system-x86 busybox-static xz-utils cpio util-linux e2fsprogs dash shellcheck nftables"
missing=""
for p in $pkgs; do
	st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	[ "$st" = "install ok installed" ] || missing="$missing $p"
done
if [ -z "$missing" ]; then
	echo "deps: all present ($pkgs)"
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "deps: missing$missing; run as root: apt-get install$missing" >&2
	exit 1
fi
echo "deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086 # a list of package names, split on purpose
apt-get install -y -qq --no-install-recommends $missing
