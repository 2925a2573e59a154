#!/usr/bin/env bash
# Builds a minimal Debian root filesystem tarball for the offline images.
#
#   images/rootfs/rootfs.sh NAME SUITE [PKG...]
#
# -> $OFFLINE_CACHE/rootfs/NAME.tar (path printed as the LAST line of stdout;
# all progress goes to stderr). mmdebstrap --variant=minbase from
# ${DEBIAN_MIRROR} (images/versions.env), installed with apt when missing.
# Docs, man pages, locales, apt lists and caches are left out.
#
# Optional environment:
#   ROOTFS_HOOKS        colon-separated executable scripts run as mmdebstrap
#                       customize hooks: called with the root directory as $1
#                       (e.g. to enable systemd units or add links); their
#                       sha256 is part of the cache stamp.
#   ROOTFS_STAMP_EXTRA  free text added to the stamp (e.g. hashes of files a
#                       hook copies in), so a change there rebuilds.
#   ROOTFS_FORCE=1      rebuild even when the stamp matches.
#
# Cached: NAME.stamp next to the tar holds suite, mirror, sorted package list
# and the script/hook hashes; a matching stamp skips the build.
set -euo pipefail

usage() { echo "usage: $0 NAME SUITE [PKG...]" >&2; exit 2; }
[ $# -ge 2 ] || usage
name=$1 suite=$2
shift 2
case "$name" in ''|*/*|.*) echo "rootfs: bad name '$name'" >&2; exit 2 ;; esac
case "$suite" in bookworm|trixie) ;; *) echo "rootfs: suite must be bookworm or trixie, not '$suite'" >&2; exit 2 ;; esac

script=$(readlink -f "$0")
cd "$(dirname "$script")/../.."
# shellcheck source=images/env.sh
source images/env.sh
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
out_dir=$OFFLINE_CACHE/rootfs
mkdir -p "$out_dir"
out=$(readlink -f "$out_dir")/$name.tar
stamp=$out_dir/$name.stamp

pkgs=$(printf '%s\n' "$@" | sed '/^$/d' | LC_ALL=C sort -u | tr '\n' ' ')
hooks=()
hook_sums=""
if [ -n "${ROOTFS_HOOKS:-}" ]; then
	IFS=: read -r -a hooks <<<"$ROOTFS_HOOKS"
	for h in "${hooks[@]}"; do
		[ -x "$h" ] || { echo "rootfs: hook '$h' is not an executable file" >&2; exit 2; }
		hook_sums+="$(sha256sum <"$h" | cut -d' ' -f1) "
	done
fi
want=$(printf 'suite=%s\nmirror=%s\npackages=%s\nscript=%s\nhooks=%s\nextra=%s\n' \
	"$suite" "$mirror" "$pkgs" "$(sha256sum <"$script" | cut -d' ' -f1)" "$hook_sums" "${ROOTFS_STAMP_EXTRA:-}")

# One builder per name at a time; a second caller waits and then finds it cached.
exec 9>"$out_dir/$name.lock"
flock 9

if [ "${ROOTFS_FORCE:-0}" != 1 ] && [ -s "$out" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
	echo "cached: rootfs $name ($suite: ${pkgs:-minbase only})" >&2
	echo "$out"
	exit 0
fi

if ! command -v mmdebstrap >/dev/null; then
	echo "==> installing mmdebstrap with apt" >&2
	[ "$(id -u)" = 0 ] || { echo "rootfs: need root to install mmdebstrap" >&2; exit 1; }
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends mmdebstrap >&2 ||
		{ apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends mmdebstrap >&2; }
fi

start=$(date +%s)
echo "==> building rootfs $name ($suite minbase + ${pkgs:-nothing}) (cold, ~1-3 min)" >&2
args=(
	--variant=minbase
	--mode=root
	--format=tar
	--components=main
	# Set up merged /usr directly instead of installing usrmerge (and perl).
	--hook-dir=/usr/share/mmdebstrap/hooks/maybe-merged-usr
	# Device nodes do not belong in an image layer (the runtime provides /dev).
	--skip=output/dev
	# Reuse downloaded .debs across builds (see the hooks below).
	--skip=essential/unlink
	# Keep images small: no docs (but copyrights), man pages or translations.
	--dpkgopt='path-exclude=/usr/share/doc/*'
	--dpkgopt='path-include=/usr/share/doc/*/copyright'
	--dpkgopt='path-exclude=/usr/share/man/*'
	--dpkgopt='path-exclude=/usr/share/info/*'
	--dpkgopt='path-exclude=/usr/share/locale/*'
	--dpkgopt='path-exclude=/usr/share/lintian/*'
	# The tarball is the product: no fsync per unpacked file.
	--dpkgopt='force-unsafe-io'
	--aptopt='APT::Install-Recommends "false"'
	--aptopt='Acquire::Languages "none"'
)
[ -n "$pkgs" ] && args+=("--include=${pkgs// /,}")
# A per-suite .deb cache: a rebuild with another package list downloads only
# what is new. apt checks every cached .deb against the index hashes.
debs=$OFFLINE_CACHE/work/rootfs/debs-$suite
mkdir -p "$debs"
args+=(
	"--setup-hook=mkdir -p \"\$1\"/var/cache/apt/archives && find '$debs' -maxdepth 1 -name '*.deb' -exec cp -t \"\$1\"/var/cache/apt/archives/ {} +"
	"--customize-hook=flock '$debs/.lock' find \"\$1\"/var/cache/apt/archives -maxdepth 1 -name '*.deb' -exec cp -u -t '$debs/' {} +"
)
for h in "${hooks[@]}"; do
	args+=("--customize-hook=$(readlink -f "$h") \"\$1\"")
done
# mmdebstrap's default cleanup drops apt lists and archives; also drop the
# remaining caches and logs.
# shellcheck disable=SC2016 # "$1" is for the hook's shell
args+=('--customize-hook=rm -rf "$1"/var/cache/apt/* "$1"/var/cache/debconf/*-old "$1"/var/log/apt/* "$1"/var/log/dpkg.log "$1"/var/log/alternatives.log "$1"/var/cache/ldconfig/aux-cache')

tmp=$out.tmp.$$
trap 'rm -f "$tmp"' EXIT
# SOURCE_DATE_EPOCH makes mmdebstrap's output reproducible-ish (fixed mtimes/logs).
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-1700000000} mmdebstrap "${args[@]}" "$suite" "$tmp" "$mirror" >&2
mv -f "$tmp" "$out"
trap - EXIT
printf '%s' "$want" >"$stamp"
echo "==> rootfs $name: $(du -h "$out" | cut -f1) in $(($(date +%s) - start)) s" >&2
echo "$out"
