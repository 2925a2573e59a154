#!/usr/bin/env bash
# Boot check of the real guest (images/guest-debian) without KubeVirt: QEMU
# TCG with the devices KubeVirt gives a vm-instance VM and the guide's
# userData on a NoCloud cidata ISO made as virt-launcher makes it (the same
# wiring as images/guest/smoke.sh, whose harness this reuses):
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
# SMOKE_BOOT_TIMEOUT, SMOKE_DEBUG=1 as in images/guest/smoke.sh.
set -euo pipefail

cd "$(dirname "$0")/../.."
# shellcheck source=images/env.sh
source images/env.sh
work=$OFFLINE_CACHE/work/guest-debian
kernel=${1:-$work/vmlinux}
initrd=${2:-$work/initrd.img}
if [ ! -s "$kernel" ] || [ ! -s "$initrd" ]; then echo "smoke: no kernel/initrd (run images/guest-debian/build.sh)" >&2; exit 2; fi
for t in qemu-system-x86_64 xorrisofs unshare; do
	command -v "$t" >/dev/null || { echo "smoke: $t not found (apt-get install qemu-system-x86 xorriso util-linux)" >&2; exit 2; }
done
user=${GUEST_USER:-ubuntu}
password=vcf-conformance
boot_timeout=${SMOKE_BOOT_TIMEOUT:-300}
# The kernelArgs the suite sets in spec.domain.firmware.kernelBoot.
append=${SMOKE_APPEND:-console=ttyS0 quiet mitigations=off cryptomgr.notests}

dir=$(mktemp -d "${TMPDIR:-/tmp}/vcf-guest-debian-smoke.XXXXXX")
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

refused=0
login() { # after the "login: " prompt
	# getty may come up before cloud-init has set the password: retry.
	local i
	for i in $(seq 1 20); do
		send "$user"
		expect '[Pp]assword: ' 30 || fail "no password prompt"
		send "$password"
		expect '(\$ $|Login incorrect)' 60 || fail "no shell after the password"
		tail -c 200 "$dir/console.log" | grep -aq 'Login incorrect' || break
		refused=$((refused + 1))
		[ "$i" = 20 ] && fail "login refused 20 times"
		expect 'login: ' 60 || fail "no login prompt after a refused login"
	done
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

checks=0
check() { # DESCRIPTION PATTERN: asserts $rc == 0 and the grep -E PATTERN in $out
	if [ "$rc" != 0 ] || ! grep -qE -- "$2" <<<"$out"; then
		fail "$1 (exit $rc): $out"
	fi
	checks=$((checks + 1))
	echo "ok: $1"
}

mkseed good
echo "==> smoke: booting $(basename "$kernel") + $(basename "$initrd") ($(du -h "$initrd" | cut -f1)) under TCG"
boot "$dir/good.iso"
expect 'login: ' "$boot_timeout" || fail "no login prompt within ${boot_timeout}s"
t_prompt=$(date +%s.%N)
login
t_shell=$(date +%s.%N)
boot_s=$(awk -v a="$t_start" -v b="$t_prompt" 'BEGIN { printf "%.1f", b - a }')
shell_s=$(awk -v a="$t_start" -v b="$t_shell" 'BEGIN { printf "%.1f", b - a }')
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
echo system_powerdown >&4
t_pd=$(date +%s)
while kill -0 "$qpid" 2>/dev/null && [ $(($(date +%s) - t_pd)) -lt 90 ]; do sleep 0.5; done
kill -0 "$qpid" 2>/dev/null && fail "no power-off within 90s of the ACPI power button"
echo "ok: ACPI power button powers off in $(($(date +%s) - t_pd))s"
checks=$((checks + 1))
wait "$qpid" 2>/dev/null || true
qpid=
exec 3>&- 4>&-

if [ "${SMOKE_CONTROL:-}" = 1 ]; then
	echo "==> smoke: negative control, a failing runcmd"
	mkseed bad "'false'"
	boot "$dir/bad.iso"
	expect 'login: ' "$boot_timeout" || fail "no login prompt within ${boot_timeout}s"
	login
	RUN_TIMEOUT=240 run cloud-init status --wait --long
	{ [ "$rc" != 0 ] && grep -q '^status: error$' <<<"$out"; } || fail "a failing runcmd must give status: error (exit $rc): $out"
	echo "ok: failing runcmd -> status: error"
	checks=$((checks + 1))
	stop
fi

printf '%s\n' "$boot_s" >"$work/boot-to-login"
echo "==> smoke: PASS ($checks checks; boot to login prompt ${boot_s}s, to a root shell ${shell_s}s under TCG; $versions)"
