#!/bin/sh
# Fetch the lab VM's kernel and build its initramfs into CACHEDIR, once
# (the same as labvm.EnsureKernel; later runs do no network I/O).
# Needs the apt packages qemu-system-x86 busybox-static xz-utils.
set -eu
[ $# -eq 1 ] || { echo "usage: $0 CACHEDIR" >&2; exit 2; }
cache=$(realpath -m "$1")
cd "$(dirname "$0")/.."
exec go run ./cmd/labvm-smoke -prepare -cache "$cache"
