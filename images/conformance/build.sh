#!/usr/bin/env bash
# Builds the suite's own image, no base: the driver (cmd/conformance,
# static) at /conformance, the compiled suite and the fixtures it reads in
# /work (its working directory, so the run's defaults find them). An
# existing cluster's nodes run it as the node agent (`conformance node
# wait`, --node-agent-image); `conformance certify` runs the whole suite in
# the cluster from it (`conformance job`, framework/platform/cluster/
# suitejob). Tagged by its content, so a cluster never runs an agent older
# than the suite asking it: -> $OFFLINE_CACHE/images/conformance.tar and
# its reference in conformance.ref.
set -euo pipefail
# shellcheck source=images/imgtool/lib.sh
source "$(dirname "$0")/../imgtool/lib.sh"
offline_init conformance
offline_lock conformance

# Its own build, CGO_ENABLED=0 (offline_init): the image has no libc. The
# flags are make's, so the build cache is shared with bin/conformance.
out=$BIN/conformance/conformance
suite=$BIN/conformance/suites.test
mkdir -p "$(dirname "$out")"
go build -o "$out" ./cmd/conformance
go test -c -o "$suite" ./suites
# The image's layout (this script) is content too.
sum=$( (sha256sum "$out" "$suite" images/conformance/build.sh | cut -c1-64 && find fixtures -type f -print0 | sort -z | xargs -0 sha256sum) | sha256sum | cut -c1-64)
ref=$LOCAL_REGISTRY/conformance:${sum:0:12}
# 65534 (nobody) unless told otherwise: the agent's DaemonSet runs it as
# root, for the two capabilities it adds (nodeagent.Render says why). Run
# with no command it is go-runner's conformance image (Hydrophone's
# --conformance-image): the in-cluster run, with /tmp, /run (the machine's
# run lock) and the run's .cache writable where a runner mounts no emptyDir
# on them.
tmp=$(tmp_dir)
build_image conformance "conformance=$sum" --tag "$ref" \
	--add "$out:/conformance:0755" --add "$suite:/work/bin/suites.test:0755" --add "fixtures:/work/fixtures" \
	--add "$tmp:/tmp" --add "$tmp:/run" --add "$tmp:/work/.cache" --env HOME=/tmp --env VCF_CACHE=/tmp/cache \
	--workdir /work --entrypoint '["/conformance"]' --cmd '["job"]' --user 65534:65534
printf '%s\n' "$ref" >"$IMAGES/conformance.ref"
echo "==> conformance image: $ref"
offline_done
