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
# COZYSTACK=DIR (a checkout of cozystack/cozystack) makes it the release's
# image instead: its packages/system/multus/images/multus-cni/Dockerfile
# gives the Multus version, the patches applied to it and the plugin names
# at /cni-plugins (read as framework/cozystack/dockerfile.go reads them);
# the pins must equal its versions. Unset or empty: upstream unpatched and
# fixtures/stager/staged-plugins.txt. Either way
# $OFFLINE_CACHE/images/multus.provenance records what was built, which
# the suite checks against --cozystack.
#
# Each step is skipped ("cached: ...") when the stamp next to its output
# matches the version and the sha256 of its inputs.
set -euo pipefail
# Resolved before offline_init, which cds to the repository root.
release_dir=
if [ -n "${COZYSTACK:-}" ]; then
	release_dir=$(cd "$COZYSTACK" && pwd) || { echo "multus: COZYSTACK=$COZYSTACK is not a directory" >&2; exit 1; }
fi
# shellcheck source=images/imgtool/lib.sh
source "$(dirname "$0")/../imgtool/lib.sh"
offline_init multus
offline_lock multus

mod=gopkg.in/k8snetworkplumbingwg/multus-cni.v4
here=images/multus
image_ref=$LOCAL_REGISTRY/multus-cni:$MULTUS_VERSION
manifest=$CACHE/manifests/multus/$MULTUS_VERSION/multus-daemonset-thick.yml
plugins_dir=bin/cni/$CNI_PLUGINS_VERSION
# What upstream's hack/build-go.sh builds, as <package dir>:<binary name>.
cmds=(multus:multus multus-daemon:multus-daemon multus-shim:multus-shim
	install_multus:install_multus thin_entrypoint:thin_entrypoint
	kubeconfig_generator:kubeconfig_generator cert-approver:cert-approver
	passthru-cni:passthru)

# read_dockerfile FILE: sets rel_multus, rel_plugins, plugins and patches
# from the release's Dockerfile, or fails naming it. Mirrors
# framework/cozystack/dockerfile.go: the last `ARG NAME=value` wins; the
# names are the ./<name> words of the first `tar` command with `-C
# /cni-plugins`, across line continuations; patches/*.diff (byte order, as
# the build's shell glob) only when it runs `git apply /patches/`.
dockerfile_arg() {
	awk -v n="$2=" '$1 == "ARG" && index($2, n) == 1 && length($2) > length(n) { v = substr($2, length(n) + 1) } END { print v }' "$1"
}
read_dockerfile() {
	local df=$1
	rel_multus=$(dockerfile_arg "$df" VERSION)
	rel_plugins=$(dockerfile_arg "$df" CNI_PLUGINS_VERSION)
	if [ -z "$rel_multus" ] || [ -z "$rel_plugins" ]; then
		echo "multus: $df: no ARG VERSION=... and ARG CNI_PLUGINS_VERSION=... defaults" >&2
		exit 1
	fi
	mapfile -t plugins < <(awk '
		function scan(line,   n, c, i, m, f, j) {
			n = split(line, c, ";")
			for (i = 1; i <= n; i++) {
				m = split(c[i], f)
				if (m == 0 || f[1] != "tar") continue
				for (j = 1; j < m; j++) if (f[j] == "-C" && f[j + 1] == "/cni-plugins") break
				if (j == m) continue
				for (j = 1; j <= m; j++) if (f[j] ~ /^\.\/[A-Za-z0-9._-]+$/) print substr(f[j], 3)
				return 1
			}
			return 0
		}
		done { next }
		/\\$/ { buf = buf substr($0, 1, length($0) - 1) " "; next }
		{ done = scan(buf $0); buf = "" }
		END { if (!done && buf != "") scan(buf) }' "$df")
	if [ "${#plugins[@]}" -eq 0 ]; then
		echo "multus: $df: no \`tar ... -C /cni-plugins ... ./<name>...\` line naming the plugins it extracts" >&2
		exit 1
	fi
	patches=()
	if grep -qF 'git apply /patches/' "$df"; then
		mapfile -t patches < <(find "$(dirname "$df")/patches" -mindepth 1 -maxdepth 1 -name '*.diff' 2>/dev/null | LC_ALL=C sort)
		# Its build would fail on an unmatched glob; so does this one.
		if [ "${#patches[@]}" -eq 0 ]; then
			echo "multus: $df runs git apply /patches/*.diff but $(dirname "$df")/patches has no *.diff" >&2
			exit 1
		fi
	fi
}

patches=()
if [ -n "$release_dir" ]; then
	dockerfile=$release_dir/packages/system/multus/images/multus-cni/Dockerfile
	[ -f "$dockerfile" ] || { echo "multus: COZYSTACK=$COZYSTACK has no $dockerfile" >&2; exit 1; }
	read_dockerfile "$dockerfile"
	# The Go pins (go.mod, bin/cni/<version>) follow versions.env, so a
	# release of other versions needs a bump here, not a silent mismatch.
	bump=0
	if [ "$rel_multus" != "$MULTUS_VERSION" ]; then
		echo "multus: $dockerfile has ARG VERSION=$rel_multus, images/versions.env pins MULTUS_VERSION=$MULTUS_VERSION;" >&2
		echo "  bump MULTUS_VERSION=$rel_multus in images/versions.env, then: (cd $here && go get $mod@$rel_multus && go mod tidy)" >&2
		bump=1
	fi
	if [ "$rel_plugins" != "$CNI_PLUGINS_VERSION" ]; then
		echo "multus: $dockerfile has ARG CNI_PLUGINS_VERSION=$rel_plugins, images/versions.env pins CNI_PLUGINS_VERSION=$CNI_PLUGINS_VERSION;" >&2
		echo "  bump CNI_PLUGINS_VERSION=$rel_plugins in images/versions.env (make plugins then builds bin/cni/$rel_plugins)" >&2
		bump=1
	fi
	[ "$bump" -eq 0 ] || exit 1
	source_name=$dockerfile
	dockerfile_sha256=$(sha256sum <"$dockerfile" | cut -c1-64)
else
	# /cni-plugins holds exactly the 14 the guide says staging installs, as
	# Cozystack's multus image does: the image is half of the stager's subject.
	mapfile -t plugins <fixtures/stager/staged-plugins.txt
	source_name=fixtures
	dockerfile_sha256=
fi
patch_list=()
for p in "${patches[@]}"; do patch_list+=("$(basename "$p"):$(sha256sum <"$p" | cut -c1-64)"); done
# Patched binaries get a directory of their own, so switching between the
# release and upstream does not rebuild either.
tree_key=$MULTUS_VERSION
if [ "${#patches[@]}" -gt 0 ]; then
	tree_key=$MULTUS_VERSION+$(printf '%s\n' "${patch_list[@]}" | sha256sum | cut -c1-12)
fi
tree=$BIN/multus/$tree_key/multus-cni # = /usr/src/multus-cni in the image
echo "==> multus from $source_name: multus $MULTUS_VERSION, ${#patches[@]} patch(es)${patch_list:+ (${patch_list[*]%%:*})}, CNI plugins $CNI_PLUGINS_VERSION: ${plugins[*]}"

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
# The release applies its patches uncommitted, so its build-go.sh stamps
# the tree dirty.
tree_state=clean
[ "${#patches[@]}" -eq 0 ] || tree_state=dirty
# Upstream's ldflags, plus -s -w: no symbol tables or DWARF, a third smaller
# (every node imports this image).
ldflags="-s -w -X $pkg.version=$MULTUS_VERSION -X $pkg.commit=$commit -X $pkg.gitTreeState=$tree_state -X $pkg.releaseStatus=,released -X $pkg.date=$date"

want=$(printf 'version=%s\ncmds=%s\nldflags=%s\ngo=%s\nsrc=%s\n' "$MULTUS_VERSION" "${cmds[*]}" "$ldflags" \
	"$(go env GOVERSION)" "$(hash_files "$here/go.mod" "$here/go.sum")")
# Only when patched: an unpatched build keeps the stamp it always had.
[ "${#patches[@]}" -eq 0 ] || want+=$'\n'"patches=${patch_list[*]}"
if stamp_ok "$tree.stamp" "$want" "$tree/bin/multus-daemon"; then
	echo "cached: multus $MULTUS_VERSION binaries ($tree/bin)"
else
	t=$SECONDS
	echo "==> building multus $MULTUS_VERSION binaries (cold ~20 min on a busy 2-core box, warm Go cache ~2 min)"
	tmp=$WORK/multus-cni.tmp
	rm -rf "$tmp" && mkdir -p "$tmp/bin"
	pkgs=()
	for c in "${cmds[@]}"; do pkgs+=("$mod/cmd/${c%%:*}"); done
	src=$mod_dir
	modfile=()
	if [ "${#patches[@]}" -gt 0 ]; then
		# The module cache is read-only and shared: patch a copy, and build
		# through a copy of go.mod that replaces the module with it.
		src=$WORK/src/multus-cni
		rm -rf "$WORK/src" "$WORK/modfile" && mkdir -p "$WORK/src" "$WORK/modfile"
		cp -R "$mod_dir" "$src" && chmod -R u+w "$src"
		echo "    applying ${#patches[@]} patch(es) to $src"
		# git apply as the Dockerfile does (all or none); the ceiling keeps
		# git from taking an enclosing repository for the target.
		GIT_CEILING_DIRECTORIES=$WORK/src git -C "$src" apply --verbose "${patches[@]}" 2>&1 | sed 's/^/      /'
		cp "$here/go.mod" "$here/go.sum" "$WORK/modfile/"
		go mod edit -replace "$mod=$src" "$WORK/modfile/go.mod"
		modfile=(-modfile "$WORK/modfile/go.mod")
	fi
	# One go build for all: the commands share most of their dependencies.
	(cd "$here" && nice -n 10 go build "${modfile[@]}" -trimpath -ldflags "$ldflags" -o "$tmp/bin/" "${pkgs[@]}")
	for c in "${cmds[@]}"; do
		[ "${c%%:*}" = "${c#*:}" ] || mv "$tmp/bin/${c%%:*}" "$tmp/bin/${c#*:}"
	done
	install -m 0644 "$src/LICENSE" "$tmp/LICENSE"
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
provenance=$(printf '%s\n' "source=$source_name" "dockerfile_sha256=$dockerfile_sha256" \
	"multus_version=$MULTUS_VERSION" "patches=${patch_list[*]}" \
	"cni_plugins_version=$CNI_PLUGINS_VERSION" "plugins=${plugins[*]}")
extra="files=$(hash_files "$rootfs" "$tree"/bin/* "$tree/LICENSE" "$staged"/*)"
# The release's facts (not its path: the same release elsewhere is cached);
# absent without one, so that image keeps the stamp it always had.
[ -z "$release_dir" ] || extra+=$'\n'"release=$dockerfile_sha256 ${patch_list[*]} plugins=${plugins[*]}"
# Removed first: an image that fails to build has no provenance.
rm -f "$IMAGES/multus.provenance"
build_image multus "$extra" \
	--tag "$image_ref" --base "$rootfs" \
	--add "$tree:/usr/src/multus-cni" \
	--add "$WORK/cert-approver:/cert-approver" \
	--add "$staged:/cni-plugins" \
	--entrypoint '["/usr/src/multus-cni/bin/multus-daemon"]' --workdir / \
	--label org.opencontainers.image.source=https://github.com/k8snetworkplumbingwg/multus-cni \
	--label org.opencontainers.image.version="$MULTUS_VERSION"
stamp_write "$IMAGES/multus.provenance" "$provenance"

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
echo "    image $image_ref ($IMAGES/multus.tar, provenance $IMAGES/multus.provenance), manifest $manifest"
offline_done
