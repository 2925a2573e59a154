#!/usr/bin/env bash
# Builds CoreDNS ${COREDNS_VERSION} from the Go module proxy (main.go: only
# the plugins kubeadm's Corefile uses) and the image
# registry.k8s.io/coredns/coredns:${COREDNS_VERSION}
# -> $OFFLINE_CACHE/bin/coredns/${COREDNS_VERSION}/coredns,
#    $OFFLINE_CACHE/images/coredns.tar.
# The image runs as root: kubeadm's Deployment sets no runAsUser, drops all
# capabilities but NET_BIND_SERVICE and makes the root filesystem read-only,
# which is all port 53 needs. (Upstream's image runs as nonroot with a file
# capability on /coredns instead.)
set -euo pipefail
# shellcheck source=images/imgtool/lib.sh
source "$(dirname "$0")/../imgtool/lib.sh"
offline_init coredns
offline_lock coredns

# The directives of kubeadm's default Corefile, plus log.
plugins=(cache errors forward health kubernetes loadbalance log loop prometheus ready reload)

main() {
	local out_dir=$BIN/coredns/$COREDNS_VERSION want have p
	grep -q "github.com/coredns/coredns $COREDNS_VERSION\$" images/coredns/go.mod || {
		echo "images/coredns/go.mod does not require github.com/coredns/coredns $COREDNS_VERSION:" >&2
		echo "  (cd images/coredns && go get github.com/coredns/coredns@$COREDNS_VERSION && go mod tidy)" >&2
		exit 1
	}
	want=$(printf 'go=%s\nsrc=%s\n' "$(go env GOVERSION)" \
		"$(hash_files images/coredns/go.mod images/coredns/go.sum images/coredns/main.go)")
	if stamp_ok "$out_dir/.stamp" "$want" "$out_dir/coredns"; then
		echo "cached: coredns binary ($out_dir)"
	else
		echo "==> building coredns $COREDNS_VERSION (cold ~4 min)"
		mkdir -p "$out_dir"
		(cd images/coredns && nice -n 10 go build -trimpath -ldflags '-s -w' -o "$out_dir/coredns.tmp" .)
		got=$("$out_dir/coredns.tmp" -version) # capture, then match: no SIGPIPE race
		grep -qx "CoreDNS-${COREDNS_VERSION#v}" <<<"$got" || {
			echo "coredns does not report ${COREDNS_VERSION#v}" >&2
			exit 1
		}
		have=$("$out_dir/coredns.tmp" -plugins)
		for p in "${plugins[@]}"; do
			grep -qx "$p" <<<"$have" || {
				echo "coredns lacks plugin $p" >&2
				exit 1
			}
		done
		mv "$out_dir/coredns.tmp" "$out_dir/coredns"
		stamp_write "$out_dir/.stamp" "$want"
	fi

	build_image coredns "bin=$(sha256sum <"$out_dir/coredns" | cut -c1-64)" \
		--tag "registry.k8s.io/coredns/coredns:$COREDNS_VERSION" \
		--add "$out_dir/coredns:/coredns:0755" \
		--entrypoint '["/coredns"]'
	offline_done
}

main "$@"
