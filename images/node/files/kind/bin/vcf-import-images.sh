#!/bin/sh
# Imports the images baked into /kind/images (docker-archive tarballs) into
# containerd's k8s.io namespace at boot, so kubelet and kubeadm never pull
# (the offline lane has no registry). Run by vcf-import-images.service,
# which kubelet requires. Idempotent: importing known content is a no-op.
set -eu
i=0
until ctr version >/dev/null 2>&1; do
	i=$((i + 1))
	[ "$i" -lt 120 ] || { echo "containerd did not answer within 120 s" >&2; exit 1; }
	sleep 1
done
for f in /kind/images/*.tar; do
	[ -e "$f" ] || continue
	# --no-unpack: containerd unpacks an image when a container first needs
	# it, so a node only pays for the images it runs.
	ctr -n k8s.io images import --no-unpack "$f"
done
ctr -n k8s.io images ls -q
