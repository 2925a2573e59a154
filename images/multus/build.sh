#!/usr/bin/env bash
# Builds Multus thick for the offline lane, from the Go module proxy only:
#
#   1. the binaries upstream's hack/build-go.sh builds (multus-daemon,
#      multus-shim, install_multus, ...), static and version-stamped the same
#      way, into $OFFLINE_CACHE/bin/multus/${MULTUS_VERSION}/multus-cni/bin
#   2. the image ${LOCAL_REGISTRY}/multus-cni:${MULTUS_VERSION}
#      ($OFFLINE_CACHE/images/multus.tar): upstream's images/Dockerfile.thick
#      layout on a minimal Debian rootfs, plus the CNI reference plugins
#      ${CNI_PLUGINS_VERSION} at /cni-plugins for the suite's stager init
#      container (which needs /bin/sh, cp, chmod and mv -T from the rootfs)
#   3. upstream's deployments/multus-daemonset-thick.yml with every image set
#      to that image, IfNotPresent, at
#      $OFFLINE_CACHE/manifests/multus/${MULTUS_VERSION}/multus-daemonset-thick.yml
#      (the layout the suite's --manifests-dir expects)
#
# Each step is skipped ("cached: ...") when the stamp next to its output
# matches the version and the sha256 of its inputs.
set -euo pipefail
# shellcheck source=images/imgtool/lib.sh
source "$(dirname "$0")/../imgtool/lib.sh"
offline_init multus
offline_lock multus

mod=gopkg.in/k8snetworkplumbingwg/multus-cni.v4
here=images/multus
tree=$BIN/multus/$MULTUS_VERSION/multus-cni # = /usr/src/multus-cni in the image
image_ref=$LOCAL_REGISTRY/multus-cni:$MULTUS_VERSION
manifest=$CACHE/manifests/multus/$MULTUS_VERSION/multus-daemonset-thick.yml
plugins_dir=bin/cni/$CNI_PLUGINS_VERSION
# What upstream's hack/build-go.sh builds, as <package dir>:<binary name>.
cmds=(multus:multus multus-daemon:multus-daemon multus-shim:multus-shim
	install_multus:install_multus thin_entrypoint:thin_entrypoint
	kubeconfig_generator:kubeconfig_generator cert-approver:cert-approver
	passthru-cni:passthru)
# /cni-plugins holds exactly the 14 the guide says staging installs, as
# Cozystack's multus image does (its Dockerfile extracts only those from the
# release): the image is half of the stager's subject.
mapfile -t plugins <fixtures/stager/staged-plugins.txt

# The pinned version must be the one go.mod builds.
have=$(cd "$here" && go list -m -f '{{.Version}}' "$mod")
if [ "$have" != "$MULTUS_VERSION" ]; then
	echo "multus: $here/go.mod has $mod $have, versions.env pins $MULTUS_VERSION;" >&2
	echo "  run: (cd $here && go get $mod@$MULTUS_VERSION && go mod tidy)" >&2
	exit 1
fi

# --- 1. binaries ------------------------------------------------------------
info=$(cd "$here" && go mod download -json "$mod")
mod_dir=$(sed -n 's/^\t"Dir": "\(.*\)",$/\1/p' <<<"$info")
info_file=$(sed -n 's/^\t"Info": "\(.*\)",$/\1/p' <<<"$info")
if [ ! -d "$mod_dir" ] || [ ! -f "$info_file" ]; then
	echo "multus: go mod download gave no Dir/Info for $mod" >&2
	exit 1
fi
# The stamps upstream's build takes from git: the tag's commit and time, as
# the module proxy recorded them (upstream's default when it did not).
commit=$(grep -o '"Hash":"[0-9a-f]*"' "$info_file" | cut -d'"' -f4 || true)
commit=${commit:-unknown commit}
date=$(date -u -d "$(grep -o '"Time":"[^"]*"' "$info_file" | cut -d'"' -f4)" --iso-8601=seconds)
pkg=$mod/pkg/multus
# Upstream's ldflags, plus -s -w: no symbol tables or DWARF, a third smaller
# (every node imports this image).
ldflags="-s -w -X $pkg.version=$MULTUS_VERSION -X $pkg.commit=$commit -X $pkg.gitTreeState=clean -X $pkg.releaseStatus=,released -X $pkg.date=$date"

want=$(printf 'version=%s\ncmds=%s\nldflags=%s\ngo=%s\nsrc=%s\n' "$MULTUS_VERSION" "${cmds[*]}" "$ldflags" \
	"$(go env GOVERSION)" "$(hash_files "$here/go.mod" "$here/go.sum")")
if stamp_ok "$tree.stamp" "$want" "$tree/bin/multus-daemon"; then
	echo "cached: multus $MULTUS_VERSION binaries ($tree/bin)"
else
	t=$SECONDS
	echo "==> building multus $MULTUS_VERSION binaries (cold ~20 min on a busy 2-core box, warm Go cache ~2 min)"
	tmp=$WORK/multus-cni.tmp
	rm -rf "$tmp" && mkdir -p "$tmp/bin"
	pkgs=()
	for c in "${cmds[@]}"; do pkgs+=("$mod/cmd/${c%%:*}"); done
	# One go build for all: the commands share most of their dependencies.
	(cd "$here" && nice -n 10 go build -trimpath -ldflags "$ldflags" -o "$tmp/bin/" "${pkgs[@]}")
	for c in "${cmds[@]}"; do
		[ "${c%%:*}" = "${c#*:}" ] || mv "$tmp/bin/${c%%:*}" "$tmp/bin/${c#*:}"
	done
	install -m 0644 "$mod_dir/LICENSE" "$tmp/LICENSE"
	chmod 0755 "$tmp" "$tmp/bin"
	rm -rf "$tree" && mkdir -p "$(dirname "$tree")" && mv "$tmp" "$tree"
	stamp_write "$tree.stamp" "$want"
	echo "    built in $((SECONDS - t)) s"
fi

# --- CNI reference plugins (the repository's own make target) ---------------
if make -q PLUGINS_VERSION="$CNI_PLUGINS_VERSION" "$plugins_dir/.done" 2>/dev/null; then
	echo "cached: CNI reference plugins $CNI_PLUGINS_VERSION ($plugins_dir)"
else
	echo "==> CNI reference plugins $CNI_PLUGINS_VERSION (make $plugins_dir/.done; cold ~3 min)"
	make --no-print-directory PLUGINS_VERSION="$CNI_PLUGINS_VERSION" "$plugins_dir/.done" | sed 's/^/    /'
fi
# The image gets exactly these (not make's .done marker): hard links, so
# staging them costs nothing.
staged=$WORK/cni-plugins
rm -rf "$staged" && mkdir -p "$staged" && chmod 0755 "$staged"
for p in "${plugins[@]}"; do
	[ -x "$plugins_dir/$p" ] || { echo "multus: $plugins_dir/$p missing after make" >&2; exit 1; }
	ln "$plugins_dir/$p" "$staged/$p" 2>/dev/null || cp -p "$plugins_dir/$p" "$staged/$p"
done

# --- 2. image ---------------------------------------------------------------
echo "==> rootfs multus ($DEBIAN_SUITE minbase: /bin/sh, coreutils)"
rootfs=$(images/rootfs/rootfs.sh multus "$DEBIAN_SUITE" | tail -n1)
# Dockerfile.thick's layout: bin + LICENSE under /usr/src/multus-cni and
# cert-approver also at / (here a link to the same file, not a second copy),
# then the plugins.
ln -sfn /usr/src/multus-cni/bin/cert-approver "$WORK/cert-approver"
build_image multus "files=$(hash_files "$rootfs" "$tree"/bin/* "$tree/LICENSE" "$staged"/*)" \
	--tag "$image_ref" --base "$rootfs" \
	--add "$tree:/usr/src/multus-cni" \
	--add "$WORK/cert-approver:/cert-approver" \
	--add "$staged:/cni-plugins" \
	--entrypoint '["/usr/src/multus-cni/bin/multus-daemon"]' --workdir / \
	--label org.opencontainers.image.source=https://github.com/k8snetworkplumbingwg/multus-cni \
	--label org.opencontainers.image.version="$MULTUS_VERSION"

# --- 3. manifest ------------------------------------------------------------
src=$mod_dir/deployments/multus-daemonset-thick.yml
want=$(printf 'image=%s\nsrc=%s\n' "$image_ref" "$(hash_files "$src" "$here/manifest/main.go" "$here/go.mod" "$here/go.sum")")
if stamp_ok "$manifest.stamp" "$want" "$manifest"; then
	echo "cached: manifest $manifest"
else
	echo "==> writing manifest $manifest (~20 s)"
	(cd "$here" && nice -n 10 go build -trimpath -o "$WORK/manifest" ./manifest)
	"$WORK/manifest" -in "$src" -out "$manifest" -image "$image_ref" \
		-source "$mod@$MULTUS_VERSION deployments/multus-daemonset-thick.yml"
	stamp_write "$manifest.stamp" "$want"
fi
echo "    image $image_ref ($IMAGES/multus.tar), manifest $manifest"
offline_done
