# shellcheck shell=bash
# shellcheck disable=SC2034 # its times and counters are read by the smoke script that sources it
# The guest's boot-check harness (images/guest-debian/smoke.sh): QEMU TCG
# on q35 with the devices KubeVirt gives a vm-instance VM, the guide's
# userData on a cidata ISO made as virt-launcher makes it, and a serial
# console driven line by line.
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
#
# QEMU runs in a network namespace of its own (unshare -n, only a down lo):
# its user networks have nowhere to send anything; nothing reaches the
# host's network.
#
# Sourced from the repository root after images/env.sh, then:
#   console_init NAME KERNEL INITRD BOOT_TIMEOUT
# Environment: SMOKE_CPU (QEMU -cpu, default max), SMOKE_APPEND (kernel
# command line), SMOKE_BOOT_TIMEOUT (s, overrides BOOT_TIMEOUT).

# console_init NAME KERNEL INITRD BOOT_TIMEOUT: checks the inputs and tools,
# makes the scratch directory and removes it (and QEMU) on exit.
console_init() {
	name=$1 kernel=$2 initrd=$3
	if [ ! -s "$kernel" ] || [ ! -s "$initrd" ]; then echo "smoke: no kernel/initrd (run images/$name/build.sh)" >&2; exit 2; fi
	local t
	for t in qemu-system-x86_64 xorrisofs unshare; do
		command -v "$t" >/dev/null || { echo "smoke: $t not found (apt-get install qemu-system-x86 xorriso util-linux)" >&2; exit 2; }
	done
	user=${GUEST_USER:-ubuntu}
	password=vcf-conformance
	boot_timeout=${SMOKE_BOOT_TIMEOUT:-$4}
	# The kernelArgs the suite sets in spec.domain.firmware.kernelBoot.
	append=${SMOKE_APPEND:-console=ttyS0 quiet mitigations=off cryptomgr.notests}
	dir=$(mktemp -d "${TMPDIR:-/tmp}/vcf-$name-smoke.XXXXXX")
	qpid=
	checks=0
	refused=0
	trap console_cleanup EXIT
}

# shellcheck disable=SC2317 # reached through the EXIT trap
console_cleanup() {
	[ -n "$qpid" ] && kill "$qpid" 2>/dev/null && wait "$qpid" 2>/dev/null
	exec 3>&- 2>/dev/null || true
	rm -rf "$dir"
}

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
stamp='\[ *[0-9]+\.[0-9]+\]' # a console message's timestamp, as the kernel prints it
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

# check DESCRIPTION PATTERN: asserts $rc == 0 and the grep -E PATTERN in $out.
check() {
	if [ "$rc" != 0 ] || ! grep -qE -- "$2" <<<"$out"; then
		fail "$1 (exit $rc): $out"
	fi
	checks=$((checks + 1))
	echo "ok: $1"
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

# login: waits for the "login: " prompt (its time in $t_prompt), logs in as
# the suite does and leaves a root shell with a plain prompt (its time in
# $t_shell). getty may come up before cloud-init has set the password, so
# a refused login is retried ($refused counts them).
login() {
	expect 'login: ' "$boot_timeout" || fail "no login prompt within ${boot_timeout}s"
	t_prompt=$(date +%s.%N)
	local i
	for i in $(seq 1 20); do
		send "$user"
		expect '[Pp]assword: ' 30 || fail "no password prompt"
		send "$password"
		# A prompt may have a console message (systemd's, cloud-init's)
		# printed right after it, on its line.
		expect "(\\\$ (\$|$stamp)|Login incorrect)" 60 || fail "no shell after the password"
		tail -c 200 "$dir/console.log" | grep -aq 'Login incorrect' || break
		refused=$((refused + 1))
		[ "$i" = 20 ] && fail "login refused 20 times"
		expect 'login: ' 60 || fail "no login prompt after a refused login"
	done
	send "sudo -i"
	expect "# (\$|$stamp)" 30 || fail "sudo -i gave no root prompt"
	# Kernel and cloud-init lines can land on the console after the prompt,
	# so the shell's readiness is a marker it prints (the quotes keep the
	# echoed command line from matching), not the prompt at the end.
	send "export PS1='vcf# ' PROMPT_COMMAND= HISTFILE=/dev/null; stty cols 4096 -echoctl; bind 'set enable-bracketed-paste off' 2>/dev/null; echo :vcf-sh''ell:"
	expect ':vcf-shell:' 30 || fail "root shell setup"
	t_shell=$(date +%s.%N)
}

# seconds_since START END: END - START in seconds, one decimal.
seconds_since() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# powerdown LIMIT: the graceful stop KubeVirt does, the ACPI power button;
# fails unless QEMU ends within LIMIT seconds.
powerdown() {
	echo system_powerdown >&4
	local t_pd
	t_pd=$(date +%s)
	while kill -0 "$qpid" 2>/dev/null && [ $(($(date +%s) - t_pd)) -lt "$1" ]; do sleep 0.5; done
	kill -0 "$qpid" 2>/dev/null && fail "no power-off within $1s of the ACPI power button"
	powerdown_s=$(($(date +%s) - t_pd))
	wait "$qpid" 2>/dev/null || true
	qpid=
	exec 3>&- 4>&-
}

stop() {
	kill "$qpid" 2>/dev/null || true
	wait "$qpid" 2>/dev/null || true
	qpid=
	exec 3>&- 4>&-
}

# control_failing_runcmd TIMEOUT: the negative control, a seed whose runcmd
# fails must give cloud-init's "status: error" and a non-zero exit.
control_failing_runcmd() {
	echo "==> smoke: negative control, a failing runcmd"
	mkseed bad "'false'"
	boot "$dir/bad.iso"
	login
	RUN_TIMEOUT=$1 run cloud-init status --wait --long
	{ [ "$rc" != 0 ] && grep -q '^status: error$' <<<"$out"; } || fail "a failing runcmd must give status: error (exit $rc): $out"
	echo "ok: failing runcmd -> status: error, exit $rc"
	checks=$((checks + 1))
	stop
}
