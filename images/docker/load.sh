#!/usr/bin/env bash
# load.sh ARCHIVE NEED_GB: loads the kind node image into the engine, then
# removes the earlier builds of it that the load left untagged, then checks
# that the engine's data root has the NEED_GB a lane takes at its peak
# (the Makefile's LANE_DISK_GB, measured), before any cluster is made.
#
# Each node image rebuild (a new Kubernetes, rootfs or plugin set) moves the
# tag and leaves the old image dangling, 766 MB each; on a machine that
# keeps its engine between runs (CI), they pile up. Ours are told apart by
# the label images/node/build.sh sets; builds from before the label, by what
# only imgtool's node image has: created at the epoch (a deterministic
# build) with kind's node entrypoint.
set -euo pipefail
archive=${1:?usage: load.sh ARCHIVE NEED_GB} need_gb=${2:?usage: load.sh ARCHIVE NEED_GB}
key=org.cozystack.vlan-conformance.image # images/node/build.sh: $key=node

log() { echo "load: $*"; }

docker load -i "$archive"

removed=0
for id in $(docker image ls --filter dangling=true --quiet --no-trunc); do
	sig=$(docker image inspect --format "{{index .Config.Labels \"$key\"}}|{{.Created}}|{{json .Config.Entrypoint}}" "$id")
	case $sig in
	node\|*) ;;
	\|1970-01-01T00:00:00Z\|'["/usr/local/bin/entrypoint","/sbin/init"]') ;;
	*) continue ;;
	esac
	# A container still using it keeps it (rmi refuses; not an error here).
	if docker image rm "$id" >/dev/null 2>&1; then
		removed=$((removed + 1))
	fi
done
[ "$removed" -eq 0 ] || log "removed $removed earlier build(s) of the node image (untagged by the load)"

if [ -n "$(docker ps -aq --filter label=io.x-k8s.kind.cluster)" ]; then
	# A kept one (kind-up) is reused; a leftover the run deletes before it
	# makes its own, so the room it takes now is the room the run gets.
	log "a kind cluster is there (reused if kind-up made it, else deleted by the run): its room is taken already, not checked"
	exit 0
fi
root=$(docker info --format '{{.DockerRootDir}}')
free_gb=$(($(df --output=avail -k "$root" | tail -n1) / 1024 / 1024))
if [ "$free_gb" -lt "$need_gb" ]; then
	echo "load: ERROR: the engine's data root $root has $free_gb GB free; this lane takes $need_gb GB at its peak (three kind nodes with the images imported)." >&2
	echo "load: what takes the room: docker system df; the suite's caches: du -sh \${VCF_CACHE:-~/.cache/vlan-conformance} \$(go env GOCACHE)" >&2
	exit 1
fi
log "the engine's data root $root has $free_gb GB free (this lane takes $need_gb)"
