#!/usr/bin/env bash
# Builds etcd and etcdctl ${ETCD_VERSION} from the Go module proxy (wrapper
# mains in cmd/) and the image registry.k8s.io/etcd:${ETCD_IMAGE_TAG}
# -> $OFFLINE_CACHE/bin/etcd/${ETCD_VERSION}/, $OFFLINE_CACHE/images/etcd.tar.
# kubeadm's static pod runs `etcd --flags...` by name and probes it over HTTP
# (/livez, /readyz on the metrics port 2381), so the image needs no shell.
set -euo pipefail
# shellcheck source=images/imgtool/lib.sh
source "$(dirname "$0")/../imgtool/lib.sh"
offline_init etcd
offline_lock etcd

main() {
	local out_dir=$BIN/etcd/$ETCD_VERSION want
	# The release's go.mod must be what the wrapper builds.
	grep -q "go.etcd.io/etcd/server/v3 $ETCD_VERSION\$" images/etcd/go.mod || {
		echo "images/etcd/go.mod does not require go.etcd.io/etcd/server/v3 $ETCD_VERSION:" >&2
		echo "  (cd images/etcd && go get go.etcd.io/etcd/server/v3@$ETCD_VERSION go.etcd.io/etcd/etcdctl/v3@$ETCD_VERSION && go mod tidy)" >&2
		exit 1
	}
	want=$(printf 'go=%s\nsrc=%s\n' "$(go env GOVERSION)" \
		"$(hash_files images/etcd/go.mod images/etcd/go.sum images/etcd/cmd/etcd/main.go images/etcd/cmd/etcdctl/main.go)")
	if stamp_ok "$out_dir/.stamp" "$want" "$out_dir/etcd" "$out_dir/etcdctl"; then
		echo "cached: etcd binaries ($out_dir)"
	else
		echo "==> building etcd, etcdctl $ETCD_VERSION (cold ~3 min)"
		rm -rf "$out_dir.tmp"
		mkdir -p "$out_dir.tmp"
		(cd images/etcd && nice -n 10 go build -trimpath -ldflags '-s -w' -o "$out_dir.tmp/" ./cmd/etcd ./cmd/etcdctl)
		# Capture, then match: `grep -q` closing the pipe early would kill the
		# writer with SIGPIPE and fail the pipeline under pipefail (issue 11).
		got=$("$out_dir.tmp/etcd" --version)
		grep -qx "etcd Version: ${ETCD_VERSION#v}" <<<"$got" || {
			echo "etcd does not report ${ETCD_VERSION#v}" >&2
			exit 1
		}
		rm -rf "$out_dir"
		mv "$out_dir.tmp" "$out_dir"
		stamp_write "$out_dir/.stamp" "$want"
	fi

	build_image etcd "bin=$(cat "$out_dir/etcd" "$out_dir/etcdctl" | sha256sum | cut -c1-64)" \
		--tag "registry.k8s.io/etcd:$ETCD_IMAGE_TAG" \
		--add "$(tmp_dir):/tmp" \
		--add "$out_dir/etcd:/usr/local/bin/etcd:0755" \
		--add "$out_dir/etcdctl:/usr/local/bin/etcdctl:0755" \
		--entrypoint '["/usr/local/bin/etcd"]'
	offline_done
}

main "$@"
