#!/usr/bin/env bash
# Builds crictl (sigs.k8s.io/cri-tools ${CRICTL_VERSION}) from the Go module
# proxy, static, into $OFFLINE_CACHE/bin/crictl/${CRICTL_VERSION}/crictl.
# cri-tools' go.mod has no replace directives, so `go install mod@version`
# builds it as released; no module of our own is needed.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/../.."
# shellcheck source=images/env.sh
source images/env.sh
export PATH=/usr/local/go/bin:$PATH
start=$(date +%s)

out_dir=${OFFLINE_CACHE}/bin/crictl/${CRICTL_VERSION}
stamp=$out_dir/.stamp
want="crictl ${CRICTL_VERSION} $(go env GOVERSION) $(sha256sum <"$0" | cut -d' ' -f1)"
if [ -x "$out_dir/crictl" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
	echo "cached: crictl ${CRICTL_VERSION} ($out_dir/crictl)"
	exit 0
fi

echo "==> building crictl ${CRICTL_VERSION} (cold, ~2 min)"
mkdir -p "$out_dir"
GOBIN=$out_dir CGO_ENABLED=0 GOFLAGS=-buildvcs=false nice -n 10 go install -trimpath \
	-ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=${CRICTL_VERSION}" \
	"sigs.k8s.io/cri-tools/cmd/crictl@${CRICTL_VERSION}"
"$out_dir/crictl" --version
echo "$want" >"$stamp"
echo "==> crictl ${CRICTL_VERSION}: $out_dir/crictl in $(($(date +%s) - start)) s"
