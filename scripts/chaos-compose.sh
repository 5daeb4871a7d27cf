#!/usr/bin/env bash
# chaos-compose.sh: `make chaos-compose`: the fault matrix's workload and
# history checker (internal/chaos, through bin/chaos compose) against the
# docker-compose cluster, with the faults of reliability.md §5's docker
# column: docker kill, docker stop, docker pause, docker network disconnect,
# iptables DROP on 9092 or 2181 and tc qdisc (netem delay and rate; tbf rate
# only on a kernel without netem) run in a container's network namespace
# with nsenter from the host (the broker image is FROM scratch and has
# neither tool), and docker kill of ZooKeeper. Each scenario writes to a
# fresh topic (3 partitions, RF 3, min.insync.replicas=2) from an idempotent
# acks=all producer and single-attempt raw writers, reads it with a consumer,
# then stops the brokers, copies their data dirs out (docker cp) and checks
# every replica. Prints the report's table; exits 1 on any anomaly.
#
# Its own compose project and ports, so it runs beside a `make compose-up`
# cluster or compose-test: project chaosops, brokers on 127.0.0.1:39092-39094,
# ZooKeeper 127.0.0.1:39181, http 39081-39083, network 172.30.39.0/24, image
# kafkazk/broker:chaosops. Needs root (nsenter) and iproute2/iptables on the
# host.
#
# Environment (defaults in brackets), besides docker/lib.sh's:
#   CHAOS_COMPOSE_SCENARIOS []  comma-separated (bin/chaos compose -list);
#                               default: all but random-mix
#   CHAOS_COMPOSE_REPORT [chaos-compose-report.md]
#   CHAOS_COMPOSE_ARGS []       more bin/chaos compose flags (-random 5m -seed N)
#   KEEP [0]                    1: leave the cluster up at the end
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export COMPOSE_PROJECT_NAME=${COMPOSE_PROJECT_NAME:-chaosops}
export KAFKAZK_PORT_1=${KAFKAZK_PORT_1:-39092} KAFKAZK_PORT_2=${KAFKAZK_PORT_2:-39093} KAFKAZK_PORT_3=${KAFKAZK_PORT_3:-39094}
export ZOOKEEPER_HOST_PORT=${ZOOKEEPER_HOST_PORT:-39181}
export KAFKAZK_HTTP_PORT_1=${KAFKAZK_HTTP_PORT_1:-39081} KAFKAZK_HTTP_PORT_2=${KAFKAZK_HTTP_PORT_2:-39082} KAFKAZK_HTTP_PORT_3=${KAFKAZK_HTTP_PORT_3:-39083}
export KAFKAZK_SUBNET=${KAFKAZK_SUBNET:-172.30.39.0/24} KAFKAZK_NET=${KAFKAZK_NET:-172.30.39}
export BROKER_IMAGE=${BROKER_IMAGE:-kafkazk/broker:chaosops}
# replica.lag.time.max.ms as internal/chaos's local clusters (chaos.LagTime).
export KAFKA_REPLICA_LAG_TIME_MAX_MS=${KAFKA_REPLICA_LAG_TIME_MAX_MS:-5000}
# shellcheck source=docker/lib.sh
. "$ROOT/docker/lib.sh"
REPORT=${CHAOS_COMPOSE_REPORT:-chaos-compose-report.md}
KEEP=${KEEP:-0}

why=$(docker_usable) || die "$why"
[[ $(id -u) -eq 0 ]] || die "needs root: nsenter into the containers' network namespaces"
for tool in nsenter iptables tc; do command -v "$tool" >/dev/null 2>&1 || die "needs $tool on the host"; done

finish() {
	local rc=$?
	if [[ $KEEP == 1 ]]; then
		say "cluster $COMPOSE_PROJECT_NAME kept (KEEP=1); COMPOSE_PROJECT_NAME=$COMPOSE_PROJECT_NAME scripts/demo-failover.sh down removes it"
	else
		cluster_down >/dev/null 2>&1 || true
	fi
	exit "$rc"
}
trap finish EXIT

cluster_down >/dev/null 2>&1 || true
chaos_bin
cluster_up
args=(-out "$REPORT")
[[ -z ${CHAOS_COMPOSE_SCENARIOS:-} ]] || args+=(-scenarios "$CHAOS_COMPOSE_SCENARIOS")
# shellcheck disable=SC2206 # word splitting intended
args+=(${CHAOS_COMPOSE_ARGS:-})
chaos_compose "${args[@]}"
say "report written to $REPORT"
