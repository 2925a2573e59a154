# shellcheck shell=bash
# Shared by the build scripts of the images written with imgtool (imgtool,
# pause, kubernetes, etcd, coredns): repository root, versions, Go settings,
# stamp caching, locking and timing. Source it, then call offline_init.

# offline_init COMPONENT: cd to the repository root, load the pinned versions
# and set up a static, reproducible Go build. Sets ROOT, CACHE, WORK, BIN,
# IMAGES and starts the clock.
offline_init() {
	local lib_dir
	lib_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
	ROOT=$(cd "$lib_dir/../.." && pwd)
	cd "$ROOT" || return 1
	# shellcheck source=images/env.sh
	source images/env.sh
	CACHE=$OFFLINE_CACHE
	WORK=$CACHE/work/$1
	BIN=$CACHE/bin
	IMAGES=$CACHE/images
	mkdir -p "$WORK" "$BIN" "$IMAGES"
	export PATH=/usr/local/go/bin:$PATH CGO_ENABLED=0 GOFLAGS=-buildvcs=false
	OFFLINE_START=$SECONDS
	OFFLINE_COMPONENT=$1
}

# offline_done: the elapsed time every build script reports.
offline_done() {
	echo "==> $OFFLINE_COMPONENT: done in $((SECONDS - OFFLINE_START)) s"
}

# offline_lock NAME: one builder of NAME at a time (the lock is held until the
# script exits); a second caller waits, then finds the result cached.
offline_lock() {
	exec {OFFLINE_LOCK_FD}>"$CACHE/work/$1.lock"
	flock "$OFFLINE_LOCK_FD"
}

# hash_files FILE...: one sha256 over the names (repository-relative) and
# contents of the given files.
hash_files() {
	(cd "$ROOT" && sha256sum -- "$@") | sha256sum | cut -c1-64
}

# stamp_ok STAMP WANT OUTPUT...: true when every output exists and STAMP
# holds exactly WANT.
stamp_ok() {
	local stamp=$1 want=$2 f
	shift 2
	for f in "$@"; do [ -s "$f" ] || return 1; done
	[ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]
}

stamp_write() {
	printf '%s\n' "$2" >"$1.tmp" && mv "$1.tmp" "$1"
}

# ensure_imgtool: build imgtool if needed and set IMGTOOL.
ensure_imgtool() {
	"$ROOT/images/imgtool/build.sh" | sed 's/^/  /'
	IMGTOOL=$BIN/imgtool
}

# tmp_dir: prints an empty world-writable directory to --add as /tmp, which
# images of a lone static binary otherwise lack.
tmp_dir() {
	local d=$CACHE/work/imgtool/tmp
	mkdir -p "$d"
	chmod 1777 "$d"
	printf '%s\n' "$d"
}

# build_image NAME STAMP_EXTRA IMGTOOL_BUILD_ARGS...: write
# $IMAGES/NAME.tar unless its stamp (versions, imgtool's hash, the arguments
# and STAMP_EXTRA, which carries the hashes of the added files) matches, then
# validate it with imgtool inspect.
build_image() {
	local name=$1 extra=$2 out want
	shift 2
	out=$IMAGES/$name.tar
	ensure_imgtool
	want=$(printf 'imgtool=%s\nargs=%s\nextra=%s\n' \
		"$(sha256sum <"$IMGTOOL" | cut -c1-64)" "$*" "$extra")
	if stamp_ok "$out.stamp" "$want" "$out"; then
		echo "cached: image $name ($out)"
		return 0
	fi
	echo "==> writing image $name"
	"$IMGTOOL" build -o "$out" "$@"
	"$IMGTOOL" inspect "$out" | sed 's/^/    /'
	stamp_write "$out.stamp" "$want"
}
