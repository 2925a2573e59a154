#!/usr/bin/env bash
# Boot check of the guest image without KubeVirt: QEMU (TCG, q35) with the
# devices KubeVirt gives a vm-instance VM, and the guide's userData on a
# cidata disk made as KubeVirt makes it. Exits non-zero on any failure.
#
#   images/guest/smoke.sh [KERNEL INITRD]     (default: images/guest/build.sh's)
#
#   pcie-root-port 1: virtio-net, the pod NIC  -> enp1s0, DHCP (QEMU's user
#                     network, as virt-launcher's DHCP server: address,
#                     router; restrict=on would withhold the router)
#   pcie-root-port 2: virtio-net, the VLAN NIC -> enp2s0, 203.0.113.10/24
#                     from the guide's netplan; QEMU's user network plays
#                     the VLAN gateway 203.0.113.1 (answers ARP and ping)
#   pcie-root-port 3: virtio-blk, cidata ISO9660 (xorrisofs -volid cidata
#                     -joliet -rock, as virt-launcher) with user-data and
#                     meta-data
# QEMU runs in a network namespace of its own (unshare -n, only a down lo):
# its user networks have nowhere to send anything; nothing reaches the
# host's network. Then: the serial console shows "login: ", the
# suite's login and `sudo -i` work, `cloud-init status --wait` says done,
# enp2s0 has the address, the default route stays on enp1s0, ping and arping
# reach the gateway, and the power button powers the VM off. A second boot
# with a failing runcmd must report "status: error".
# Needs: qemu-system-x86_64, xorriso (apt-get install xorriso), unshare.
# Environment: SMOKE_CPU (QEMU -cpu, default max), SMOKE_APPEND (kernel
# command line), SMOKE_BOOT_TIMEOUT (s), SMOKE_DEBUG=1 (print the guest's
# cloud-init.log and dmesg tail).
set -euo pipefail

cd "$(dirname "$0")/../.."
# shellcheck source=images/env.sh
source images/env.sh
work=$OFFLINE_CACHE/work/guest
kernel=${1:-$work/vmlinux}
initrd=${2:-$work/initrd.img}
if [ ! -s "$kernel" ] || [ ! -s "$initrd" ]; then echo "smoke: no kernel/initrd (run images/guest/build.sh)" >&2; exit 2; fi
for t in qemu-system-x86_64 xorrisofs unshare; do
	command -v "$t" >/dev/null || { echo "smoke: $t not found (apt-get install qemu-system-x86 xorriso util-linux)" >&2; exit 2; }
done
user=${GUEST_USER:-ubuntu}
password=vcf-conformance
boot_timeout=${SMOKE_BOOT_TIMEOUT:-180}
# The kernelArgs the suite sets in spec.domain.firmware.kernelBoot.
append=${SMOKE_APPEND:-console=ttyS0 quiet mitigations=off cryptomgr.notests}

dir=$(mktemp -d "${TMPDIR:-/tmp}/vcf-guest-smoke.XXXXXX")
qpid=
cleanup() {
	[ -n "$qpid" ] && kill "$qpid" 2>/dev/null && wait "$qpid" 2>/dev/null
	exec 3>&- 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT

fail() {
	echo "smoke: FAIL: $*" >&2
	echo "--- console (last 40 lines) ---" >&2
	tail -n 40 "$dir/console.log" | tr -d '\r' >&2
	exit 1
}

# userData as the suite renders it: the guide's fixture plus withConsoleLogin;
# EXTRA is one more runcmd line after `netplan apply`.
userdata() { # [EXTRA]
	sed 's|{{.Address}}|203.0.113.10/24|' fixtures/cloud-init/vlan100.yaml |
		if [ -n "${1:-}" ]; then sed "s|^  - netplan apply\$|&\n  - $1|"; else cat; fi
	printf '# Added by the conformance suite: a password for the serial console.\npassword: %s\nchpasswd:\n  expire: false\n' "$password"
}

# cidata ISO exactly as virt-launcher's defaultIsoFunc makes it.
mkseed() { # NAME [EXTRA]
	local d=$dir/$1
	mkdir -p "$d"
	userdata "${2:-}" >"$d/user-data"
	printf '{"instance-id":"smoke.default","local-hostname":"vm-instance-smoke"}' >"$d/meta-data"
	xorrisofs -output "$d.iso" -volid cidata -joliet -rock -partition_cyl_align on "$d" 2>/dev/null
}

off=0 # console bytes already consumed by expect
expect() { # REGEX TIMEOUT: wait for REGEX in console output after $off
	local re=$1 deadline=$(($(date +%s) + $2)) pos
	while [ "$(date +%s)" -lt "$deadline" ]; do
		pos=$(tail -c +$((off + 1)) "$dir/console.log" | tr -d '\r' | grep -aboE -- "$re" | head -1 | cut -d: -f1 || true)
		if [ -n "$pos" ]; then
			off=$(stat -c %s "$dir/console.log")
			return 0
		fi
		kill -0 "$qpid" 2>/dev/null || fail "QEMU exited while waiting for /$re/"
		sleep 0.2
	done
	return 1
}
send() { printf '%s\n' "$*" >&3; }
# run CMD: runs one line as root, leaves its output in $out and status in $rc.
seq=0
run() {
	seq=$((seq + 1))
	local start=$off
	send "$* ; echo \":vcf$seq:\$?:\""
	expect ":vcf$seq:[0-9]+:" "${RUN_TIMEOUT:-60}" || fail "no result for: $*"
	out=$(tail -c +$((start + 1)) "$dir/console.log" | tr -d '\r' | sed -n "/^:vcf$seq:/q;p" | sed 1d)
	rc=$(tail -c +$((start + 1)) "$dir/console.log" | tr -d '\r' | grep -aoE "^:vcf$seq:[0-9]+:" | cut -d: -f3)
}

boot() { # SEED: start QEMU, console on FIFOs
	: >"$dir/console.log"
	rm -f "$dir"/ser.{in,out} "$dir"/mon.{in,out}
	mkfifo "$dir/ser.in" "$dir/ser.out" "$dir/mon.in" "$dir/mon.out"
	off=0
	unshare -n -- qemu-system-x86_64 -machine q35 -accel tcg -cpu "${SMOKE_CPU:-max}" -m 1024 -smp 1 \
		-nodefaults -no-user-config -display none \
		-chardev pipe,id=ser,path="$dir/ser" -serial chardev:ser \
		-chardev pipe,id=mon,path="$dir/mon" -mon chardev=mon,mode=readline \
		-kernel "$kernel" -initrd "$initrd" -append "$append" \
		-device pcie-root-port,id=pci.1,bus=pcie.0,chassis=1,port=0x10,addr=0x2.0,multifunction=on \
		-device pcie-root-port,id=pci.2,bus=pcie.0,chassis=2,port=0x11,addr=0x2.1 \
		-device pcie-root-port,id=pci.3,bus=pcie.0,chassis=3,port=0x12,addr=0x2.2 \
		-netdev user,id=pod,net=10.0.2.0/24 \
		-device virtio-net-pci,netdev=pod,bus=pci.1,addr=0x0,mac=02:00:00:00:01:01 \
		-netdev user,id=vlan,net=203.0.113.0/24,host=203.0.113.1,dhcpstart=203.0.113.200 \
		-device virtio-net-pci,netdev=vlan,bus=pci.2,addr=0x0,mac=02:00:00:00:02:02 \
		-drive file="$1",if=none,id=cidata,format=raw,readonly=on \
		-device virtio-blk-pci,drive=cidata,bus=pci.3,addr=0x0 \
		</dev/null >"$dir/qemu.log" 2>&1 &
	qpid=$!
	cat "$dir/ser.out" >>"$dir/console.log" &
	cat "$dir/mon.out" >/dev/null &
	exec 3>"$dir/ser.in" 4>"$dir/mon.in"
	t_start=$(date +%s.%N)
}

login() {
	expect 'login: ' "$boot_timeout" || fail "no login prompt within ${boot_timeout}s"
	t_login=$(date +%s.%N)
	send "$user"
	expect '[Pp]assword: ' 30 || fail "no password prompt"
	send "$password"
	expect '\$ $' 60 || fail "no shell after the password"
	send "sudo -i"
	expect '# $' 30 || fail "sudo -i gave no root prompt"
	send "export PS1='vcf# ' PROMPT_COMMAND= HISTFILE=/dev/null; stty cols 4096 -echoctl; bind 'set enable-bracketed-paste off' 2>/dev/null"
	expect 'vcf# $' 30 || fail "root shell setup"
}

stop() {
	kill "$qpid" 2>/dev/null || true
	wait "$qpid" 2>/dev/null || true
	qpid=
	exec 3>&- 4>&-
}

mkseed good
# The negative control: runcmd's last line fails (cloud-init's script status).
mkseed bad "'false'"

echo "==> smoke: booting $(basename "$kernel") + $(basename "$initrd") ($(du -h "$initrd" | cut -f1)) under TCG"
boot "$dir/good.iso"
login
boot_s=$(awk -v a="$t_start" -v b="$t_login" 'BEGIN { printf "%.1f", b - a }')
echo "==> smoke: login prompt ${boot_s}s after QEMU started"

checks=0
check() { # DESCRIPTION: asserts $rc == 0 and the grep -E pattern $2 in $out
	if [ "$rc" != 0 ] || ! grep -qE -- "$2" <<<"$out"; then
		fail "$1 (exit $rc): $out"
	fi
	checks=$((checks + 1))
	echo "ok: $1"
}
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
# The graceful stop KubeVirt does: ACPI power button.
echo system_powerdown >&4
t_pd=$(date +%s)
while kill -0 "$qpid" 2>/dev/null && [ $(($(date +%s) - t_pd)) -lt 60 ]; do sleep 0.5; done
kill -0 "$qpid" 2>/dev/null && fail "no power-off within 60s of the ACPI power button"
grep -aq 'vcf-guest: shutting down' "$dir/console.log" || fail "QEMU ended, but not through the guest's power-off"
echo "ok: ACPI power button powers off in $(($(date +%s) - t_pd))s"
checks=$((checks + 1))
wait "$qpid" 2>/dev/null || true
qpid=
exec 3>&- 4>&-

echo "==> smoke: negative control, a failing runcmd"
boot "$dir/bad.iso"
login
RUN_TIMEOUT=120 run cloud-init status --wait --long
{ [ "$rc" = 1 ] && grep -q '^status: error$' <<<"$out"; } || fail "a failing runcmd must give status: error and exit 1 (exit $rc): $out"
echo "ok: failing runcmd -> status: error, exit 1"
checks=$((checks + 1))
stop

# For `make bench`, beside the real guest's (images/guest-debian/smoke.sh).
printf '%s\n' "$boot_s" >"$work/boot-to-login"
echo "==> smoke: PASS ($checks checks; boot to login prompt ${boot_s}s)"
