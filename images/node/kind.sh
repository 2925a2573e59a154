#!/usr/bin/env bash
# Builds the kind CLI (sigs.k8s.io/kind ${KIND_VERSION}) from the Go module
# proxy into $OFFLINE_CACHE/bin/kind/${KIND_VERSION}/kind and prints its path
# as the last line. kind's go.mod has no replace directives, so
# `go install mod@version` builds it as released.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/../.."
# shellcheck source=images/env.sh
source images/env.sh
export PATH=/usr/local/go/bin:$PATH
start=$(date +%s)

out_dir=${OFFLINE_CACHE}/bin/kind/${KIND_VERSION}
want="kind ${KIND_VERSION} $(go env GOVERSION) $(sha256sum <"$0" | cut -d' ' -f1)"
if [ -x "$out_dir/kind" ] && [ "$(cat "$out_dir/.stamp" 2>/dev/null)" = "$want" ]; then
	echo "cached: kind ${KIND_VERSION}" >&2
	echo "$out_dir/kind"
	exit 0
fi
echo "==> building kind ${KIND_VERSION} (cold, ~1.5 min)" >&2
mkdir -p "$out_dir"
GOBIN=$out_dir CGO_ENABLED=0 GOFLAGS=-buildvcs=false nice -n 10 go install -trimpath -ldflags "-s -w" \
	"sigs.k8s.io/kind@${KIND_VERSION}" >&2
"$out_dir/kind" version >&2
echo "$want" >"$out_dir/.stamp"
echo "==> kind ${KIND_VERSION} built in $(($(date +%s) - start)) s" >&2
echo "$out_dir/kind"
