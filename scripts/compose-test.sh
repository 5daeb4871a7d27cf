#!/usr/bin/env bash
# compose-test.sh: the compose smoke test (`make compose-test`, and the last
# stage of scripts/test.sh when COMPOSE_TEST=1): the images, the cluster of
# docker-compose.yml, and the failover demo with assertions.
#
#   1. images    scripts/images.sh (the ZooKeeper image is built once and kept)
#   2. up        ZooKeeper answers, brokers 1, 2 and 3 registered in ZooKeeper and
#                answering Metadata on 127.0.0.1:19092..19094
#   3. smoke     a topic with replication factor 1: 100 records produced with kcat
#                through one broker's host listener, all read back through another
#   4. failover  for each of VARIANTS, on a fresh cluster: bin/chaos compose
#                -scenarios VARIANT (cmd/chaos, internal/chaos: the workload and
#                history checker of make chaos): an idempotent acks=all
#                producer and single-attempt raw writers on a fresh topic of 3
#                partitions (RF 3, min.insync.replicas=2) and a consumer, the
#                leader's container broken (docker kill / pause / network
#                disconnect), then every replica's segment files read after a
#                docker stop: zero lost, duplicated, inconsistent or divergent
#                records, every partition acknowledged again within 2 x
#                zookeeper.session.timeout.ms + 10 s of the fault, the old
#                leader back in an ISR of three
#   5. zk-kill   the variant of VARIANTS on a fresh cluster with a three-node
#                ZooKeeper ensemble (docker-compose.zk3.yml over
#                docker-compose.yml, zookeeper.connect naming all three):
#                bin/chaos compose -scenarios zk-kill docker-kills the ensemble
#                leader while producing: no gap between acknowledgements
#                longer than zookeeper.session.timeout.ms + 5 s, every broker
#                registered with its old ZooKeeper session, a topic created
#                during the outage, the ISRs of three kept, the checker's zero
#                anomalies, the node back as follower or leader after docker
#                start
#
# Containers, the network and the volumes are removed at the end, whatever
# happened (the images are kept). It prints one `ok`/`FAIL` line per step, the
# way go test prints packages, which scripts/test.sh counts.
#
# KAFKAZK_SECURE=1 (make compose-test-secure) runs every step on the secured
# variant (docker-compose.secure.yml: SASL_SSL + SCRAM-SHA-512 for clients, TLS
# between brokers, ZooKeeper digest auth), the clients configured through
# docker/lib.sh's KCAT_SEC and the kcat.conf bin/chaos reads (-client-config),
# the checks unchanged.
#
# Environment (defaults in brackets), besides docker/lib.sh's:
#   VARIANTS [kill pause partition zk-kill]  the faults to test
#   COMPOSE_PROJECT_NAME [kafkazk-test]
#   STEP_TIMEOUT [300]  seconds one failover variant may take
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export COMPOSE_PROJECT_NAME=${COMPOSE_PROJECT_NAME:-kafkazk-test}
# shellcheck source=docker/lib.sh
. "$ROOT/docker/lib.sh"
VARIANTS=${VARIANTS:-kill pause partition zk-kill}
STEP_TIMEOUT=${STEP_TIMEOUT:-300}

why=$(docker_usable) || die "$why"

declare -a results=()
passed=0
failed=0
started=$SECONDS
out=$(mktemp -d)

result() {
	local ok=$1 name=$2 secs=$3
	if ((ok)); then
		results+=("$(printf 'ok  \tcompose/%s\t%ss' "$name" "$secs")")
		passed=$((passed + 1))
	else
		results+=("$(printf 'FAIL\tcompose/%s\t%ss' "$name" "$secs")")
		failed=$((failed + 1))
	fi
}

# ensemble_variant VARIANT: whether it runs on the three-node ZooKeeper ensemble.
ensemble_variant() { [[ $1 == zk-* ]]; }
any_ensemble=0
for variant in $VARIANTS; do ensemble_variant "$variant" && any_ensemble=1; done
# Teardowns name docker-compose.zk3.yml too when a variant uses it, so that its
# containers and volumes go whichever cluster is up.
((!any_ensemble)) || use_zk_ensemble

finish() {
	local rc=$?
	((!any_ensemble)) || use_zk_ensemble
	say "teardown: containers, network and volumes of project $COMPOSE_PROJECT_NAME"
	cluster_down >/dev/null 2>&1 || cluster_down || true
	rm -rf "$out"
	echo
	printf '%s\n' "${results[@]+"${results[@]}"}"
	say "compose test: $passed passed, $failed failed in $((SECONDS - started))s"
	if ((failed > 0 || rc != 0)); then exit 1; fi
}
trap finish EXIT

# Ports the cluster publishes must be free (a `make compose-up` cluster holds them).
for port in "${ZK_PORTS[@]}" "$KAFKAZK_PORT_1" "$KAFKAZK_PORT_2" "$KAFKAZK_PORT_3"; do
	# shellcheck disable=SC2016 # expanded by the inner bash
	if timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"' _ "$port" 2>/dev/null; then
		result 0 preflight 0
		die "127.0.0.1:$port is in use (a cluster from make compose-up? make compose-down stops it)"
	fi
done

# A leftover cluster of this project from an interrupted run.
cluster_down >/dev/null 2>&1 || true
use_single_zookeeper

step=$SECONDS
deps
chaos_bin
if "$ROOT/scripts/images.sh"; then
	result 1 images $((SECONDS - step))
else
	result 0 images $((SECONDS - step))
	exit 1
fi

step=$SECONDS
if (NO_BUILD=1 cluster_up); then
	result 1 up $((SECONDS - step))
else
	result 0 up $((SECONDS - step))
	exit 1
fi

step=$SECONDS
smoke() {
	local topic n
	topic=smoke-$(date +%s)
	local -a cc=()
	[[ $KAFKAZK_SECURE != 1 ]] || cc=(--command-config "$KAFKAZK_SECURE_DIR/client.properties")
	"$ROOT/bin/kafka-admin" topics "${cc[@]+"${cc[@]}"}" --bootstrap-server "$BOOTSTRAP" --create --topic "$topic" \
		--partitions 1 --replication-factor 1 >/dev/null || return 1
	seq 1 100 | sed 's/^/smoke-/' |
		timeout 60 kcat "${KCAT_SEC[@]+"${KCAT_SEC[@]}"}" -P -b "127.0.0.1:$KAFKAZK_PORT_1" -t "$topic" -X acks=all -X message.timeout.ms=30000 ||
		{
			say "smoke: kcat -P failed"
			return 1
		}
	# -c rather than -e: the count is known, and -e waits for an end-of-partition.
	n=$(timeout 60 kcat "${KCAT_SEC[@]+"${KCAT_SEC[@]}"}" -C -b "127.0.0.1:$KAFKAZK_PORT_2" -t "$topic" -o beginning -c 100 -q 2>/dev/null |
		grep -c '^smoke-' || true)
	say "smoke: topic $topic: produced 100 through 127.0.0.1:$KAFKAZK_PORT_1, read $n back through 127.0.0.1:$KAFKAZK_PORT_2"
	((n == 100))
}
if smoke; then result 1 smoke $((SECONDS - step)); else result 0 smoke $((SECONDS - step)); fi

first=1
for variant in $VARIANTS; do
	step=$SECONDS
	echo
	say "=== failover --$variant"
	ok=1
	want=0
	ensemble_variant "$variant" && want=1
	if ((!first || want != ZK_ENSEMBLE)); then
		# Down with the files of the cluster that is up, then up with the other's.
		cluster_down >/dev/null 2>&1 || ok=0
		if ((want)); then use_zk_ensemble; else use_single_zookeeper; fi
		((ok)) && (NO_BUILD=1 cluster_up) || ok=0
	fi
	first=0
	if ((ok)); then
		chaos_compose_args
		timeout --foreground -k 10 "$STEP_TIMEOUT" "$ROOT/bin/chaos" compose "${CHAOS_ARGS[@]}" \
			-scenarios "$variant" -out "$out/$variant.md" || ok=0
	fi
	if ((!ok)); then
		say "failover --$variant failed; the brokers' last log lines:"
		for id in "${BROKER_IDS[@]}"; do compose logs --no-color --tail=8 "broker-$id" 2>&1 | cut -c1-300 || true; done
		if ensemble_variant "$variant"; then
			for svc in "${ZK_SERVICES[@]}"; do compose logs --no-color --tail=5 "$svc" 2>&1 | cut -c1-300 || true; done
		fi
	fi
	result "$ok" "failover-$variant" $((SECONDS - step))
done
