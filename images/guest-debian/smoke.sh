#!/usr/bin/env bash
# Boot check of the real guest (images/guest-debian) without KubeVirt: QEMU
# TCG with the devices KubeVirt gives a vm-instance VM and the guide's
# userData on a NoCloud cidata ISO made as virt-launcher makes it (the
# harness and its wiring: images/guest-debian/console.sh):
#
#   images/guest-debian/smoke.sh [KERNEL INITRD]   (default: build.sh's)
#
#   enp1s0  pod NIC, DHCP from QEMU's user network (virt-launcher's DHCP)
#   enp2s0  VLAN NIC, 203.0.113.10/24 from the guide's netplan; QEMU's user
#           network plays the VLAN gateway 203.0.113.1
# QEMU runs in a network namespace of its own (unshare -n): nothing reaches
# the host's network. Checks: systemd is PID 1, the serial console login
# works, Debian's own cloud-init ran from the NoCloud seed and finished,
# netplan wrote the networkd file and networkd configured the /24 on enp2s0
# with no default route there, ping and arping reach the gateway, the ACPI
# power button powers off. Prints the boot-to-login time and writes it to
# $OFFLINE_CACHE/work/guest-debian/boot-to-login (for `make bench`).
# SMOKE_CONTROL=1 also boots a seed whose runcmd fails (status: error).
# Needs: qemu-system-x86_64, xorriso, unshare. SMOKE_CPU, SMOKE_APPEND,
# SMOKE_BOOT_TIMEOUT (console.sh); SMOKE_DEBUG=1 prints systemd-analyze and
# cloud-init analyze.
set -euo pipefail

cd "$(dirname "$0")/../.."
# shellcheck source=images/env.sh
source images/env.sh
# shellcheck source=images/guest-debian/console.sh
source images/guest-debian/console.sh
work=$OFFLINE_CACHE/work/guest-debian
console_init guest-debian "${1:-$work/vmlinux}" "${2:-$work/initrd.img}" 300

mkseed good
echo "==> smoke: booting $(basename "$kernel") + $(basename "$initrd") ($(du -h "$initrd" | cut -f1)) under TCG"
boot "$dir/good.iso"
login
boot_s=$(seconds_since "$t_start" "$t_prompt")
shell_s=$(seconds_since "$t_start" "$t_shell")
# Debian orders cloud-init's network stage (users) before the getty, but
# set-passwords runs later: a login can be refused until it has.
echo "==> smoke: login prompt ${boot_s}s after QEMU started; root shell at ${shell_s}s ($refused refused logins)"

run id -u
check "root shell" '^0$'
run cat /proc/1/comm
check "systemd is PID 1" '^systemd$'
run "dpkg-query -W -f '\${Package} \${Version}\n' cloud-init netplan.io systemd"
check "Debian's cloud-init and netplan.io" '^netplan\.io 0\.106'
versions=$(tr '\n' ' ' <<<"$out")
run "head -c 40 \$(command -v cloud-init); echo; cloud-init --version"
check "cloud-init is Debian's Python cloud-init" 'cloud-init 22\.4'
RUN_TIMEOUT=240 run cloud-init status --wait --long
check "cloud-init status --wait: done, from the NoCloud seed" 'DataSourceNoCloud'
grep -qE '^status: done$' <<<"$out" || fail "cloud-init did not finish cleanly: $out"
if [ -n "${SMOKE_DEBUG:-}" ]; then
	run "systemd-analyze; systemd-analyze critical-chain serial-getty@ttyS0.service; systemd-analyze blame | head -n 20; cloud-init analyze show; grep -E 'Running command|Cloud-init v|Finished' /var/log/cloud-init.log | cut -c1-200"
	echo "$out"
fi
run "grep -c 'Running command \[.sh.' /var/log/cloud-init.log; grep -o 'Cloud-init v\. [0-9.]*' /var/log/cloud-init.log | sort -u"
check "cloud-init.log: the real cloud-init ran runcmd" 'Cloud-init v\. 22\.4'
run hostname
check "hostname from meta-data's local-hostname" '^vm-instance-smoke$'
run "stat -c %a /etc/netplan/60-vlan100.yaml; ls /run/systemd/network/"
check "write_files wrote the netplan file 0600; netplan rendered it for networkd" '10-netplan-enp2s0\.network'
run SYSTEMD_COLORS=0 networkctl list --no-legend
check "systemd-networkd manages enp2s0 (configured)" 'enp2s0 +ether +routable +configured'
run ip -4 -o addr show dev enp2s0
check "VLAN NIC enp2s0 has the guide's /24" 'inet 203\.0\.113\.10/24'
run ip -4 -o addr show dev enp1s0
check "pod NIC enp1s0 has a DHCP lease (cloud-init's fallback config, networkd's client)" 'inet 10\.0\.2\.15/24'
run ip -4 route show table main
check "default route on the pod NIC" '^default via 10\.0\.2\.2 dev enp1s0 proto dhcp'
grep -q 'default.*enp2s0' <<<"$out" && fail "a default route on enp2s0: $out"
check "the /24 adds only the connected route on enp2s0" '^203\.0\.113\.0/24 dev enp2s0 proto kernel scope link src 203\.0\.113\.10'
[ "$(grep -c 'enp2s0' <<<"$out")" = 1 ] || fail "more than the connected route on enp2s0: $out"
run arping -c 1 -w 5 -I enp2s0 203.0.113.1
check "arping reaches the VLAN gateway" '[Uu]nicast reply from 203\.0\.113\.1'
run ping -c 1 -W 5 203.0.113.1
check "ping reaches the VLAN gateway" '1 received'
run python3 -c "'import socket; print(socket.AF_PACKET)'"
check "python3 with AF_PACKET sockets (the cluster tier's ARP prober)" '^17$'
run "SYSTEMD_COLORS=0 systemd-analyze | head -n 1; free -m | sed -n 2p; df -m / | tail -n 1"
echo "    guest's own count: $out"
powerdown 90
echo "ok: ACPI power button powers off in ${powerdown_s}s"
checks=$((checks + 1))

if [ "${SMOKE_CONTROL:-}" = 1 ]; then
	control_failing_runcmd 240
fi

printf '%s\n' "$boot_s" >"$work/boot-to-login"
echo "==> smoke: PASS ($checks checks; boot to login prompt ${boot_s}s, to a root shell ${shell_s}s under TCG; $versions)"
