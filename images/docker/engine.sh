#!/usr/bin/env bash
# Makes a working Docker engine on this machine (or a fresh Debian one) for
# kind, and says what it did.
#
#   images/docker/engine.sh [start]   ensure an engine answers `docker info`
#   images/docker/engine.sh stop [--force]
#                                     stop the dockerd this script started;
#                                     refuses while containers run (another
#                                     user's kind cluster) unless --force
#   images/docker/engine.sh status    print the walls and the engine state
#
# start: an engine that already answers is used as it is. Otherwise Debian's
# docker.io is installed when dockerd is missing, and dockerd is started in
# the background with a config file of our own (.cache/docker/daemon.json,
# passed with --config-file, so /etc/docker is never read or written), its
# log in .cache/docker/dockerd.log and its pid in .cache/docker/dockerd.pid.
#
# Two walls of some machines are probed, never assumed:
#  (a) a capability missing from the bounding set (CAP_SYS_RESOURCE here)
#      makes `docker run --privileged` fail ("unable to apply caps"): the
#      runtime wrapper vcf-runc (runc-wrapper/) strips such capabilities
#      from the OCI spec and becomes dockerd's default runtime;
#  (b) oom_score_adj cannot go below 0: kind nodes need containerd's
#      restrict_oom_score_adj (kind-config/offline.yaml and the node
#      image's containerd config); dockerd is told not to lower its own.
#
# Client: Debian's docker.io (20.10, API 1.41) ships /usr/bin/docker; a newer
# client (e.g. /usr/local/bin/docker 28.x) negotiates down to the daemon's
# API version by itself, so either works (DOCKER_API_VERSION is not needed).
set -euo pipefail

cd "$(dirname "$(readlink -f "$0")")/../.."
repo=$PWD
state=$repo/.cache/docker
pidfile=$state/dockerd.pid
marker=$state/started-by-engine
export PATH=/usr/local/go/bin:$PATH:/usr/sbin:/sbin
probe_image=localhost/vcf/capprobe:latest

log() { echo "engine: $*"; }
die() { echo "engine: ERROR: $*" >&2; exit 1; }

# The client we drive the engine with: Debian's own when present (same API
# version as its daemon), else whatever `docker` is on PATH.
docker_cli() {
	if [ -x /usr/bin/docker ]; then echo /usr/bin/docker; else command -v docker || true; fi
}

engine_up() {
	local cli
	cli=$(docker_cli)
	[ -n "$cli" ] && timeout 20 "$cli" info >/dev/null 2>&1
}

our_pid() {
	local pid
	[ -f "$marker" ] || return 1
	pid=$(cat "$marker")
	[ -n "$pid" ] && [ -d "/proc/$pid" ] && [ "$(basename "$(readlink "/proc/$pid/exe" 2>/dev/null)")" = dockerd ] || return 1
	echo "$pid"
}

# Builds the wrapper and the probe (static, stdlib only) when their sources change.
build_tools() {
	local src=images/docker/runc-wrapper sum
	mkdir -p "$state/bin"
	sum=$(cd "$src" && find . -type f \( -name '*.go' -o -name go.mod \) -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
	if [ -x "$state/bin/vcf-runc" ] && [ -x "$state/bin/capprobe" ] && [ "$(cat "$state/bin/.stamp" 2>/dev/null)" = "$sum" ]; then
		return
	fi
	command -v go >/dev/null || die "go is needed to build the runtime wrapper (/usr/local/go/bin)"
	log "building vcf-runc and capprobe from $src"
	(cd "$src" && CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags=-s -o "$state/bin/vcf-runc" . &&
		CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags=-s -o "$state/bin/capprobe" ./capprobe)
	echo "$sum" >"$state/bin/.stamp"
}

# Sets wall_caps (space-separated missing capability names, empty when none)
# and wall_oom (present/absent), probing from a child process.
probe_walls() {
	local out
	out=$("$state/bin/capprobe")
	wall_caps=$(sed -n 's/^bounding-missing: *//p' <<<"$out" | tr ',' ' ')
	if grep -q '^oom_score_adj=-1: ok' <<<"$out"; then wall_oom=absent; else wall_oom=present; fi
	if [ -n "$wall_caps" ]; then
		echo "wall: privileged caps: present -> runtime wrapper vcf-runc (not in the bounding set: $wall_caps)"
	else
		echo "wall: privileged caps: absent"
	fi
	if [ "$wall_oom" = present ]; then
		echo "wall: oom_score_adj<0: present -> containerd restrict_oom_score_adj in kind nodes (kind-config/offline.yaml, node image config.toml); dockerd oom-score-adjust 0"
	else
		echo "wall: oom_score_adj<0: absent"
	fi
}

install_engine() {
	command -v dockerd >/dev/null && return
	[ "$(id -u)" = 0 ] || die "dockerd is missing and installing docker.io needs root"
	log "dockerd missing: installing Debian's docker.io with apt"
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends docker.io ||
		{ apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends docker.io; }
}

write_config() {
	local cfg=$state/daemon.json
	{
		echo '{'
		echo "  \"pidfile\": \"$pidfile\","
		if [ "$wall_oom" = present ]; then
			# dockerd's default -500 cannot be applied here; do not try.
			echo '  "oom-score-adjust": 0,'
		fi
		if [ -n "$wall_caps" ]; then
			echo '  "default-runtime": "vcf-runc",'
			echo "  \"runtimes\": {\"vcf-runc\": {\"path\": \"$state/bin/vcf-runc\"}},"
		fi
		echo '  "log-level": "info"'
		echo '}'
	} >"$cfg.tmp"
	mv "$cfg.tmp" "$cfg"
	log "daemon config $cfg: $(tr -d '\n' <"$cfg" | tr -s ' ')"
}

start_dockerd() {
	local i
	write_config
	log "starting dockerd --config-file $state/daemon.json (log $state/dockerd.log)"
	# setsid+nohup: the daemon outlives this script and its terminal.
	setsid nohup dockerd --config-file "$state/daemon.json" >>"$state/dockerd.log" 2>&1 </dev/null &
	echo $! >"$marker"
	for i in $(seq 1 90); do
		if engine_up; then
			# dockerd's own pidfile is the truth (setsid may have forked).
			[ -s "$pidfile" ] && cp "$pidfile" "$marker"
			log "dockerd up after ${i}s (pid $(cat "$marker"))"
			return
		fi
		[ -d "/proc/$(cat "$marker")" ] || { tail -20 "$state/dockerd.log" >&2; rm -f "$marker"; die "dockerd exited"; }
		sleep 1
	done
	tail -20 "$state/dockerd.log" >&2
	die "dockerd did not answer within 90 s"
}

# The self-test: a --privileged container of a one-binary image starts and
# prints its capabilities.
self_test() {
	local cli out tmp
	cli=$(docker_cli)
	if ! "$cli" image inspect "$probe_image" >/dev/null 2>&1 ||
		[ "$("$cli" image inspect -f '{{index .Config.Labels "vcf.stamp"}}' "$probe_image" 2>/dev/null)" != "$(cat "$state/bin/.stamp")" ]; then
		tmp=$(mktemp -d)
		cp "$state/bin/capprobe" "$tmp/capprobe"
		tar -C "$tmp" -cf - capprobe | "$cli" import --change 'ENTRYPOINT ["/capprobe"]' \
			--change "LABEL vcf.stamp=$(cat "$state/bin/.stamp")" - "$probe_image" >/dev/null
		rm -rf "$tmp"
		log "test image $probe_image imported (one static binary)"
	fi
	runtimes=$("$cli" info --format '{{json .Runtimes}}') # capture, then match: no SIGPIPE race
	if [ -n "$wall_caps" ] && grep -q '"runc"' <<<"$runtimes"; then
		# Confirm wall (a) for real with the plain runc runtime.
		if out=$("$cli" run --rm --privileged --network none --runtime runc "$probe_image" 2>&1); then
			log "note: --privileged with plain runc worked here"
		else
			log "confirmed: --privileged with plain runc fails: $(grep -o 'unable to apply caps[^"]*' <<<"$out" | head -1)"
		fi
	fi
	out=$("$cli" run --rm --privileged --network none "$probe_image" 2>&1) ||
		{ echo "$out" >&2; die "self-test: a --privileged container does not start"; }
	log "self-test: --privileged container started (default runtime $("$cli" info --format '{{.DefaultRuntime}}')):"
	while IFS= read -r line; do echo "  $line"; done <<<"$out"
}

cmd_start() {
	local cli pid
	mkdir -p "$state"
	build_tools
	probe_walls
	if [ ! -d /lib/modules ]; then
		# kind bind-mounts it; dockerd would create an empty one anyway.
		mkdir -p /lib/modules
		log "created empty /lib/modules (kind bind-mounts it)"
	fi
	if engine_up; then
		if pid=$(our_pid); then
			log "dockerd started by engine.sh is running (pid $pid)"
		else
			log "an engine already answers 'docker info': using it as it is"
			rm -f "$marker"
			if [ -n "$wall_caps" ] && [ "$("$(docker_cli)" info --format '{{.DefaultRuntime}}')" != vcf-runc ]; then
				log "WARNING: its default runtime is not vcf-runc; --privileged (kind) may fail with 'unable to apply caps'"
			fi
		fi
	else
		install_engine
		# A fresh systemd machine starts docker.service on install: use that.
		if engine_up; then
			log "the installed docker.io service answers: using it as it is"
		else
			start_dockerd
		fi
	fi
	cli=$(docker_cli)
	log "client $cli ($("$cli" version --format '{{.Client.Version}}' 2>/dev/null)), server $("$cli" version --format '{{.Server.Version}} API {{.Server.APIVersion}}')"
	self_test
}

cmd_stop() {
	local pid i
	if ! pid=$(our_pid); then
		rm -f "$marker"
		log "no dockerd started by engine.sh is running; nothing stopped"
		return
	fi
	if [ "${1:-}" != --force ]; then
		local running
		running=$("$(docker_cli)" ps --format '{{.Names}}' 2>/dev/null | tr '\n' ' ')
		if [ -n "$running" ]; then
			log "NOT stopping dockerd pid $pid: containers are running: $running(stop them, or: $0 stop --force)"
			exit 1
		fi
	fi
	# The bridges of the engine's networks (docker0, kind's br-<id>) are host
	# links: note them now and remove them once the engine we started is gone.
	local bridges
	bridges=$("$(docker_cli)" network ls -q --filter driver=bridge 2>/dev/null | sed 's/^/br-/' | tr '\n' ' ')
	log "stopping dockerd pid $pid (started by engine.sh)"
	kill -TERM "$pid"
	for i in $(seq 1 60); do
		[ -d "/proc/$pid" ] || {
			rm -f "$marker"
			log "dockerd stopped after ${i}s"
			for b in docker0 $bridges; do
				ip link del "$b" 2>/dev/null && log "removed host bridge $b"
			done
			return 0
		}
		sleep 1
	done
	die "dockerd pid $pid still running after 60 s (see $state/dockerd.log)"
}

cmd_status() {
	local pid
	mkdir -p "$state"
	build_tools
	probe_walls
	if pid=$(our_pid); then log "dockerd started by engine.sh: pid $pid"; fi
	if engine_up; then log "engine answers 'docker info'"; else log "no engine answers"; fi
}

case "${1:-start}" in
start) cmd_start ;;
stop) cmd_stop "${2:-}" ;;
status) cmd_status ;;
*) echo "usage: $0 [start|stop [--force]|status]" >&2; exit 2 ;;
esac
