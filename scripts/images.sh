#!/usr/bin/env bash
# images.sh: build the container images docker-compose.yml runs, without a
# container registry (nothing is pulled).
#
#   kafkazk/broker:latest   FROM scratch: the static bin/broker and a default
#                           server.properties (docker/broker.Dockerfile). Rebuilt
#                           on every run: go build and docker's layer cache make
#                           that a few seconds, and the image never lags the code.
#   kafkazk/zookeeper:3.8-debian
#                           Debian bookworm (debootstrap minbase) with
#                           openjdk-17-jre-headless and Debian's zookeeper,
#                           imported with `docker import`, its entrypoint
#                           docker/zookeeper-entrypoint.sh taking the official
#                           zookeeper image's ZOO_* variables. Built only when
#                           missing (about a minute or two), or with FORCE=1.
#
# Environment (defaults in brackets):
#   FORCE [0]               1: rebuild the ZooKeeper image even if it exists
#   ZOOKEEPER_IMAGE [kafkazk/zookeeper:3.8-debian]
#                           tag of the local ZooKeeper image; when it names an
#                           image that is already present (e.g. the official
#                           zookeeper:3.8 on a machine with a registry), nothing
#                           is built for ZooKeeper
#   BROKER_IMAGE [kafkazk/broker:latest]
#   DEBIAN_MIRROR []        Debian mirror for debootstrap; default: the first
#                           `debian` URI in /etc/apt/sources.list*
#   DEBOOTSTRAP_CACHE [/var/cache/kafkazk-debootstrap]
#                           .deb cache reused by FORCE=1 rebuilds
#   BROKER_BIN []           a static broker binary to put in the image; when
#                           set, nothing is compiled (default: build bin/broker
#                           from this tree)
#   SKIP [] "broker" or "zookeeper": build only the other one
#
# Prints the time each build took. Needs root for debootstrap (it installs
# debootstrap with apt-get when missing).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FORCE=${FORCE:-0}
ZOOKEEPER_IMAGE=${ZOOKEEPER_IMAGE:-kafkazk/zookeeper:3.8-debian}
BROKER_IMAGE=${BROKER_IMAGE:-kafkazk/broker:latest}
DEBOOTSTRAP_CACHE=${DEBOOTSTRAP_CACHE:-/var/cache/kafkazk-debootstrap}
SKIP=${SKIP:-}
SUITE=bookworm
export PATH=$PATH:/usr/local/go/bin

say() { printf 'images.sh: %s\n' "$*"; }
die() {
	printf 'images.sh: %s\n' "$*" >&2
	exit 1
}

command -v docker >/dev/null 2>&1 || die "docker is not installed"
docker info >/dev/null 2>&1 || die "cannot talk to the docker engine (docker info failed)"

image_exists() { docker image inspect "$1" >/dev/null 2>&1; }

# mirror: DEBIAN_MIRROR, else the first Debian (not -security) URI apt uses.
mirror() {
	if [[ -n ${DEBIAN_MIRROR:-} ]]; then
		printf '%s' "$DEBIAN_MIRROR"
		return
	fi
	local m
	m=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
		grep -oE '(https?|file)://[^ ]*/debian/?( |$)' | grep -v security | head -n 1 | tr -d ' ') || true
	printf '%s' "${m:-http://deb.debian.org/debian}"
}

build_broker() {
	local ctx start=$SECONDS
	local bin=${BROKER_BIN:-}
	if [[ -z $bin ]]; then
		say "build: bin/broker (static)"
		(cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -o bin/broker ./cmd/broker) || die "go build failed"
		bin=$ROOT/bin/broker
	fi
	[[ -x $bin ]] || die "BROKER_BIN=$bin is not an executable"
	# FROM scratch has no libc: refuse a dynamically linked binary.
	if command -v file >/dev/null 2>&1 && file -L "$bin" | grep -q 'dynamically linked'; then
		die "$bin is dynamically linked; build it with CGO_ENABLED=0"
	fi
	ctx=$(mktemp -d)
	# The build context holds only what the image needs.
	cp "$bin" "$ctx/broker"
	cp "$ROOT/docker/server.properties" "$ctx/server.properties"
	say "build: $BROKER_IMAGE (FROM scratch)"
	# The classic builder: it needs no buildx plugin (the engine may be old), and
	# FROM scratch pulls nothing either way.
	if ! DOCKER_BUILDKIT=0 docker build -q -t "$BROKER_IMAGE" -f "$ROOT/docker/broker.Dockerfile" "$ctx" >"$ctx.log" 2>&1; then
		cat "$ctx.log" >&2
		rm -rf "$ctx" "$ctx.log"
		die "docker build of $BROKER_IMAGE failed"
	fi
	rm -f "$ctx.log"
	rm -rf "$ctx"
	say "built $BROKER_IMAGE in $((SECONDS - start))s ($(docker image inspect -f '{{.Size}}' "$BROKER_IMAGE" | awk '{ printf "%.1f MB", $1 / 1e6 }'))"
}

build_zookeeper() {
	local start=$SECONDS dir m
	if image_exists "$ZOOKEEPER_IMAGE" && [[ $FORCE != 1 ]]; then
		say "$ZOOKEEPER_IMAGE exists: not rebuilt (FORCE=1 rebuilds)"
		return 0
	fi
	if [[ $ZOOKEEPER_IMAGE != kafkazk/* ]]; then
		die "$ZOOKEEPER_IMAGE is not present and is not one this script builds; pull it, or unset ZOOKEEPER_IMAGE to build kafkazk/zookeeper:3.8-debian"
	fi
	[[ $(id -u) -eq 0 ]] || die "building $ZOOKEEPER_IMAGE needs root (debootstrap)"
	if ! command -v debootstrap >/dev/null 2>&1; then
		say "installing debootstrap"
		DEBIAN_FRONTEND=noninteractive apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
	fi
	m=$(mirror)
	dir=$(mktemp -d /var/tmp/kafkazk-zk-rootfs.XXXXXX)
	# shellcheck disable=SC2064 # expand dir now
	trap "rm -rf '$dir'" EXIT
	mkdir -p "$DEBOOTSTRAP_CACHE"
	say "debootstrap $SUITE from $m into $dir (log $dir.log)"
	if ! debootstrap --variant=minbase --cache-dir="$DEBOOTSTRAP_CACHE" \
		--include=openjdk-17-jre-headless,zookeeper "$SUITE" "$dir" "$m" >"$dir.log" 2>&1; then
		tail -n 30 "$dir.log" >&2
		die "debootstrap failed; log: $dir.log"
	fi
	rm -f "$dir.log"
	install -m 0755 "$ROOT/docker/zookeeper-entrypoint.sh" "$dir/docker-entrypoint.sh"
	mkdir -p "$dir/conf" "$dir/data" "$dir/datalog"
	# Trim what a container never uses.
	rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/* \
		"$dir"/usr/share/doc/* "$dir"/usr/share/man/* "$dir"/usr/share/locale/*
	say "docker import $ZOOKEEPER_IMAGE"
	tar -C "$dir" -c . | docker import \
		-c 'ENV PATH=/usr/share/zookeeper/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		-c 'ENV ZOO_CONF_DIR=/conf ZOO_DATA_DIR=/data ZOO_DATA_LOG_DIR=/datalog' \
		-c 'VOLUME ["/data", "/datalog"]' \
		-c 'EXPOSE 2181 2888 3888 8080' \
		-c 'WORKDIR /' \
		-c 'ENTRYPOINT ["/docker-entrypoint.sh"]' \
		-c 'CMD ["zkServer.sh", "start-foreground"]' \
		-m "Debian $SUITE minbase with openjdk-17-jre-headless and zookeeper (scripts/images.sh)" \
		- "$ZOOKEEPER_IMAGE" >/dev/null || die "docker import failed"
	rm -rf "$dir"
	trap - EXIT
	say "built $ZOOKEEPER_IMAGE in $((SECONDS - start))s ($(docker image inspect -f '{{.Size}}' "$ZOOKEEPER_IMAGE" | awk '{ printf "%.0f MB", $1 / 1e6 }'))"
}

[[ $SKIP == zookeeper ]] || build_zookeeper
[[ $SKIP == broker ]] || build_broker
