#!/usr/bin/env bash
# Builds the kind node image ${LOCAL_REGISTRY}/node:${KUBERNETES_VERSION} as
# the docker-archive $OFFLINE_CACHE/images/node.tar, with no registry and no
# `docker build`/`docker commit`:
#  - layer 1: a minbase Debian ${DEBIAN_SUITE} rootfs (images/rootfs/rootfs.sh)
#    with the packages of kind's base image (containerd, runc from Debian),
#    kind ${KIND_VERSION}'s images/base files read from the Go module cache,
#    and the setup of kind's Dockerfile (rootfs-hook.sh);
#  - then, written by imgtool: kubeadm/kubelet/kubectl (/usr/bin), crictl,
#    the CNI reference plugins (/opt/cni/bin), /kind/version, and the
#    control-plane image tarballs in /kind/images, which
#    vcf-import-images.service imports into containerd at boot, before
#    kubelet can start.
# Needs (built by their own scripts first; images/build.sh orders them):
# $OFFLINE_CACHE/bin/kubernetes/${KUBERNETES_VERSION}/{kubeadm,kubelet,kubectl}
# and $OFFLINE_CACHE/images/{kube-apiserver,kube-controller-manager,
# kube-scheduler,kube-proxy,etcd,coredns,pause}.tar.
# The image carries no kindnetd and no local-path-provisioner: use it with
# networking.disableDefaultCNI (kind then adds a host-path default
# StorageClass by itself).
set -euo pipefail
# shellcheck source=images/imgtool/lib.sh
source "$(dirname "$(readlink -f "$0")")/../imgtool/lib.sh"
offline_init node
offline_lock node
ref=${LOCAL_REGISTRY}/node:${KUBERNETES_VERSION}
echo "==> node image $ref (cold ~10-15 min, mostly the Debian rootfs)"

images/crictl/build.sh | sed 's/^/  /'
crictl=$BIN/crictl/$CRICTL_VERSION/crictl
make -s plugins PLUGINS_VERSION="$CNI_PLUGINS_VERSION" >/dev/null
cni_dir=$ROOT/bin/cni/$CNI_PLUGINS_VERSION
kind_dir=$(cd / && go mod download -json "sigs.k8s.io/kind@$KIND_VERSION" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
kind_files=$kind_dir/images/base/files
[ -f "$kind_files/usr/local/bin/entrypoint" ] || { echo "node: no kind base files in $kind_files" >&2; exit 1; }

# The rootfs: kind's base packages (images/base/Dockerfile) + containerd,
# runc and socat, which kind builds or carries itself.
pkgs=(
	systemd
	conntrack iptables nftables iproute2 ethtool util-linux mount kmod
	libseccomp2 pigz fuse-overlayfs
	nfs-common open-iscsi
	e2fsprogs
	bash ca-certificates curl jq procps
	containerd runc socat
)
mapfile -t hook_inputs < <(cd "$ROOT" && find images/node/files -type f | LC_ALL=C sort)
rootfs=$(
	export VCF_KIND_BASE=$kind_files VCF_NODE_FILES=$ROOT/images/node/files
	export VCF_SANDBOX_IMAGE=registry.k8s.io/pause:$PAUSE_TAG
	ROOTFS_HOOKS=$ROOT/images/node/rootfs-hook.sh \
		ROOTFS_STAMP_EXTRA="kind=$KIND_VERSION kindfiles=$(cd "$kind_files" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-64) ours=$(hash_files "${hook_inputs[@]}") sandbox=$VCF_SANDBOX_IMAGE" \
		images/rootfs/rootfs.sh node "$DEBIAN_SUITE" "${pkgs[@]}" | tail -n1
)

# Inputs from the other components (checked after the slow rootfs, which
# is cached either way).
kube_bin=$BIN/kubernetes/$KUBERNETES_VERSION
preload=(kube-apiserver kube-controller-manager kube-scheduler kube-proxy etcd coredns pause)
missing=()
for b in kubeadm kubelet kubectl; do
	[ -x "$kube_bin/$b" ] || missing+=("$kube_bin/$b (images/kubernetes/build.sh)")
done
preload_tars=()
for i in "${preload[@]}"; do
	preload_tars+=("$IMAGES/$i.tar")
	case $i in pause | etcd | coredns) producer=$i ;; *) producer=kubernetes ;; esac
	[ -s "$IMAGES/$i.tar" ] || missing+=("$IMAGES/$i.tar (images/$producer/build.sh)")
done
if [ "${#missing[@]}" -gt 0 ]; then
	printf 'node: missing input: %s\n' "${missing[@]}" >&2
	exit 1
fi

# Small staging dirs: the version file and the plugins without make's marker.
stage=$WORK/stage
rm -rf "$stage"
mkdir -p "$stage/cni"
printf '%s\n' "$KUBERNETES_VERSION" >"$stage/version"
find "$cni_dir" -maxdepth 1 -type f ! -name '.*' -exec ln -f -t "$stage/cni/" {} +

add=(
	--add "$stage/version:/kind/version:0644"
	--add "$kube_bin/kubeadm:/usr/bin/kubeadm:0755"
	--add "$kube_bin/kubelet:/usr/bin/kubelet:0755"
	--add "$kube_bin/kubectl:/usr/bin/kubectl:0755"
	--add "$crictl:/usr/local/bin/crictl:0755"
	--add "$stage/cni:/opt/cni/bin"
)
for t in "${preload_tars[@]}"; do
	add+=(--add "$t:/kind/images/$(basename "$t"):0644")
done
echo "==> hashing inputs"
extra=$(cd "$stage" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-64)
extra="stage=$extra $(sha256sum "$rootfs" "$kube_bin"/kube{adm,let,ctl} "$crictl" "${preload_tars[@]}" | cut -c1-64 | tr '\n' ' ')"
build_image node "$extra" --tag "$ref" --base "$rootfs" "${add[@]}" \
	--entrypoint '["/usr/local/bin/entrypoint","/sbin/init"]' \
	--env container=docker --stop-signal 'SIGRTMIN+3' --volume /var \
	--label org.cozystack.vlan-conformance.image=node
echo "==> $ref: $(du -h "$IMAGES/node.tar" | cut -f1) ($IMAGES/node.tar)"
offline_done
