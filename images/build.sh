#!/usr/bin/env bash
# `make offline-images`: every image of the offline cluster lane, from the Go
# module proxy and Debian packages only (versions: images/versions.env).
# Each component caches by version and inputs, so a second run rebuilds
# nothing. Usage: images/build.sh [pod|vm]  (pod: kind + Multus, the pod
# lane; vm: also KubeVirt and the guest image). Prints a timing table.
set -euo pipefail
cd "$(dirname "$0")/.."
lane=${1:-pod}
case $lane in
pod) components=(imgtool pause kubernetes etcd coredns crictl node multus conformance) ;;
vm) components=(imgtool pause kubernetes etcd coredns crictl node multus conformance kubevirt guest-debian) ;;
*) echo "usage: $0 [pod|vm]" >&2; exit 2 ;;
esac
make -s plugins >/dev/null # the reference plugins the node and Multus images carry

timing=()
start=$SECONDS
for c in "${components[@]}"; do
	script=images/$c/build.sh
	if [ ! -x "$script" ]; then
		echo "images/build.sh: $script is missing" >&2
		exit 1
	fi
	t=$SECONDS
	echo "=== $c"
	rc=0
	"$script" || rc=$?
	timing+=("$(printf '%-12s %5d s' "$c" $((SECONDS - t)))")
	echo "=== $c: $((SECONDS - t)) s"
	if [ "$rc" -ne 0 ]; then
		# Every step before this one is cached; name the step and its re-run.
		echo "!!! offline images: step '$c' failed (exit $rc) after $((SECONDS - t)) s." >&2
		echo "!!! re-run only that step with: $script   (then the rest with: make offline-images${lane:+ LANE=$lane})" >&2
		exit "$rc"
	fi
done
echo "=== offline images ($lane lane): $((SECONDS - start)) s"
printf '  %s\n' "${timing[@]}"
