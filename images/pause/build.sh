#!/usr/bin/env bash
# Builds the pod sandbox image registry.k8s.io/pause, tagged both as
# ${PAUSE_TAG} (what kubeadm expects) and ${KIND_PAUSE_TAG} (what kind's
# containerd config pins), from images/imgtool/cmd/pause (static Go, no base).
# -> $OFFLINE_CACHE/images/pause.tar; cached by stamp.
set -euo pipefail
# shellcheck source=images/imgtool/lib.sh
source "$(dirname "$0")/../imgtool/lib.sh"
offline_init pause
offline_lock pause

bin_dir=$BIN/pause/$PAUSE_TAG
out=$bin_dir/pause
want=$(printf 'go=%s\nversion=%s\nsrc=%s\n' "$(go env GOVERSION)" "$PAUSE_TAG" \
	"$(hash_files images/imgtool/cmd/pause/main.go images/imgtool/go.mod)")
if stamp_ok "$out.stamp" "$want" "$out"; then
	echo "cached: pause binary ($out)"
else
	echo "==> building pause $PAUSE_TAG (cold, ~10 s)"
	mkdir -p "$bin_dir"
	(cd images/imgtool && nice -n 10 go build -trimpath \
		-ldflags "-s -w -X main.version=$PAUSE_TAG" -o "$out.tmp" ./cmd/pause)
	mv "$out.tmp" "$out"
	stamp_write "$out.stamp" "$want"
fi

# 65535 is the upstream image's user: the sandbox needs no privileges.
build_image pause "pause=$(sha256sum <"$out" | cut -c1-64)" \
	--tag "registry.k8s.io/pause:$PAUSE_TAG" --tag "registry.k8s.io/pause:$KIND_PAUSE_TAG" \
	--add "$out:/pause:0755" --entrypoint '["/pause"]' --user 65535:65535
offline_done
