# shellcheck shell=bash
# The root both guest images start from (images/guest and
# images/guest-debian build.sh; part of both cache keys).

# stage_root ROOTFS ROOT: ROOTFS (a tarball) unpacked into a fresh ROOT,
# pruned of what a RAM-only guest never uses: package management (apt,
# debconf, the perl its maintainer scripts need), docs, locales and iconv's
# charset modules, ~25 MB the kernel would unpack at every boot for nothing
# (dpkg stays, with its status, to show what the image holds). Python's
# compiled bytecode stays: it is what makes cloud-init start faster.
stage_root() {
	local rootfs=$1 root=$2
	rm -rf "$root" && mkdir -p "$root"
	tar -xpf "$rootfs" -C "$root" --numeric-owner
	(cd "$root" && rm -rf var/cache/apt/* var/lib/apt/lists/* usr/share/doc/* usr/share/man/* usr/share/info/* \
		usr/share/locale/* usr/share/zoneinfo/right usr/share/zoneinfo/posix \
		usr/bin/apt* usr/lib/apt usr/lib/x86_64-linux-gnu/libapt-* etc/apt etc/cron.daily/apt-compat \
		usr/bin/debconf* usr/share/debconf var/cache/debconf usr/bin/perl* usr/lib/x86_64-linux-gnu/perl-base \
		usr/share/perl5 usr/lib/x86_64-linux-gnu/gconv var/lib/dpkg/info/*.md5sums)
	mkdir -p "$root"/{dev,proc,sys,run,tmp,etc/netplan} && chmod 1777 "$root/tmp"
	# The kernel opens /dev/console for init before devtmpfs is mounted.
	[ -e "$root/dev/console" ] || mknod -m 600 "$root/dev/console" c 5 1
}
