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

scripts/cluster.sh up
if ((MEM_MIB > 0)); then
	confine_brokers
else
	echo "bench: BENCH_BROKER_MEM_MIB=0: brokers run unconfined" >&2
fi

# shellcheck disable=SC2086 # KBENCH_ARGS is a list of flags
bin/kbench --compare-kfake ${KBENCH_ARGS:-} \
	--brokers "127.0.0.1:$BASE_PORT,127.0.0.1:$((BASE_PORT + 1)),127.0.0.1:$((BASE_PORT + 2))"
