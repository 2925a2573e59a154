#!/usr/bin/env bash
# Builds Kubernetes ${KUBERNETES_VERSION} from the Go module proxy:
#   binaries  kubeadm kubelet kubectl kube-apiserver kube-controller-manager
#             kube-scheduler kube-proxy (static, version-stamped)
#             -> $OFFLINE_CACHE/bin/kubernetes/${KUBERNETES_VERSION}/
#   images    registry.k8s.io/kube-{apiserver,controller-manager,scheduler,proxy}
#             -> $OFFLINE_CACHE/images/<name>.tar
#
#   images/kubernetes/build.sh [binaries|images|all]   (default: all)
#
# kube-proxy's image is based on a Debian rootfs (iptables, conntrack) from
# images/rootfs/rootfs.sh; the other three hold only their static binary.
# Cached by stamps: a second run rebuilds nothing.
set -euo pipefail
# shellcheck source=images/imgtool/lib.sh
source "$(dirname "$0")/../imgtool/lib.sh"
offline_init kubernetes
offline_lock kubernetes

what=${1:-all}
case "$what" in binaries | images | all) ;; *)
	echo "usage: $0 [binaries|images|all]" >&2
	exit 2
	;;
esac

mod_dir=$ROOT/images/kubernetes
out_dir=$BIN/kubernetes/$KUBERNETES_VERSION
cmds=(kubeadm kubelet kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy)

# sync_gomod: kubernetes replaces its staging modules with ./staging paths;
# replace each with its published release (v1.X.Y -> v0.X.Y), taking the list
# from kubernetes' own go.mod so a version bump cannot miss one.
sync_gomod() {
	local info kmod staging_version before m
	local -a staging args
	info=$(cd "$mod_dir" && go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION")
	kmod=$(sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p' <<<"$info")
	# The release's publication time: the binaries' fixed build date.
	BUILD_DATE=$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$(sed -n 's/^\t"Info": "\(.*\)",$/\1/p' <<<"$info")")
	[ -n "$BUILD_DATE" ] || {
		echo "no release time for k8s.io/kubernetes@$KUBERNETES_VERSION" >&2
		exit 1
	}
	mapfile -t staging < <(sed -n 's|^\t\(k8s.io/[^ ]*\) => \./staging/src/.*|\1|p' "$kmod")
	[ "${#staging[@]}" -gt 0 ] || {
		echo "no staging replaces found in $kmod" >&2
		exit 1
	}
	staging_version=v0.${KUBERNETES_VERSION#v1.}
	args=("-require=k8s.io/kubernetes@$KUBERNETES_VERSION")
	for m in "${staging[@]}"; do
		args+=("-replace=$m=$m@$staging_version")
	done
	before=$(cat "$mod_dir/go.mod")
	(cd "$mod_dir" && go mod edit "${args[@]}")
	if [ "$before" != "$(cat "$mod_dir/go.mod")" ] || [ ! -s "$mod_dir/go.sum" ]; then
		echo "==> go.mod changed: go mod tidy (downloads the dependencies, ~2 min cold)"
		(cd "$mod_dir" && go mod tidy)
	fi
	echo "go.mod: k8s.io/kubernetes $KUBERNETES_VERSION, ${#staging[@]} staging modules -> $staging_version"
}

# ldflags as kubernetes' hack/lib/version.sh sets them, for both version
# packages; kubeadm refuses to work with an unstamped v0.0.0 build. The git
# commit is unknown outside a git checkout: empty rather than the
# "$Format:%H$" placeholder.
ldflags() {
	local minor=${KUBERNETES_VERSION#v1.} p flags="-s -w"
	minor=${minor%%.*}
	for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		flags+=" -X $p.gitVersion=$KUBERNETES_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
		flags+=" -X $p.gitTreeState=clean -X $p.buildDate=$BUILD_DATE -X $p.gitCommit="
	done
	printf '%s' "$flags"
}

build_binaries() {
	local ld tags=selinux,notest,grpcnotrace want c pkgs=()
	ld=$(ldflags)
	want=$(printf 'go=%s\nsrc=%s\ntags=%s\nldflags=%s\n' "$(go env GOVERSION)" \
		"$(hash_files images/kubernetes/go.mod images/kubernetes/go.sum images/kubernetes/tools.go)" \
		"$tags" "$ld")
	if stamp_ok "$out_dir/.stamp" "$want" "${cmds[@]/#/$out_dir/}"; then
		echo "cached: kubernetes binaries ($out_dir)"
		return 0
	fi
	echo "==> building ${cmds[*]} $KUBERNETES_VERSION (cold ~25 min on 2 busy cores, warm ~3 min)"
	for c in "${cmds[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
	rm -rf "$out_dir.tmp"
	mkdir -p "$out_dir.tmp"
	# Same tags as kubernetes' release build (hack/lib/golang.sh).
	(cd "$mod_dir" && nice -n 10 go build -trimpath -tags "$tags" -ldflags "$ld" -o "$out_dir.tmp/" "${pkgs[@]}")
	for c in kubelet kube-apiserver kube-controller-manager kube-scheduler kube-proxy; do
		got=$("$out_dir.tmp/$c" --version) # capture, then match: no SIGPIPE race
		[ "$got" = "Kubernetes $KUBERNETES_VERSION" ] || {
			echo "$c does not report $KUBERNETES_VERSION" >&2
			exit 1
		}
	done
	rm -rf "$out_dir"
	mv "$out_dir.tmp" "$out_dir"
	stamp_write "$out_dir/.stamp" "$want"
	ls -l "$out_dir"
}

# verify_kubeadm: the version is stamped, and kubeadm asks for exactly the
# image names the offline lane writes (versions.env).
verify_kubeadm() {
	local got want
	got=$("$out_dir/kubeadm" version -o short)
	[ "$got" = "$KUBERNETES_VERSION" ] || {
		echo "kubeadm version -o short says '$got', want $KUBERNETES_VERSION" >&2
		exit 1
	}
	# The machine format, read whole: `| grep -q` raced kubectl's later
	# lines into SIGPIPE under pipefail on a busy machine (issue 11).
	got=$("$out_dir/kubectl" version --client -o json)
	grep -q "\"gitVersion\": *\"$KUBERNETES_VERSION\"" <<<"$got" || {
		echo "kubectl does not report $KUBERNETES_VERSION: $got" >&2
		exit 1
	}
	got=$("$out_dir/kubeadm" config images list --kubernetes-version "$KUBERNETES_VERSION" | LC_ALL=C sort)
	want=$(printf '%s\n' \
		"registry.k8s.io/kube-apiserver:$KUBERNETES_VERSION" \
		"registry.k8s.io/kube-controller-manager:$KUBERNETES_VERSION" \
		"registry.k8s.io/kube-scheduler:$KUBERNETES_VERSION" \
		"registry.k8s.io/kube-proxy:$KUBERNETES_VERSION" \
		"registry.k8s.io/coredns/coredns:$COREDNS_VERSION" \
		"registry.k8s.io/pause:$PAUSE_TAG" \
		"registry.k8s.io/etcd:$ETCD_IMAGE_TAG" | LC_ALL=C sort)
	if [ "$got" != "$want" ]; then
		echo "kubeadm $KUBERNETES_VERSION expects other images than images/versions.env pins:" >&2
		diff <(echo "$want") <(echo "$got") >&2 || true
		exit 1
	fi
	echo "verified: kubeadm version $KUBERNETES_VERSION; its image list matches images/versions.env"
}

build_images() {
	local c rootfs tmp
	# Static binaries need no base, only a /tmp.
	tmp=$(tmp_dir)
	# kubeadm's static pods call the binaries by name: they are on PATH.
	for c in kube-apiserver kube-controller-manager kube-scheduler; do
		build_image "$c" "bin=$(sha256sum <"$out_dir/$c" | cut -c1-64)" \
			--tag "registry.k8s.io/$c:$KUBERNETES_VERSION" \
			--add "$tmp:/tmp" --add "$out_dir/$c:/usr/local/bin/$c:0755" \
			--entrypoint "[\"/usr/local/bin/$c\"]"
	done
	# kube-proxy programs iptables and conntrack: Debian userland underneath.
	echo "==> kube-proxy rootfs (images/rootfs/rootfs.sh)"
	rootfs=$(images/rootfs/rootfs.sh kube-proxy "$DEBIAN_SUITE" iptables conntrack kmod | tail -n1)
	build_image kube-proxy "bin=$(sha256sum <"$out_dir/kube-proxy" | cut -c1-64) rootfs=$(sha256sum <"$rootfs" | cut -c1-64)" \
		--tag "registry.k8s.io/kube-proxy:$KUBERNETES_VERSION" --base "$rootfs" \
		--add "$out_dir/kube-proxy:/usr/local/bin/kube-proxy:0755" \
		--entrypoint '["/usr/local/bin/kube-proxy"]'
}

# A function, so bash has read all of it before anything runs.
main() {
	sync_gomod
	build_binaries
	if [ "$what" != images ]; then
		verify_kubeadm
	fi
	if [ "$what" != binaries ]; then
		build_images
	fi
	offline_done
}

main
