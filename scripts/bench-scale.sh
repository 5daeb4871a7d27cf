#!/usr/bin/env bash
# bench-scale.sh: `make bench-scale` (issue 16). For each partition count in
# BENCH_SCALE_PARTITIONS it starts ZooKeeper (heap sized for the count) and
# three brokers with scripts/cluster.sh in a private directory, runs
# bin/kscale against them (create, idle CPU/RSS/fds, produce spread over
# 1,000 partitions vs 6, controlled shutdown, kill -9 of a broker and of
# the controller, restarts, ZooKeeper's znodes and snapshot; see
# cmd/kscale), and removes the cluster. It prints one JSON line per figure
# and a table per size; nothing is asserted. A failed size (a phase stuck,
# a broker dead or out of file descriptors) is reported with the phase, the
# broker and its log tail, and the next size still runs.
#
# Environment (defaults in brackets):
#   BENCH_SCALE_PARTITIONS ["1000 10000"]  sizes; add 100000 where the machine allows
#   BENCH_SCALE_DIR [/tmp/scale-bench]     one CLUSTER_DIR per size under it
#   BENCH_SCALE_ZK_PORT [22186]  BENCH_SCALE_BASE_PORT [29592]  BENCH_SCALE_HTTP_BASE_PORT [28580]
#   BENCH_SCALE_ZK_HEAP []       ZooKeeper's -Xmx; default 256 MiB plus
#                                ZK_HEAP_PER_PARTITION bytes a partition
#   ZK_HEAP_PER_PARTITION [4096] (measured: ~1.0 KiB of live heap a partition
#                                at 10,000, 0.9-1.6 KiB at 1,000, after a full GC;
#                                4 KiB leaves room for garbage and the creation)
#   BENCH_SCALE_PPROF []         a directory: CPU profiles of each broker per phase
#   KSCALE_ARGS []               more cmd/kscale flags, e.g. '--idle 60s --skip produce'
#   BROKER_OVERRIDES []          more broker settings (cluster.sh), after ours
#
# Broker settings: zookeeper.session.timeout.ms=6000 (a killed broker's
# znode vanishes after that; the failover figures count from the vanishing),
# auto.leader.rebalance.enable=false (leadership moves only when the
# benchmark moves it; it runs a preferred election before each kill).
# READY_TIMEOUT is raised for the restarts of brokers holding many logs.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
export PATH=$PATH:/usr/local/go/bin

SIZES=${BENCH_SCALE_PARTITIONS:-1000 10000}
BASE_DIR=${BENCH_SCALE_DIR:-/tmp/scale-bench}
export ZK_PORT=${BENCH_SCALE_ZK_PORT:-22186}
export BASE_PORT=${BENCH_SCALE_BASE_PORT:-29592}
export HTTP_BASE_PORT=${BENCH_SCALE_HTTP_BASE_PORT:-28580}
export BROKERS=3
export READY_TIMEOUT=${READY_TIMEOUT:-600}
export STOP_TIMEOUT=${STOP_TIMEOUT:-120}
export BROKER_OVERRIDES="zookeeper.session.timeout.ms=6000 auto.leader.rebalance.enable=false ${BROKER_OVERRIDES:-}"
PER_PART=${ZK_HEAP_PER_PARTITION:-4096}

for n in $SIZES; do
	[[ $n =~ ^[0-9]+$ && $n -gt 0 ]] || { echo "bench-scale: BENCH_SCALE_PARTITIONS: '$n' is not a partition count" >&2; exit 2; }
done

CGO_ENABLED=0 go build -trimpath -o bin/broker ./cmd/broker
go build -o bin/kscale ./cmd/kscale
mkdir -p "$BASE_DIR"

current=
cleanup() {
	[[ -z $current ]] || CLUSTER_DIR=$current scripts/cluster.sh clean >/dev/null 2>&1 || true
}
trap cleanup EXIT

status=0
for n in $SIZES; do
	dir=$BASE_DIR/p$n
	heap=${BENCH_SCALE_ZK_HEAP:-$((256 + n * PER_PART / 1048576))m}
	echo "bench-scale: $n partitions: ZooKeeper -Xmx$heap, cluster in $dir; load: $(uptime)" >&2
	CLUSTER_DIR=$dir scripts/cluster.sh clean >/dev/null 2>&1 || true
	current=$dir
	load=$(uptime | sed 's/.*load average: //')
	pprof=()
	[[ -z ${BENCH_SCALE_PPROF:-} ]] || pprof=(--pprof-dir "$BENCH_SCALE_PPROF")
	if ! CLUSTER_DIR=$dir ZK_HEAP=$heap BROKER_BIN=$ROOT/bin/broker scripts/cluster.sh up >"$BASE_DIR/p$n.up.log" 2>&1; then
		echo "bench-scale: $n partitions: cluster.sh up failed:" >&2
		tail -n 30 "$BASE_DIR/p$n.up.log" >&2
		status=1
		continue
	fi
	# shellcheck disable=SC2086 # KSCALE_ARGS is a list of flags
	if ! BROKER_BIN=$ROOT/bin/broker bin/kscale --cluster-dir "$dir" --cluster-sh "$ROOT/scripts/cluster.sh" \
		--partitions "$n" --load "$load" "${pprof[@]+"${pprof[@]}"}" ${KSCALE_ARGS:-}; then
		echo "bench-scale: $n partitions: FAILED (above: the phase, each broker and its log tail)" >&2
		status=1
	fi
	echo "bench-scale: $n partitions done; load: $(uptime)" >&2
	CLUSTER_DIR=$dir scripts/cluster.sh clean >/dev/null 2>&1 || true
	current=
done
exit "$status"
