#!/usr/bin/env bash
# mmdebstrap customize hook for the kind node rootfs (called by rootfs.sh
# with the root directory as $1). It does what kind's images/base/Dockerfile
# does after installing packages, with kind's own files read from the Go
# module cache, plus the offline lane's additions:
#   VCF_KIND_BASE      kind's images/base/files directory (module cache)
#   VCF_NODE_FILES     images/node/files (our units and import script)
#   VCF_SANDBOX_IMAGE  containerd's sandbox (pause) image
set -euo pipefail
root=${1:?root directory}
kind=${VCF_KIND_BASE:?}
ours=${VCF_NODE_FILES:?}
sandbox=${VCF_SANDBOX_IMAGE:?}

# kind's COPY steps: scripts and directories 0755, everything else 0644.
copy() { # MODE DESTDIR FILE...: regular files only, like COPY dir/* dest/
	local mode=$1 dest=$2 f
	shift 2
	install -d -m 0755 "$root/$dest"
	for f in "$@"; do
		[ -f "$f" ] && install -m "$mode" "$f" "$root/$dest/"
	done
	return 0
}
copy 0755 usr/local/bin "$kind"/usr/local/bin/*
copy 0644 kind "$kind"/kind/*
copy 0755 kind/bin "$kind"/kind/bin/*
copy 0644 LICENSES "$kind"/LICENSES/*
copy 0644 etc "$kind"/etc/*
copy 0644 etc/containerd "$kind"/etc/containerd/*
copy 0644 etc/default "$kind"/etc/default/*
copy 0644 etc/sysctl.d "$kind"/etc/sysctl.d/*
copy 0644 etc/systemd/system "$kind"/etc/systemd/system/*
copy 0644 etc/systemd/system/kubelet.service.d "$kind"/etc/systemd/system/kubelet.service.d/*
copy 0755 kind/bin "$ours"/kind/bin/*
copy 0644 etc/systemd/system "$ours"/etc/systemd/system/*
copy 0644 etc/systemd/system/kubelet.service.d "$ours"/etc/systemd/system/kubelet.service.d/*
install -d -m 0755 "$root/kind/images"

# kind's cleanup: only the services a node needs start in a container.
[ ! -d "$root/usr/lib/systemd/system/sysinit.target.wants" ] || find "$root/usr/lib/systemd/system/sysinit.target.wants/" -name systemd-tmpfiles-setup.service -delete
rm -f "$root"/usr/lib/systemd/system/multi-user.target.wants/* \
	"$root"/etc/systemd/system/*.wants/* \
	"$root"/usr/lib/systemd/system/local-fs.target.wants/* \
	"$root"/usr/lib/systemd/system/sockets.target.wants/*udev* \
	"$root"/usr/lib/systemd/system/sockets.target.wants/*initctl* \
	"$root"/usr/lib/systemd/system/basic.target.wants/*
echo "ReadKMsg=no" >>"$root/etc/systemd/journald.conf"
ln -sf /usr/lib/systemd/systemd "$root/usr/sbin/init"

chroot "$root" systemctl enable kubelet.service containerd.service undo-mount-hacks.service vcf-import-images.service
# systemd-binfmt would register into the kernel-global binfmt_misc.
chroot "$root" systemctl mask systemd-binfmt.service
install -d -m 0755 "$root/etc/kubernetes/manifests"

# kind's units run containerd from /usr/local/bin; Debian installs to /usr/bin.
for b in containerd containerd-shim-runc-v2 ctr; do
	ln -sf "/usr/bin/$b" "$root/usr/local/bin/$b"
done

# kind's base runtime spec: containerd's default plus the product-files hook.
chroot "$root" sh -c "ctr oci spec \
	| jq '.hooks.createContainer[.hooks.createContainer| length] |= . + {\"path\": \"/kind/bin/mount-product-files.sh\"}' \
	| jq 'del(.process.rlimits)' >/etc/containerd/cri-base.json"

# containerd: the sandbox image we preload, and never lower oom_score_adj
# (hosts without CAP_SYS_RESOURCE refuse it and runc then fails every
# sandbox; where it is allowed the clamp changes nothing, containerd itself
# running at -999).
cfg=$root/etc/containerd/config.toml
sed -i -e "s|^\(\s*sandbox_image = \).*|\1\"$sandbox\"|" \
	-e 's/restrict_oom_score_adj = false/restrict_oom_score_adj = true/' "$cfg"
grep -q "sandbox_image = \"$sandbox\"" "$cfg" || { echo "node hook: sandbox_image not set in $cfg" >&2; exit 1; }
grep -q 'restrict_oom_score_adj = true' "$cfg" || { echo "node hook: restrict_oom_score_adj not set in $cfg" >&2; exit 1; }
