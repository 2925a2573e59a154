#!/usr/bin/env bash
# Boot check of the real guest (images/guest-debian) without KubeVirt:
# cmd/guest-smoke boots it under QEMU TCG with the devices KubeVirt gives a
# vm-instance VM and the guide's userData on a NoCloud seed, and checks it
# through the suite's own console driver (what it checks: its doc comment).
#
#   images/guest-debian/smoke.sh [guest-smoke flags]   (-control, -debug, -cpu, -append, -boot-timeout)
#
# The kernel and initramfs are build.sh's; the boot-to-root-shell time goes
# to $OFFLINE_CACHE/work/guest-debian/boot-to-login (for `make bench`).
# Needs: qemu-system-x86_64, xorriso, unshare.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=images/env.sh
source images/env.sh
work=$OFFLINE_CACHE/work/guest-debian
exec go run ./cmd/guest-smoke -kernel "$work/vmlinux" -initrd "$work/initrd.img" -record "$work/boot-to-login" "$@"
