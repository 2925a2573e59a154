#!/bin/sh
# Vendor mode, tested: an "external" gateway that this script (not the
# suite) creates -- a netns ext-gw behind a veth ext-uplink, VLAN 100 on its
# far end with 203.0.113.1/24 -- then the suite runs with
# --uplink ext-uplink --gateway 203.0.113.1 and must pass, leave ext-gw and
# ext-uplink as they were, and leave nothing of its own behind.
# Needs a kernel with 8021q: `make vendor-check` runs it in the lab VM here.
set -eu
cd "$(dirname "$0")/.."
report=${REPORT_DIR:-reports/vendor}

cleanup() { ip netns del ext-gw 2>/dev/null || true; ip link del ext-uplink 2>/dev/null || true; }
trap cleanup EXIT INT TERM
cleanup
ip netns add ext-gw
ip link add ext-uplink type veth peer name ext-trunk netns ext-gw
ip -n ext-gw link add link ext-trunk name ext-trunk.100 type vlan id 100
ip -n ext-gw addr add 203.0.113.1/24 dev ext-trunk.100
for l in lo ext-trunk ext-trunk.100; do ip -n ext-gw link set "$l" up; done
ip link set ext-uplink up
# What the suite must leave alone: the gateway's addresses and the uplink's
# configuration (not its carrier, which follows the wire).
state() { ip -n ext-gw -4 -o addr; ip -o link show ext-uplink | awk '{print $2, $4, $5}'; }
before=$(state)

bin/conformance run --lab-vm=never --uplink ext-uplink --gateway 203.0.113.1 \
	--report-dir "$report" -- --ginkgo.label-filter=datapath --ginkgo.no-color
code=$?

after=$(state)
left=$(ip netns list | grep -c '^vcf-' || true)
[ "$before" = "$after" ] || { echo "vendor-check: the external gateway or uplink changed:"; echo "$before"; echo "$after"; exit 1; }
[ "$left" -eq 0 ] || { echo "vendor-check: $left suite namespaces left behind"; exit 1; }
grep -q 'VLAN-01 .* passed' "$report/conformance.md" || { echo "vendor-check: VLAN-01 did not pass in vendor mode"; exit 1; }
echo "vendor-check: suite exit $code; external gateway untouched; nothing left behind"
exit $code
