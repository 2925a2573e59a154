#!/usr/bin/env bash
# Builds imgtool (docker-archive writer, see main.go) into
# $OFFLINE_CACHE/bin/imgtool; runs its unit test on every real build.
# Cached by the hash of its sources and the Go version.
set -euo pipefail
# shellcheck source=images/imgtool/lib.sh
source "$(dirname "$0")/lib.sh"
offline_init imgtool
offline_lock imgtool

out=$BIN/imgtool
mapfile -t srcs < <(find images/imgtool -maxdepth 1 \( -name '*.go' -o -name 'go.mod' -o -name 'go.sum' -o -name 'build.sh' \) | LC_ALL=C sort)
want=$(printf 'go=%s\nsrc=%s\n' "$(go env GOVERSION)" "$(hash_files "${srcs[@]}")")
if stamp_ok "$out.stamp" "$want" "$out"; then
	echo "cached: imgtool ($out)"
	exit 0
fi
echo "==> building imgtool (cold, ~1 min)"
cd images/imgtool
nice -n 10 go test -count=1 .
nice -n 10 go build -trimpath -ldflags '-s -w' -o "$out.tmp" .
mv "$out.tmp" "$out"
stamp_write "$out.stamp" "$want"
echo "built: $out"
offline_done
