#!/usr/bin/env bash
# bench.sh: `make bench`. Builds the broker and cmd/kbench, starts ZooKeeper
# and three brokers in a private directory on their own ports, runs kbench
# against them side by side with an in-process kfake cluster
# (--compare-kfake), and removes the cluster.
#
# Environment (defaults in brackets):
#   KBENCH_ARGS []            more kbench flags, e.g. '--reps=5 --scenarios=produce'
#   BENCH_CLUSTER_DIR [$TMPDIR/kafkazk-bench-cluster]
#   BENCH_ZK_PORT [32181]     BENCH_BASE_PORT [39092]  BENCH_HTTP_BASE_PORT [38080]
#   BENCH_BROKER_MEM_MIB [1024]  memory cgroup limit per broker; 0 leaves the
#                             brokers unconfined.
#   BENCH_COMPACT_RATE []     if set (records/s, `make bench-compact`), run
#                             kbench twice on the same cluster with the same
#                             flags: first as usual, then with
#                             --compact-beside RATE, and print both tables and
#                             the with/without ratio per scenario (issue 13).
#   BENCH_OUT_DIR [mktemp]    where bench-compact keeps both reports
#   BENCH_SECURE []           1 (`make bench-secure`, issue 14): the cluster is
#                             cluster.sh SECURITY=sasl_ssl with a PLAINTEXT
#                             listener beside (PLAINTEXT_BASE_PORT), and kbench
#                             runs 1 KiB acks=all produce and consume over both
#                             listeners of the same brokers, alternating, with
#                             the secured/plaintext ratio (--secure-brokers,
#                             instead of --compare-kfake); KBENCH_ARGS after ours
#   BROKER_OVERRIDES []       more broker settings (cluster.sh), after ours
#
# Cleaner settings, in every run (so that with and without --compact-beside
# differ only in the compaction load): log.cleaner.backoff.ms=1000 so the
# cleaner looks for work every second (Kafka's default 15 s would leave it
# idle through most short scenarios), and log.cleaner.dedupe.buffer.size=
# 32 MiB: the offset map is that size / log.cleaner.threads (1) and a pass
# touches all of it, so Kafka's default 128 MiB would take an eighth of the
# 1024 MiB cgroup from the page cache the consume topic (256 MiB per
# broker) lives in; 32 MiB holds ~1.4M keys, far more than the 10,000 the
# compaction load writes.
#
# Why a memory cgroup: this machine is a VM whose host takes back the memory
# the guest frees (virtio-balloon free page reporting), so the first write
# into every page the guest had not used recently faults on the host. dd of
# 2 GiB into the page cache runs at ~480 MB/s on such pages and ~3.5 GB/s on
# pages just reused. An unconfined broker on a machine with 20 GiB free grows
# its page cache into fresh pages on every write, three times per produced
# byte at RF=3, and that first touch was 47% of all CPU in a perf profile of
# acks=all produce. A broker host in steady state has a full page cache and
# recycles it; a per-broker memory limit (as a container limit would) gives
# the brokers that steady state. The limit holds every byte the scenarios
# keep (the consume topic is 256 MiB per broker), so reads still come from
# the page cache. The in-process kfake reference is not confined (its data
# is its heap). Run with BENCH_BROKER_MEM_MIB=0 to see the unconfined figures.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
export PATH=$PATH:/usr/local/go/bin

export CLUSTER_DIR=${BENCH_CLUSTER_DIR:-${TMPDIR:-/tmp}/kafkazk-bench-cluster}
export ZK_PORT=${BENCH_ZK_PORT:-32181}
export BASE_PORT=${BENCH_BASE_PORT:-39092}
export HTTP_BASE_PORT=${BENCH_HTTP_BASE_PORT:-38080}
export BROKERS=3
MEM_MIB=${BENCH_BROKER_MEM_MIB:-1024}
export BROKER_OVERRIDES="log.cleaner.backoff.ms=1000 log.cleaner.dedupe.buffer.size=33554432 ${BROKER_OVERRIDES:-}"
COMPACT_RATE=${BENCH_COMPACT_RATE:-}
SECURE=${BENCH_SECURE:-}
if [[ $SECURE == 1 ]]; then
	export SECURITY=sasl_ssl PLAINTEXT_BASE_PORT=$((BASE_PORT + 100))
fi

go build -o bin/kbench ./cmd/kbench

cgroups=()
cleanup() {
	scripts/cluster.sh clean || true
	local cg
	for cg in "${cgroups[@]}"; do
		rmdir "$cg" 2>/dev/null || true
	done
}
trap cleanup EXIT

# memory_cgroup_dir prints the directory of this shell's memory cgroup
# (cgroup v1 memory controller, or the v2 unified tree), or fails.
memory_cgroup_dir() {
	local line path
	while IFS= read -r line; do
		case $line in
		*:memory:*)
			path=${line#*:memory:}
			[[ -d /sys/fs/cgroup/memory$path ]] && { printf '%s\n' "/sys/fs/cgroup/memory${path%/}"; return 0; }
			;;
		0::*)
			path=${line#0::}
			[[ -f /sys/fs/cgroup/cgroup.controllers ]] && grep -qw memory /sys/fs/cgroup/cgroup.controllers &&
				{ printf '%s\n' "/sys/fs/cgroup${path%/}"; return 0; }
			;;
		esac
	done </proc/self/cgroup
	return 1
}

# confine_brokers moves each broker into a memory cgroup of its own limited
# to MEM_MIB, or says why it cannot and leaves them as they are.
confine_brokers() {
	local parent id pid cg limit=$((MEM_MIB << 20))
	if ! parent=$(memory_cgroup_dir) || [[ ! -w $parent ]]; then
		echo "bench: no writable memory cgroup; brokers run unconfined" >&2
		return 0
	fi
	for ((id = 0; id < BROKERS; id++)); do
		pid=$(<"$CLUSTER_DIR/broker-$id/broker.pid")
		cg=$parent/kafkazk-bench-broker-$id
		mkdir -p "$cg" || { echo "bench: cannot create $cg; brokers run unconfined" >&2; return 0; }
		cgroups+=("$cg")
		if [[ -f $cg/memory.limit_in_bytes ]]; then
			echo "$limit" >"$cg/memory.limit_in_bytes"
		else
			echo "$limit" >"$cg/memory.max"
		fi
		echo "$pid" >"$cg/cgroup.procs"
	done
	echo "bench: each broker in its own memory cgroup limited to ${MEM_MIB} MiB (page cache included)" >&2
}

# With a memory cgroup, the brokers' Go heap gets a soft limit of 3/4 of it
# (GOMEMLIMIT): Go's GC does not see the cgroup, and with GOGC alone a
# heap of pooled fetch buffers may grow to twice what is live, until the
# cgroup's OOM killer ends the broker (seen in bench-secure's consume).
if ((MEM_MIB > 0)); then
	GOMEMLIMIT=$((MEM_MIB * 3 / 4))MiB scripts/cluster.sh up
else
	scripts/cluster.sh up
fi
if ((MEM_MIB > 0)); then
	confine_brokers
else
	echo "bench: BENCH_BROKER_MEM_MIB=0: brokers run unconfined" >&2
fi

brokers="127.0.0.1:$BASE_PORT,127.0.0.1:$((BASE_PORT + 1)),127.0.0.1:$((BASE_PORT + 2))"
if [[ $SECURE == 1 ]]; then
	p=$PLAINTEXT_BASE_PORT
	# Not exec: the EXIT trap removes the cluster.
	# shellcheck disable=SC2086 # KBENCH_ARGS is a list of flags
	bin/kbench --scenarios=produce,consume --sizes=1024 --acks=all ${KBENCH_ARGS:-} \
		--secure-brokers "$brokers" --secure-config "$CLUSTER_DIR/client.properties" \
		--brokers "127.0.0.1:$p,127.0.0.1:$((p + 1)),127.0.0.1:$((p + 2))"
	exit
fi
# What --compact-beside reads to show that the cleaner ran: each broker's
# /metrics (kafka_log_logcleaner* gauges) and log dir (cleaner-offset-checkpoint).
metrics_urls= log_dirs=
for ((id = 0; id < BROKERS; id++)); do
	metrics_urls+=${metrics_urls:+,}http://127.0.0.1:$((HTTP_BASE_PORT + id))/metrics
	log_dirs+=${log_dirs:+,}$CLUSTER_DIR/broker-$id/data
done

# kbench_run runs kbench with the usual flags and any given.
kbench_run() {
	# shellcheck disable=SC2086 # KBENCH_ARGS is a list of flags
	bin/kbench --compare-kfake ${KBENCH_ARGS:-} "$@" \
		--metrics-urls "$metrics_urls" --log-dirs "$log_dirs" --brokers "$brokers"
}

if [[ -z $COMPACT_RATE ]]; then
	kbench_run
	exit
fi

out=${BENCH_OUT_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/kafkazk-bench-compact.XXXXXX")}
mkdir -p "$out"
echo "bench: run 1 of 2: without compaction (report $out/without.txt)" >&2
status=0
kbench_run | tee "$out/without.txt" || status=$?
echo "bench: run 2 of 2: with --compact-beside $COMPACT_RATE (report $out/with.txt)" >&2
kbench_run --compact-beside "$COMPACT_RATE" | tee "$out/with.txt" || status=$?
printf '\n## Without compaction beside\n\n'
grep '^|' "$out/without.txt"
printf '\n## With --compact-beside %s (compacted topic on the cluster only)\n\n' "$COMPACT_RATE"
grep '^|' "$out/with.txt"
grep '^compaction beside\|^  ' "$out/with.txt" || true
printf '\n## With / without (MB/s; e2e: p99 ms, above 1 is slower). The compacted topic is on the cluster only; kfake'"'"'s column is the drift of the shared machine plus the CPU the load and the cleaner take from it\n\n'
bin/kbench --beside-report "$out/without.txt,$out/with.txt" || status=$?
exit "$status"
