#!/usr/bin/env bash
# images/kubevirt/compat.sh probe
#     prints "none" when this kernel creates dummy links, else the patch name
#     ("dummy-as-bridge") and, on stderr, why.
# images/kubevirt/compat.sh apply SRC DST
#     copies the kubevirt.io/kubevirt module at SRC (read-only, from the module
#     cache) to DST and applies the compat edit there.
#
# Why: KubeVirt's bridge binding (pkg/network/setup/netpod, bridgeBindingSpec)
# gives the pod NIC's name, MAC, MTU and addresses to a new dummy link in the
# launcher pod after enslaving the NIC to the k6t bridge. A kernel without
# CONFIG_DUMMY refuses that link, and the VM never starts. The edit makes
# nmstate create a port-less bridge instead (it also takes a name, a MAC set
# after creation, an MTU and addresses), and lets the type check accept that
# bridge where a dummy was asked, which also covers virt-handler reading the
# link back after a restart. The datapath under test (pod NIC, k6t bridge,
# tap, MACs) is KubeVirt's own and unchanged: the dummy carries no traffic.
#
# The edit is anchored on identifiers, not on line numbers or diff context,
# and each anchor must match exactly once: a KubeVirt whose code moved fails
# here, loudly, instead of building something else.
set -euo pipefail

PATCH=dummy-as-bridge

probe() {
	local out
	# A scratch network namespace: nothing of the host's is touched.
	if out=$(unshare --net ip link add vcfprobe0 type dummy 2>&1); then
		echo none
		return 0
	fi
	echo "kubevirt compat: creating a dummy link fails here ($out): the kernel lacks CONFIG_DUMMY" >&2
	# The substitute must hold what KubeVirt gives the dummy, in the order
	# nmstate does it: created, then MAC, MTU and addresses set on it.
	out=$(unshare --net sh -euc '
		ip link add vcfprobe0 type bridge
		ip link set vcfprobe0 address 02:00:00:c0:00:02 mtu 1400
		ip addr add 192.0.2.2/24 dev vcfprobe0
		ip -o link show vcfprobe0; ip -o addr show vcfprobe0' 2>&1) || {
		echo "kubevirt compat: the substitute (a port-less bridge) fails too: $out" >&2
		return 1
	}
	case $out in *02:00:00:c0:00:02*mtu*|*mtu\ 1400*02:00:00:c0:00:02*) ;; *)
		echo "kubevirt compat: the substitute bridge did not keep its MAC and MTU: $out" >&2
		return 1
		;;
	esac
	case $out in *192.0.2.2/24*) ;; *)
		echo "kubevirt compat: the substitute bridge did not keep its address: $out" >&2
		return 1
		;;
	esac
	echo "$PATCH"
}

# edit FILE FROM TO: replace the one occurrence of FROM (a fixed string).
edit() {
	local file=$1 from=$2 to=$3 n
	n=$(grep -cF -- "$from" "$file" || true)
	[ "$n" = 1 ] || {
		echo "kubevirt compat: '$from' occurs $n times in ${file#"$dst"/}, want 1: KubeVirt's code moved, revisit images/kubevirt/compat.sh" >&2
		exit 1
	}
	FROM=$from TO=$to perl -0pi -e 's/\Q$ENV{FROM}\E/$ENV{TO}/' "$file"
	grep -qF -- "$to" "$file" || { echo "kubevirt compat: the edit of ${file#"$dst"/} did not apply" >&2; exit 1; }
}

apply() {
	local src=$1
	dst=$2
	rm -rf "$dst"
	mkdir -p "$(dirname "$dst")"
	cp -r "$src" "$dst"
	chmod -R u+w "$dst"
	local spec=$dst/pkg/network/driver/nmstate/spec.go
	# 1. Create a bridge where a dummy is asked.
	edit "$spec" 'return initLink(iface.Name, &vishnetlink.Dummy{})' \
		'return initLink(iface.Name, &vishnetlink.Bridge{}) // vlan-conformance compat: no CONFIG_DUMMY'
	# 2. Accept that bridge where a dummy is asked (creation and read-back).
	edit "$spec" 'iface.TypeName != "" && linkType != iface.TypeName {' \
		'iface.TypeName != "" && linkType != iface.TypeName && !(iface.TypeName == TypeDummy && linkType == TypeBridge) {'
	echo "$PATCH"
}

case ${1:-} in
probe) probe ;;
apply) [ $# = 3 ] || { echo "usage: $0 apply SRC DST" >&2; exit 2; }; apply "$2" "$3" ;;
*) echo "usage: $0 probe | apply SRC DST" >&2; exit 2 ;;
esac
