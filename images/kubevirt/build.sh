#!/usr/bin/env bash
# Scripts run in chroots are single-quoted on purpose (they expand there).
# shellcheck disable=SC2016
# Builds the KubeVirt ${KUBEVIRT_VERSION} image set from the Go module proxy
# and Debian packages only, as docker-archive tarballs in $OFFLINE_CACHE/images/
# tagged ${LOCAL_REGISTRY}/<component>:${KUBEVIRT_VERSION}, and renders the
# operator manifests into $OFFLINE_CACHE/manifests/kubevirt-operator/<version>/.
#
# Images: every one virt-operator's install strategy deploys by default
# (virt-api, virt-controller, virt-exportproxy, virt-synchronization-controller,
# the virt-handler DaemonSet with virt-launcher as its init container), the
# operator itself and virt-exportserver (started by virt-controller for
# VirtualMachineExports). Not built: pr-helper (PersistentReservation feature
# gate), sidecar-shim (hook sidecars), virt-template-* (opt-in).
#
# Go components build in this directory's module (go.mod requires
# kubevirt.io/kubevirt and reproduces its replace block). virt-handler (cgo for
# <linux/kvm.h>), virt-launcher (cgo: libvirt, libnbd >= 1.18) and the C
# container-disk build inside a Debian trixie root (rootfs.sh kubevirt-build),
# which also builds virtqemud from Debian's libvirt source.
#
# Every step is cached by a stamp; a second run rebuilds nothing.
set -euo pipefail
# shellcheck source=images/imgtool/lib.sh
source "$(dirname "$0")/../imgtool/lib.sh"
offline_init kubevirt
offline_lock kubevirt

V=$KUBEVIRT_VERSION
REG=$LOCAL_REGISTRY
MOD=$ROOT/images/kubevirt
KBIN=$BIN/kubevirt/$V
MANIFESTS=$CACHE/manifests/kubevirt-operator/$V
mkdir -p "$KBIN" "$MANIFESTS" "$WORK/logs"
export GOTOOLCHAIN=local

# timed LABEL CMD...: run CMD and record how long it took (summary at the end).
TIMES=()
timed() {
	local label=$1 t=$SECONDS
	shift
	"$@"
	TIMES+=("$label: $((SECONDS - t)) s")
}

# KubeVirt's module in the module cache (read-only sources: manifests,
# templates, configs) and the commit its tag points to (version stamping).
kv_info=$(cd "$MOD" && go mod download -json "kubevirt.io/kubevirt@$V")
KV_DIR=$(jq -r .Dir <<<"$kv_info")
KV_COMMIT=$(jq -r '.Origin.Hash // "unknown"' <<<"$kv_info")
# What KubeVirt's bazel build stamps (staging/.../client-go/version/def.bzl);
# the build date is fixed so rebuilds are identical.
LDFLAGS="-s -w -X kubevirt.io/client-go/version.gitVersion=$V -X kubevirt.io/client-go/version.gitCommit=$KV_COMMIT -X kubevirt.io/client-go/version.gitTreeState=clean -X kubevirt.io/client-go/version.buildDate=1970-01-01T00:00:00Z"
MOD_HASH=$(hash_files images/kubevirt/go.mod images/kubevirt/go.sum)

# ---------------------------------------------------------------------------
# 1. Pure Go components, static (CGO_ENABLED=0), on the host, in ONE go
# build: the shared dependencies compile once and the links run in parallel.
PURE_GO=(
	virt-operator:cmd/virt-operator
	csv-generator:tools/csv-generator
	virt-api:cmd/virt-api
	virt-controller:cmd/virt-controller
	virt-exportproxy:cmd/virt-exportproxy
	virt-exportserver:cmd/virt-exportserver
	virt-synchronization-controller:cmd/synchronization-controller
	virt-chroot:cmd/virt-chroot
	virt-launcher-monitor:cmd/virt-launcher-monitor
	virt-freezer:cmd/virt-freezer
	virt-probe:cmd/virt-probe
	virt-tail:cmd/virt-tail
	libvirt-hook-client:cmd/virt-launcher/libvirt-hook-client
	manifest-templator:tools/manifest-templator
	virtctl:cmd/virtctl
)
build_pure_go() {
	local nb pkgs=() outs=() want tmp=$KBIN/.pure-go.tmp
	for nb in "${PURE_GO[@]}"; do
		pkgs+=("kubevirt.io/kubevirt/${nb#*:}")
		outs+=("$KBIN/${nb%%:*}")
	done
	want=$(printf 'go=%s\nmod=%s\npkgs=%s\nldflags=%s\n' "$(go env GOVERSION)" "$MOD_HASH" "${PURE_GO[*]}" "$LDFLAGS")
	if stamp_ok "$KBIN/pure-go.stamp" "$want" "${outs[@]}"; then
		echo "cached: ${#PURE_GO[@]} pure Go components"
		return 0
	fi
	echo "==> building ${#PURE_GO[@]} pure Go components in one go build (cold: ~10-15 min on 2 cores)"
	rm -rf "$tmp"
	mkdir -p "$tmp"
	(cd "$MOD" && nice -n 10 go build -trimpath -ldflags "$LDFLAGS" -o "$tmp/" "${pkgs[@]}")
	# go build names each binary after its package's last element.
	for nb in "${PURE_GO[@]}"; do mv "$tmp/$(basename "${nb#*:}")" "$KBIN/${nb%%:*}"; done
	rm -rf "$tmp"
	stamp_write "$KBIN/pure-go.stamp" "$want"
}
timed "pure Go components" build_pure_go

# ---------------------------------------------------------------------------
# Debian roots: rootfs.sh (cached by suite and package list) gives a tarball;
# roots that are built in or customized are extracted under $WORK.

# rootfs NAME SUITE [HOOK] -- PKG...: path of the rootfs.sh tarball.
rootfs() {
	local name=$1 suite=$2 hooks=""
	shift 2
	if [ "$1" != -- ]; then hooks=$MOD/$1; shift; fi
	shift
	# rootfs.sh narrates on stderr: keep that in a log, show its last line.
	local log=$WORK/logs/rootfs-$name.log
	ROOTFS_HOOKS=$hooks nice -n 10 "$ROOT/images/rootfs/rootfs.sh" "$name" "$suite" "$@" 2>"$log" | tail -n1 ||
		{ tail -n 30 "$log" >&2; return 1; }
	tail -n1 "$log" >&2
}

# rootfs_var VAR NAME SUITE [HOOK] -- PKG...: VAR=$(rootfs ...), timed.
rootfs_var() {
	local var=$1 t=$SECONDS path
	shift
	path=$(rootfs "$@")
	printf -v "$var" '%s' "$path"
	TIMES+=("rootfs $1: $((SECONDS - t)) s")
}

# extract TAR DIR: unpack TAR into DIR (replacing it) unless DIR came from
# that same tarball (by its rootfs.sh stamp).
extract() {
	local tar=$1 dir=$2 want
	want="$(cat "${tar%.tar}.stamp") size=$(stat -c %s "$tar")"
	if stamp_ok "$dir.stamp" "$want" "$tar" && [ -d "$dir" ]; then
		return 0
	fi
	echo "==> extracting $(basename "$tar") into ${dir#"$ROOT"/}"
	rm -rf "$dir" "$dir.stamp"
	mkdir -p "$dir"
	tar --xattrs --xattrs-include='*' --numeric-owner -xpf "$tar" -C "$dir"
	stamp_write "$dir.stamp" "$want"
}

# in_root DIR [--bind SRC:DST]... -- CMD...: run CMD chrooted in DIR, in
# private mount and PID namespaces (nothing leaks, every process it started
# dies with it), with /dev, /proc, /sys, the host's DNS and the given binds.
in_root() {
	local dir=$1 binds=()
	shift
	while [ "$1" != -- ]; do binds+=("$2"); shift 2; done
	shift
	unshare --mount --pid --fork --propagation private \
		bash -euc '
			r=$1; n=$2; shift 2
			mkdir -p "$r/dev" "$r/proc" "$r/sys"
			mount --rbind /dev "$r/dev"
			mount -t proc proc "$r/proc"
			mount --rbind /sys "$r/sys"
			[ -e "$r/etc/resolv.conf" ] || [ -L "$r/etc/resolv.conf" ] || touch "$r/etc/resolv.conf"
			mount --bind /etc/resolv.conf "$r/etc/resolv.conf" 2>/dev/null || true
			for ((i = 0; i < n; i++)); do
				src=${1%%:*} dst=${1#*:}; shift
				mkdir -p "$r$dst"
				mount --bind "$src" "$r$dst"
			done
			exec chroot "$r" /usr/bin/env -i HOME=/root LANG=C.UTF-8 \
				PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
		' in_root "$dir" "${#binds[@]}" "${binds[@]}" "$@"
}

# ---------------------------------------------------------------------------
# 2. The trixie build root: libvirt-dev and libnbd-dev (>= 1.18, bookworm's
# 1.14 is too old for KubeVirt) plus libvirt's build dependencies.
SUITE=$LAUNCHER_DEBIAN_SUITE
rootfs_var BUILD_TAR kubevirt-build "$SUITE" buildroot-hook.sh -- \
	build-essential pkg-config dpkg-dev ca-certificates libvirt-dev libnbd-dev
BROOT=$WORK/buildroot
timed "build root extract" extract "$BUILD_TAR" "$BROOT"
BROOT_STAMP=$(sha256sum <"$BROOT.stamp" | cut -c1-64)
# The sources must be those of the installed packages: virtqemud has to match
# the libvirt0 it runs against (it uses libvirt's private symbols).
LIBVIRT_DEB=$(chroot "$BROOT" dpkg-query -W -f '${source:Version}' libvirt0)
LIBNBD_DEB=$(chroot "$BROOT" dpkg-query -W -f '${source:Version}' libnbd-dev)
LIBVIRT_SRC=$WORK/src/libvirt-${LIBVIRT_DEB%-*}
LIBNBD_SRC=$WORK/src/libnbd-${LIBNBD_DEB%-*}

# in_build CMD...: run CMD in the build root with Go, the module cache, a Go
# build cache of its own, this module (/mod, read-only use) and $WORK (/w).
in_build() {
	mkdir -p "$WORK/gocache-$SUITE"
	in_root "$BROOT" --bind "$WORK:/w" --bind /usr/local/go:/usr/local/go \
		--bind "$(go env GOMODCACHE):/root/go/pkg/mod" \
		--bind "$WORK/gocache-$SUITE:/root/.cache/go-build" --bind "$MOD:/mod" -- \
		nice -n 10 env GOPROXY=off GOFLAGS=-buildvcs=false GOTOOLCHAIN=local "$@"
}
# Paths as seen inside the build root (under /w); build outputs land in
# $OUT first (the build root sees $WORK only).
w() {
	case $1 in "$WORK"/*) echo "/w/${1#"$WORK"/}" ;; *) echo "kubevirt: $1 is not under $WORK" >&2; return 1 ;; esac
}
OUT=$WORK/out
mkdir -p "$OUT"

fetch_sources() {
	local want="libvirt=$LIBVIRT_DEB libnbd=$LIBNBD_DEB patch=nbdFreeCallbackId"
	if stamp_ok "$WORK/src.stamp" "$want" "$LIBVIRT_SRC/meson.build" "$LIBNBD_SRC/golang/go.mod"; then
		echo "cached: libvirt $LIBVIRT_DEB and libnbd $LIBNBD_DEB sources"
		return 0
	fi
	echo "==> fetching the libvirt $LIBVIRT_DEB and libnbd $LIBNBD_DEB sources (~1 min)"
	rm -rf "$WORK/src"
	mkdir -p "$WORK/src"
	# This mirror serves no libvirt .dsc, so libvirt is unpacked by hand:
	# upstream tarball, Debian's packaging, then Debian's patch series.
	in_build bash -euc '
		cd /w/src
		apt-get update -qq
		apt-get source -q "libnbd=$1"
		apt-get source -q --tar-only "libvirt=$2"
		apt-get source -q --diff-only "libvirt=$2"
	' sh "$LIBNBD_DEB" "$LIBVIRT_DEB" >"$WORK/logs/sources.log" 2>&1 ||
		{ tail -n 20 "$WORK/logs/sources.log" >&2; exit 1; }
	mkdir -p "$LIBVIRT_SRC"
	tar -xJf "$WORK"/src/libvirt_"${LIBVIRT_DEB%-*}".orig.tar.xz --strip-components=1 -C "$LIBVIRT_SRC"
	tar -xJf "$WORK/src/libvirt_$LIBVIRT_DEB.debian.tar.xz" -C "$LIBVIRT_SRC"
	local p
	grep -v '^[[:space:]]*\(#\|$\)' "$LIBVIRT_SRC/debian/patches/series" | while read -r p; do
		patch -d "$LIBVIRT_SRC" -p1 -s --no-backup-if-mismatch <"$LIBVIRT_SRC/debian/patches/$p"
	done
	# libvirt.org/go/libvirt and libnbd's Go bindings both export the C
	# symbol freeCallbackId: linked together (virt-launcher) they clash, so
	# the build's copy of the libnbd bindings gets its own name.
	sed -i 's/\bfreeCallbackId\b/nbdFreeCallbackId/g' "$LIBNBD_SRC"/golang/*.go
	[ -f "$LIBNBD_SRC/golang/go.mod" ] || { echo "kubevirt: no Go bindings in libnbd $LIBNBD_DEB" >&2; exit 1; }
	stamp_write "$WORK/src.stamp" "$want"
}
timed "sources libvirt+libnbd" fetch_sources

# virtqemud: configured exactly as Debian configures libvirt (debian/rules),
# then only its ninja target is built (libvirt.so and the QEMU driver come
# from Debian's packages in the launcher image).
build_virtqemud() {
	local out=$KBIN/virtqemud want
	want="libvirt=$LIBVIRT_DEB root=$BROOT_STAMP"
	if stamp_ok "$out.stamp" "$want" "$out"; then
		echo "cached: virtqemud ($LIBVIRT_DEB)"
		return 0
	fi
	echo "==> building virtqemud from Debian's libvirt $LIBVIRT_DEB (cold, ~2-6 min)"
	in_build bash -euc '
		cd "$1"
		[ -f obj-x86_64-linux-gnu/build.ninja ] || debian/rules override_dh_auto_configure >/w/logs/virtqemud-configure.log 2>&1
		ninja -C obj-x86_64-linux-gnu src/virtqemud >/w/logs/virtqemud-ninja.log 2>&1
		strip --strip-unneeded -o "$2.tmp" obj-x86_64-linux-gnu/src/virtqemud
	' sh "$(w "$LIBVIRT_SRC")" "$(w "$OUT/virtqemud")"
	mv "$OUT/virtqemud.tmp" "$out"
	stamp_write "$out.stamp" "$want"
}
timed "virtqemud" build_virtqemud

# cgo_bin NAME PACKAGE [MODFILE]: build $KBIN/NAME with cgo in the build root.
cgo_bin() {
	local name=$1 pkg=kubevirt.io/kubevirt/$2 modfile=${3:-} out=$KBIN/$1 want
	want=$(printf 'go=%s\nmod=%s\npkg=%s\nldflags=%s\nroot=%s\nlibnbd=%s\nmodfile=%s\n' "$(go env GOVERSION)" \
		"$MOD_HASH" "$pkg" "$LDFLAGS" "$BROOT_STAMP" "$LIBNBD_DEB" "${modfile:+$(sha256sum <"$modfile" | cut -c1-64)}")
	if stamp_ok "$out.stamp" "$want" "$out"; then
		echo "cached: $name (cgo, $SUITE)"
		return 0
	fi
	echo "==> building $name with cgo in the $SUITE build root (cold: ~3-10 min)"
	# -Wno-discarded-qualifiers: libnbd's generated cgo wrappers trip it by the dozen.
	in_build env CGO_ENABLED=1 CGO_CFLAGS="-O2 -g -Wno-discarded-qualifiers" bash -euc 'cd /mod && go build -trimpath ${3:+-modfile=$3} -ldflags "$4" -o "$2.tmp" "$1"' \
		sh "$pkg" "$(w "$OUT/$name")" "${modfile:+$(w "$modfile")}" "$LDFLAGS"
	mv "$OUT/$name.tmp" "$out"
	stamp_write "$out.stamp" "$want"
}
# virt-launcher builds against the libnbd bindings: a copy of this module's
# go.mod with one more replace (the proxy refuses libguestfs.org/libnbd).
LAUNCHER_MOD=$WORK/launcher-mod/go.mod
mkdir -p "$(dirname "$LAUNCHER_MOD")"
{
	cat "$MOD/go.mod"
	printf '\n// virt-launcher only: the Go bindings of Debian'"'"'s libnbd %s source.\n' "$LIBNBD_DEB"
	printf 'replace libguestfs.org/libnbd => %s/golang\n' "$(w "$LIBNBD_SRC")"
} >"$LAUNCHER_MOD.tmp"
cmp -s "$LAUNCHER_MOD.tmp" "$LAUNCHER_MOD" || { mv "$LAUNCHER_MOD.tmp" "$LAUNCHER_MOD"; cp "$MOD/go.sum" "${LAUNCHER_MOD%.mod}.sum"; }
rm -f "$LAUNCHER_MOD.tmp"

# The build root resolves modules with GOPROXY=off: fetch on the host what
# only the cgo commands need (github.com/mdlayher/vsock and
# github.com/containers/common were never downloaded otherwise on a fresh
# machine; `go mod download` alone does not fetch them). -e: the launcher's
# libnbd is replaced only in its own modfile.
prefetch_cgo_deps() {
	(cd "$MOD" && CGO_ENABLED=1 go list -e -deps kubevirt.io/kubevirt/cmd/virt-handler kubevirt.io/kubevirt/cmd/virt-launcher >/dev/null)
}
timed "cgo module prefetch" prefetch_cgo_deps

# virt-handler sets up the launcher pod's network; on a kernel without
# CONFIG_DUMMY it is built from a copy of KubeVirt with compat.sh's edit
# (the probe decides; where dummy works, KubeVirt's code is built as is).
KV_PATCH=$("$MOD/compat.sh" probe)
HANDLER_MODFILE=""
if [ "$KV_PATCH" != none ]; then
	KV_COMPAT=$WORK/kubevirt-compat
	compat_copy() {
		local want
		want="module=$V dir=$KV_DIR compat=$(sha256sum <"$MOD/compat.sh" | cut -c1-64)"
		if stamp_ok "$KV_COMPAT.stamp" "$want" "$KV_COMPAT/go.mod"; then
			echo "cached: KubeVirt $V with the $KV_PATCH edit ($KV_COMPAT)"
			return 0
		fi
		echo "==> KubeVirt $V: applying the $KV_PATCH edit to a copy (images/kubevirt/compat.sh)"
		"$MOD/compat.sh" apply "$KV_DIR" "$KV_COMPAT" >/dev/null
		stamp_write "$KV_COMPAT.stamp" "$want"
	}
	timed "compat copy" compat_copy
	HANDLER_MODFILE=$WORK/handler-mod/go.mod
	mkdir -p "$(dirname "$HANDLER_MODFILE")"
	{
		cat "$MOD/go.mod"
		printf '\n// virt-handler only: KubeVirt with the %s edit (compat.sh %s).\n' "$KV_PATCH" "$(sha256sum <"$MOD/compat.sh" | cut -c1-12)"
		printf 'replace kubevirt.io/kubevirt => %s\n' "$(w "$KV_COMPAT")"
	} >"$HANDLER_MODFILE.tmp"
	cmp -s "$HANDLER_MODFILE.tmp" "$HANDLER_MODFILE" || mv "$HANDLER_MODFILE.tmp" "$HANDLER_MODFILE"
	rm -f "$HANDLER_MODFILE.tmp"
	cp "$MOD/go.sum" "${HANDLER_MODFILE%.mod}.sum"
fi
timed "cgo virt-handler" cgo_bin virt-handler cmd/virt-handler "$HANDLER_MODFILE"
timed "cgo virt-launcher" cgo_bin virt-launcher cmd/virt-launcher "$LAUNCHER_MOD"

# container-disk (cmd/container-disk-v2alpha) is C, linked statically as
# upstream's cc_binary does.
build_container_disk() {
	local out=$KBIN/container-disk src=$KV_DIR/cmd/container-disk-v2alpha/main.c want
	want="src=$(sha256sum <"$src" | cut -c1-64) root=$BROOT_STAMP"
	if stamp_ok "$out.stamp" "$want" "$out"; then
		echo "cached: container-disk"
		return 0
	fi
	echo "==> building container-disk (gcc -static, seconds)"
	cp "$src" "$WORK/container-disk.c"
	in_build gcc -O2 -static -o "$(w "$OUT/container-disk").tmp" "$(w "$WORK/container-disk.c")"
	in_build strip "$(w "$OUT/container-disk").tmp"
	mv "$OUT/container-disk.tmp" "$out"
	stamp_write "$out.stamp" "$want"
}
timed "container-disk" build_container_disk

# ---------------------------------------------------------------------------
# 3. Image roots. The hook adds qemu (107), nonroot-user (1001), /var/run ->
# ../run and the OVMF names (see imageroot-hook.sh).
# Pure Go images: upstream uses distroless base-debian12; a minimal Debian
# root with CA certificates plays that part.
rootfs_var BASE_TAR kubevirt-base "$DEBIAN_SUITE" imageroot-hook.sh -- ca-certificates
# virt-handler (upstream handlerbase): qemu-img, nft, ip, findmnt, tar,
# xorriso, procps, and passt-repair (migration with passt; trixie's passt
# ships it, bookworm's does not).
rootfs_var HANDLER_TAR kubevirt-handler "$SUITE" imageroot-hook.sh -- \
	qemu-utils nftables iproute2 procps tar util-linux findutils xorriso passt psmisc ca-certificates
# virt-launcher (upstream launcherbase): libvirt's QEMU driver, virtlogd and
# virsh (virtqemud itself is built above), QEMU for x86_64 with its device
# modules, qemu-img, firmware (OVMF, SeaBIOS, iPXE), passt, virtiofsd, swtpm,
# nftables, iproute2, xorriso (cloud-init ISOs), ncat, procps, findutils, tar,
# and libnbd for the launcher's NBD client.
LAUNCHER_PKGS=(
	libvirt-daemon-driver-qemu libvirt-daemon-log libvirt-clients libvirt0 libnbd0
	qemu-system-x86 qemu-utils ovmf seabios ipxe-qemu
	passt virtiofsd swtpm swtpm-tools
	nftables iproute2 procps psmisc findutils tar xorriso ncat dmidecode util-linux ca-certificates
)
rootfs_var LAUNCHER_BASE_TAR kubevirt-launcher "$SUITE" imageroot-hook.sh -- "${LAUNCHER_PKGS[@]}"

# The launcher root gets KubeVirt's files and binaries (virt-launcher-monitor
# needs the file capability cap_net_bind_service, which only a tarball of our
# own can carry), is checked in a chroot, then re-packed as the image base.
LROOT=$WORK/launcher-root
LAUNCHER_ROOTFS=$WORK/virt-launcher-rootfs.tar
LAUNCHER_BINS=(virt-launcher virt-launcher-monitor virt-freezer virt-probe virt-tail container-disk libvirt-hook-client)
launcher_root() {
	local kvl=$KV_DIR/cmd/virt-launcher want b
	want=$(printf 'base=%s\nhook=%s\nfiles=%s\n' "$(cat "${LAUNCHER_BASE_TAR%.tar}.stamp")" \
		"$(sha256sum <"$MOD/imageroot-hook.sh" | cut -c1-64)" \
		"$(cd "$KBIN" && sha256sum virtqemud "${LAUNCHER_BINS[@]}" | sha256sum | cut -c1-64) $(cd "$kvl" && sha256sum qemu.conf virtqemud.conf nsswitch.conf qemu node-labeller/node-labeller.sh | sha256sum | cut -c1-64) commit=$KV_COMMIT recipe=$(declare -f launcher_root verify_launcher_root | sha256sum | cut -c1-64)")
	if stamp_ok "$LAUNCHER_ROOTFS.stamp" "$want" "$LAUNCHER_ROOTFS"; then
		echo "cached: virt-launcher root ($LAUNCHER_ROOTFS)"
		return 0
	fi
	echo "==> assembling the virt-launcher root (~1-2 min)"
	rm -f "$LROOT.stamp"
	extract "$LAUNCHER_BASE_TAR" "$LROOT"
	install -m 0755 "$KBIN/virtqemud" "$LROOT/usr/sbin/virtqemud"
	for b in "${LAUNCHER_BINS[@]}"; do install -m 0755 "$KBIN/$b" "$LROOT/usr/bin/$b"; done
	install -m 0755 "$kvl/node-labeller/node-labeller.sh" "$LROOT/usr/bin/node-labeller.sh"
	setcap cap_net_bind_service=+ep "$LROOT/usr/bin/virt-launcher-monitor"
	install -m 0644 "$kvl/qemu.conf" "$kvl/virtqemud.conf" "$LROOT/etc/libvirt/"
	install -m 0644 "$kvl/nsswitch.conf" "$LROOT/etc/nsswitch.conf"
	install -D -m 0755 -o 107 -g 107 "$kvl/qemu" "$LROOT/etc/libvirt/hooks/qemu"
	# Debian's client defaults to libvirtd's socket when no URI is given
	# (node-labeller.sh runs plain `virsh domcapabilities`); upstream's
	# builds probe for virtqemud's socket. Name the driver.
	printf '\n# KubeVirt image: there is no libvirtd, only virtqemud.\nuri_default = "qemu:///system"\n' >>"$LROOT/etc/libvirt/libvirt.conf"
	install -d -m 0755 "$LROOT/usr/lib64/qemu-kvm"
	printf '%s\n' "$KV_COMMIT" >"$LROOT/.version"
	tar --xattrs --xattrs-include='security.capability' --numeric-owner --sort=name \
		--mtime=@1700000000 -C "$LROOT" -cf "$LAUNCHER_ROOTFS.tmp" .
	verify_launcher_root
	mv "$LAUNCHER_ROOTFS.tmp" "$LAUNCHER_ROOTFS"
	stamp_write "$LAUNCHER_ROOTFS.stamp" "$want"
	# The tree is now dirty (the checks ran in it): extract afresh next time.
	rm -f "$LROOT.stamp"
}

# What virt-launcher execs must run in the root: virtqemud answers virsh, and
# the domain capabilities of a q35 TCG guest come back.
verify_launcher_root() {
	echo "==> checking the virt-launcher root in a chroot"
	in_root "$LROOT" -- bash -euc '
		missing=$(for f in /usr/sbin/virtqemud /usr/sbin/virtlogd /usr/bin/virsh /usr/bin/virt-launcher /usr/bin/qemu-system-x86_64 /usr/bin/qemu-img /usr/libexec/virtiofsd /usr/bin/passt /usr/bin/swtpm; do ldd "$f" | grep "not found" | sed "s|^|$f: |"; done)
		[ -z "$missing" ] || { echo "missing libraries: $missing" >&2; exit 1; }
		echo "  virtqemud: $(virtqemud --version)"
		echo "  virtlogd: $(virtlogd --version)"
		echo "  qemu: $(qemu-system-x86_64 --version | head -n1)"
		echo "  qemu-img: $(qemu-img --version | head -n1)"
		echo "  virtiofsd: $(/usr/libexec/virtiofsd --version | head -n1)"
		# passt --version prints nothing here; its usage proves it runs.
		echo "  passt: $(passt --help 2>&1 | head -n1)"
		echo "  swtpm: $(swtpm --version | head -n1)"
		echo "  virt-launcher-monitor caps: $(getcap /usr/bin/virt-launcher-monitor 2>/dev/null || echo "(getcap not in the image)")"
		id qemu | sed "s/^/  /"
		ls -l /usr/share/OVMF/OVMF_CODE.fd /usr/share/OVMF/OVMF_VARS.fd | sed "s/^/  /"
		test "$(readlink /var/run)" = ../run
		virt-launcher --help >/tmp/launcher-help 2>&1 || true
		grep -q -- "--qemu-timeout" /tmp/launcher-help || { cat /tmp/launcher-help >&2; exit 1; }
		virtqemud -d
		for i in $(seq 60); do [ -S /run/libvirt/virtqemud-sock ] && break; sleep 0.5; done
		virsh version | sed "s/^/  /"
		virsh domcapabilities --machine q35 --virttype qemu >/tmp/domcaps.xml
		grep -q "<machine>pc-q35" /tmp/domcaps.xml
		echo "  domcapabilities q35/qemu: $(grep -o "<machine>[^<]*</machine>" /tmp/domcaps.xml), $(grep -c "<value>" /tmp/domcaps.xml) values"
		rm -f /tmp/launcher-help /tmp/domcaps.xml
	'
}
timed "virt-launcher root" launcher_root

# ---------------------------------------------------------------------------
# 4. Images, as upstream lays them out (cmd/*/BUILD.bazel): binaries in
# /usr/bin, the commit in /.version, entrypoint /usr/bin/<component>, user
# 1001 except virt-handler and virt-launcher (root; non-root VMs run the
# launcher as qemu 107 through the pod's securityContext).
VERSION_FILE=$WORK/version
printf '%s\n' "$KV_COMMIT" >"$VERSION_FILE.tmp"
if cmp -s "$VERSION_FILE.tmp" "$VERSION_FILE"; then rm -f "$VERSION_FILE.tmp"; else mv "$VERSION_FILE.tmp" "$VERSION_FILE"; fi

# kv_image NAME BASE_TAR USER BIN... [-- MORE_IMGTOOL_ARGS...]: the image
# $REG/NAME:$V with BINs in /usr/bin and entrypoint /usr/bin/NAME.
kv_image() {
	local name=$1 base=$2 user=$3 args=() sums b
	shift 3
	# The base's identity: rootfs.sh's stamp, or the launcher root's own.
	sums="base=$(cat "${base%.tar}.stamp" 2>/dev/null || cat "$base.stamp")"
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		args+=(--add "$KBIN/$1:/usr/bin/$1:0755")
		sums+=" $1=$(sha256sum <"$KBIN/$1" | cut -c1-64)"
		shift
	done
	[ $# -gt 0 ] && shift
	args+=(--add "$VERSION_FILE:/.version:0644" "$@")
	[ -n "$user" ] && args+=(--user "$user")
	timed "image $name" build_image "$name" "$sums commit=$KV_COMMIT" \
		--tag "$REG/$name:$V" --base "$base" --entrypoint "[\"/usr/bin/$name\"]" "${args[@]}"
}
kv_image virt-operator "$BASE_TAR" 1001 virt-operator csv-generator
kv_image virt-api "$BASE_TAR" 1001 virt-api
kv_image virt-controller "$BASE_TAR" 1001 virt-controller
kv_image virt-exportproxy "$BASE_TAR" 1001 virt-exportproxy
kv_image virt-exportserver "$BASE_TAR" 1001 virt-exportserver
kv_image virt-synchronization-controller "$BASE_TAR" 1001 virt-synchronization-controller
kv_image virt-handler "$HANDLER_TAR" "" virt-handler virt-chroot -- \
	--add "$KV_DIR/cmd/virt-handler/nsswitch.conf:/etc/nsswitch.conf:0644" \
	--label "org.cozystack.vlan-conformance.kubevirt-patch=$KV_PATCH"
kv_image virt-launcher "$LAUNCHER_ROOTFS" ""

# ---------------------------------------------------------------------------
# 5. Manifests, rendered offline by KubeVirt's manifest-templator as
# hack/build-manifests.sh does: images $REG/<component>:$V (the operator
# derives every other image from its own), pull policy IfNotPresent.
render_manifests() {
	local t=$KBIN/manifest-templator tmp=$WORK/manifests f want
	want=$(printf 'templator=%s\nreg=%s\nversion=%s\n' "$(sha256sum <"$t" | cut -c1-64)" "$REG" "$V")
	if stamp_ok "$MANIFESTS/manifests.stamp" "$want" "$MANIFESTS/kubevirt-operator.yaml" "$MANIFESTS/kubevirt-cr.yaml"; then
		echo "cached: manifests ($MANIFESTS)"
		return 0
	fi
	echo "==> rendering kubevirt-operator.yaml and kubevirt-cr.yaml"
	rm -rf "$tmp"
	mkdir -p "$tmp"
	for f in kubevirt-operator kubevirt-cr; do
		"$t" --process-files --generated-manifests-dir="$KV_DIR/manifests/generated/" \
			--input-file="$KV_DIR/manifests/release/$f.yaml.in" >"$tmp/$f.yaml.in"
		"$t" --process-vars --input-file="$tmp/$f.yaml.in" \
			--container-prefix="$REG" --container-tag="$V" --image-prefix= \
			--image-pull-policy=IfNotPresent --namespace=kubevirt --csv-namespace=placeholder \
			--cdi-namespace=cdi --csv-version="${V#v}" --verbosity=2 --package-name=kubevirt-operator \
			--kubevirt-logo-path="$KV_DIR/assets/kubevirt_logo.png" >"$tmp/$f.yaml"
		# As build-manifests.sh: no empty last line.
		sed -i '${/^$/d;}' "$tmp/$f.yaml"
		mv "$tmp/$f.yaml" "$MANIFESTS/$f.yaml"
	done
	grep -q "image: $REG/virt-operator:$V" "$MANIFESTS/kubevirt-operator.yaml"
	grep -q "value: $REG/virt-operator:$V" "$MANIFESTS/kubevirt-operator.yaml"
	stamp_write "$MANIFESTS/manifests.stamp" "$want"
}
timed "manifests" render_manifests

# What was built, for the run's report (the cluster tier reads it from the
# manifests directory): the build, and the patch with its reason.
{
	echo "KUBEVIRT_BUILD=KubeVirt $V built here from the Go module proxy and Debian $SUITE packages"
	echo "KUBEVIRT_PATCH=$KV_PATCH"
	if [ "$KV_PATCH" != none ]; then
		echo "KUBEVIRT_PATCH_WHY=dummy link emulated by a port-less bridge in virt-handler, because the kernel lacks CONFIG_DUMMY (images/kubevirt/compat.sh)"
	fi
} >"$MANIFESTS/build.env"

# ---------------------------------------------------------------------------
# 6. The binaries answer --help (virt-launcher: checked in its root above).
check_help() {
	local b out want stamp=$KBIN/help-check.stamp
	want=$(cd "$KBIN" && sha256sum virt-* csv-generator libvirt-hook-client manifest-templator virtctl | sha256sum | cut -c1-64)
	if stamp_ok "$stamp" "$want"; then
		echo "cached: --help checks"
		return 0
	fi
	for b in virt-operator csv-generator virt-api virt-controller virt-exportproxy \
		virt-synchronization-controller virt-chroot virt-launcher-monitor virt-freezer virt-probe \
		virt-tail manifest-templator virt-handler; do
		out=$(timeout 30 "$KBIN/$b" --help 2>&1 || true)
		grep -q -- '^Usage' <<<"$out" || { echo "kubevirt: $b --help: $out" >&2; exit 1; }
	done
	# virt-exportserver takes no flags (its environment configures it): it
	# starts, then stops for want of its TLS files.
	out=$(timeout 30 "$KBIN/virt-exportserver" 2>&1 || true)
	grep -q 'Starting export server' <<<"$out" || { echo "kubevirt: virt-exportserver: $out" >&2; exit 1; }
	# libvirt-hook-client (libvirt's hook) quietly ignores a bad call.
	timeout 30 "$KBIN/libvirt-hook-client" --help
	out=$("$KBIN/virtctl" version --client)
	grep -q "GitVersion:\"$V\"" <<<"$out" || { echo "kubevirt: virtctl version: $out" >&2; exit 1; }
	# virt-handler (cgo) links only libc, trixie's, whose symbol versions the
	# host's bookworm libc has too; virt-launcher ran in its own root above.
	echo "checked: --help of 15 binaries on the host, stamped $V (virtctl version)"
	stamp_write "$stamp" "$want"
}
timed "--help checks" check_help

# A Docker engine, when one is up, runs virtqemud from the launcher image.
docker_check() {
	local ref=$REG/virt-launcher:$V stamp=$WORK/docker-check.stamp want
	want=$(cat "$IMAGES/virt-launcher.tar.stamp")
	if stamp_ok "$stamp" "$want"; then
		echo "cached: docker check of $ref"
		return 0
	fi
	if ! docker info >/dev/null 2>&1; then
		echo "skipped: docker check (no Docker engine)"
		return 0
	fi
	local present=0
	docker image inspect "$ref" >/dev/null 2>&1 && present=1
	docker load -q -i "$IMAGES/virt-launcher.tar"
	local out rc=0
	out=$(docker run --rm --entrypoint /usr/sbin/virtqemud "$ref" --version 2>&1) || rc=$?
	[ "$present" = 1 ] || docker rmi -f "$ref" >/dev/null
	echo "  docker run $ref virtqemud --version: $out"
	[ "$rc" = 0 ] || return 1
	stamp_write "$stamp" "$want"
}
if [ "${KUBEVIRT_DOCKER_CHECK:-1}" = 1 ]; then timed "docker check" docker_check; fi

echo "==> images ($REG/*:$V):"
for n in virt-operator virt-api virt-controller virt-exportproxy virt-exportserver virt-synchronization-controller virt-handler virt-launcher; do
	printf '    %-40s %s\n' "$IMAGES/$n.tar" "$(du -h "$IMAGES/$n.tar" | cut -f1)"
done
echo "==> manifests: $MANIFESTS/{kubevirt-operator,kubevirt-cr}.yaml"
echo "==> times:"
printf '    %s\n' "${TIMES[@]}"
offline_done
