#!/usr/bin/env bash
# Boot check of the guest image without KubeVirt: QEMU (TCG, q35) with the
# devices KubeVirt gives a vm-instance VM, and the guide's userData on a
# cidata disk made as KubeVirt makes it (the harness and its wiring:
# images/guest/console.sh). Exits non-zero on any failure.
#
#   images/guest/smoke.sh [KERNEL INITRD]     (default: images/guest/build.sh's)
#
# Checks: the serial console shows "login: ", the suite's login and
# `sudo -i` work, `cloud-init status --wait` says done, enp2s0 has the
# address, the default route stays on enp1s0, ping and arping reach the
# gateway, and the power button powers the VM off. A second boot with a
# failing runcmd must report "status: error".
# Needs: qemu-system-x86_64, xorriso (apt-get install xorriso), unshare.
# Environment: SMOKE_CPU, SMOKE_APPEND, SMOKE_BOOT_TIMEOUT (console.sh),
# SMOKE_DEBUG=1 (print the guest's cloud-init.log and dmesg tail).
set -euo pipefail

cd "$(dirname "$0")/../.."
# shellcheck source=images/env.sh
source images/env.sh
# shellcheck source=images/guest/console.sh
source images/guest/console.sh
work=$OFFLINE_CACHE/work/guest
console_init guest "${1:-$work/vmlinux}" "${2:-$work/initrd.img}" 180

mkseed good
echo "==> smoke: booting $(basename "$kernel") + $(basename "$initrd") ($(du -h "$initrd" | cut -f1)) under TCG"
boot "$dir/good.iso"
login
boot_s=$(seconds_since "$t_start" "$t_prompt")
echo "==> smoke: login prompt ${boot_s}s after QEMU started"

run id -u
check "root shell" '^0$'
if [ -n "${SMOKE_DEBUG:-}" ]; then
	run "cat /proc/uptime /var/log/cloud-init.log; dmesg | tail -n 30"
	echo "$out"
fi
run cloud-init status --wait --long
check "cloud-init status --wait" '^status: done$'
run hostname
check "hostname from meta-data's local-hostname" '^vm-instance-smoke$'
run ip -4 -o addr show dev enp2s0
check "VLAN NIC enp2s0 has the guide's address" 'inet 203\.0\.113\.10/24'
run ip -4 -o addr show dev enp1s0
check "pod NIC enp1s0 has a DHCP lease" 'inet 10\.0\.2\.15/24'
run ip -4 route show table main
check "default route on the pod NIC only" '^default via 10\.0\.2\.2 dev enp1s0 proto dhcp'
grep -q 'default.*enp2s0' <<<"$out" && fail "a default route on enp2s0: $out"
run arping -c 1 -w 5 -I enp2s0 203.0.113.1
check "arping reaches the VLAN gateway" '[Uu]nicast reply from 203\.0\.113\.1'
run ping -c 1 -W 5 203.0.113.1
check "ping reaches the VLAN gateway" '1 received'
run ip -4 neigh show 203.0.113.1 dev enp2s0
check "ip neigh shows the gateway" 'lladdr'
run "echo aGVsbG8= | base64 -d; echo; timeout 5 cat /etc/netplan/60-vlan100.yaml | head -1; stat -c %a /etc/netplan/60-vlan100.yaml"
check "base64, timeout, write_files permissions" '^600$'
run python3 -c "'import socket,struct,sys,time; print(socket.AF_PACKET)'"
check "python3 with AF_PACKET sockets" 'AF_PACKET|^17$'
powerdown 60
grep -aq 'vcf-guest: shutting down' "$dir/console.log" || fail "QEMU ended, but not through the guest's power-off"
echo "ok: ACPI power button powers off in ${powerdown_s}s"
checks=$((checks + 1))

control_failing_runcmd 120

# For `make bench`, beside the real guest's (images/guest-debian/smoke.sh).
printf '%s\n' "$boot_s" >"$work/boot-to-login"
echo "==> smoke: PASS ($checks checks; boot to login prompt ${boot_s}s)"
