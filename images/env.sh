# shellcheck shell=bash
# Sourced by every script under images/ (from the repository root): the
# pinned versions, and where the offline lane's artifacts live. The cache is
# outside the checkout, so a fresh clone on a machine that built the images
# before only builds what changed (each component is keyed by its inputs).
# shellcheck source=images/versions.env
source images/versions.env
VCF_CACHE=${VCF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vlan-conformance}
OFFLINE_CACHE=${OFFLINE_CACHE:-$VCF_CACHE/offline}
case $OFFLINE_CACHE in /*) ;; *) OFFLINE_CACHE=$PWD/$OFFLINE_CACHE ;; esac
export VCF_CACHE OFFLINE_CACHE
