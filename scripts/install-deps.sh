#!/usr/bin/env bash
# install-deps.sh: make sure this machine has what the broker's tests and the
# local cluster need, installing only what is missing from Debian's packages.
#
#   zookeeper                 the ZooKeeper server (/usr/share/java/zookeeper.jar)
#                             and its CLI (/usr/share/zookeeper/bin/zkCli.sh)
#   kcat                      command-line Kafka client used by people and tests
#   openssl                   the throwaway CA of a secured cluster (gen-certs.sh)
#   python3-confluent-kafka   librdkafka's Python client used by tests
#   default-jre-headless      only when no `java` is on PATH
#   gcc, libc6-dev            only when no `gcc` is on PATH: `go test -race` needs cgo
#   chromium                  headless browser the status page test loads / with
#
# With --cluster it checks only what running a local cluster and talking to
# it need (zookeeper, a java, kcat, openssl) and leaves the test tools alone:
# scripts/cluster.sh uses that, so a first `make run` downloads no browser.
#
# It also checks that Go is present (it cannot install Go: Debian's is too old).
# Quiet when everything is there. As root it runs `apt-get update` once, then
# `apt-get install` for what is missing; as anyone else it prints the command
# to run and exits 1.
set -euo pipefail

say() { printf 'install-deps: %s\n' "$*" >&2; }

# installed PKG: whether dpkg knows PKG as installed.
installed() {
	local status
	status=$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) || return 1
	[[ $status == "install ok installed" ]]
}

cluster_only=false
case ${1:-} in
--cluster) cluster_only=true ;;
"") ;;
*)
	say "usage: $0 [--cluster]"
	exit 2
	;;
esac

missing=()
if ! installed zookeeper || [[ ! -f /usr/share/java/zookeeper.jar ]]; then
	missing+=(zookeeper)
fi
if ! command -v java >/dev/null 2>&1; then
	missing+=(default-jre-headless)
fi
if ! command -v kcat >/dev/null 2>&1; then
	missing+=(kcat)
fi
if ! command -v openssl >/dev/null 2>&1; then
	missing+=(openssl)
fi
if ! $cluster_only; then
	if ! installed python3-confluent-kafka; then
		missing+=(python3-confluent-kafka)
	fi
	if ! command -v gcc >/dev/null 2>&1; then
		missing+=(gcc libc6-dev)
	fi
	if ! command -v chromium >/dev/null 2>&1; then
		missing+=(chromium)
	fi
fi

status=0
if ((${#missing[@]} > 0)); then
	if ! command -v apt-get >/dev/null 2>&1; then
		say "missing: ${missing[*]}; this is not a Debian-like system (no apt-get): install them by hand"
		status=1
	elif [[ $(id -u) -ne 0 ]]; then
		say "missing: ${missing[*]}"
		say "run as root: apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
		status=1
	else
		say "installing: ${missing[*]}"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq
		apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
		say "installed: ${missing[*]}"
	fi
fi

if ! command -v go >/dev/null 2>&1; then
	if [[ -x /usr/local/go/bin/go ]]; then
		say "go is at /usr/local/go/bin/go but not on PATH: export PATH=/usr/local/go/bin:\$PATH"
	else
		say "go is missing: install Go (see go.mod for the version) and put it on PATH"
	fi
	status=1
fi

exit "$status"
