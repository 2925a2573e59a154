#!/bin/sh
# mmdebstrap customize hook for the kubevirt-build root (Debian trixie):
# installs libvirt's build dependencies, for virtqemud, which Debian builds
# from its libvirt source but does not ship, and keeps a deb-src entry so
# build.sh can fetch the libvirt and libnbd sources. $1 is the root.
set -eu
root=$1
# The deb line mmdebstrap wrote, as a deb-src line.
sed -n 's/^deb /deb-src /p' "$root/etc/apt/sources.list" >"$root/etc/apt/sources.list.d/deb-src.list"
chroot "$root" apt-get update -q
chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get build-dep -y -q --no-install-recommends libvirt
