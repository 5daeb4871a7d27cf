#!/usr/bin/env bash
# demo-failover.sh: the docker-compose cluster (ZooKeeper and three brokers)
# losing a partition leader, for a person watching (`make demo`).
#
#   scripts/demo-failover.sh [--zk-ensemble] [--kill|--pause|--partition] [--assert] [--down]
#   scripts/demo-failover.sh --kill-zookeeper [--assert] [--down]
#   scripts/demo-failover.sh [--zk-ensemble] up | down | status
#
# It builds the images (scripts/images.sh) and bin/chaos, brings the cluster
# up, and runs `bin/chaos compose -watch` (cmd/chaos, internal/chaos: the
# workload and history checker of make chaos): a fresh topic of 3 partitions
# with replication factor 3 and min.insync.replicas=2, an idempotent acks=all
# producer, single-attempt raw writers and a consumer on the host; then it
# breaks partition 0's leader's container:
#
#   --kill       docker kill (default); docker start after 2 x zookeeper.session.timeout.ms
#   --pause      docker pause for 3 x zookeeper.session.timeout.ms; docker unpause
#   --partition  docker network disconnect from the compose network for as long;
#                docker network connect with its old address
#
# and prints a timeline as it happens: every change of the registered brokers,
# the controller, and each partition's leader, leader_epoch and ISR (sampled
# from ZooKeeper every 100 ms); then the repair, the brokers back and the ISRs
# full. It ends with the checker's table: attempted, acknowledged, failed,
# indeterminate, lost (must be 0), duplicated, inconsistent, divergent
# replicas (each broker's segment files, copied out after a docker stop),
# unavailability and detection/election times; and the checks compose-test.sh
# asserts (acknowledged again within 2 x session timeout + 10 s).
#
#   --zk-ensemble     three ZooKeeper nodes instead of one: docker-compose.zk3.yml
#                     over docker-compose.yml, the brokers' zookeeper.connect
#                     naming all three (also ZK_ENSEMBLE=1); chosen by itself
#                     when the project's cluster already has zookeeper-2
#   --kill-zookeeper  on the ensemble (implies --zk-ensemble): docker kill the
#                     ZooKeeper leader while producing and show the brokers carry
#                     on (bin/chaos compose -scenarios zk-kill): the timeline,
#                     a topic created during the outage, the brokers'
#                     ZooKeeper sessions kept, no gap between acknowledgements
#                     over session timeout + 5 s, docker start and the node
#                     back in the ensemble; the table as above
#   --assert   exit non-zero when a check fails (compose-test.sh)
#   --down     remove the cluster (containers, network, volumes) at the end;
#              by default it stays up to look at (see the hints printed)
#   up         build the images and start the cluster, wait until it is ready
#   down       remove the containers, the network and the volumes
#   status     compose ps, registered brokers, controller, topics (kcat -L)
#
# Environment: see docker/lib.sh (COMPOSE, COMPOSE_PROJECT_NAME, ZOOKEEPER_IMAGE,
# ports, KAFKA_ZOOKEEPER_SESSION_TIMEOUT_MS [6000], NO_BUILD, READY_TIMEOUT) and
#   RESULT []  also write the checker's Markdown report to this file
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=docker/lib.sh
. "$ROOT/docker/lib.sh"

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'; }

hints() {
	cat <<-HINTS

		The cluster is still up. To look at it:
		  kcat ${KCAT_SEC[*]+${KCAT_SEC[*]} }-b 127.0.0.1:$KAFKAZK_PORT_1 -L                      # brokers, leaders, replicas, ISRs
		  kcat ${KCAT_SEC[*]+${KCAT_SEC[*]} }-b 127.0.0.1:$KAFKAZK_PORT_1 -t ${TOPIC:-TOPIC} -C -c 10    # records
		  ${COMPOSE_CMD[*]} -p $COMPOSE_PROJECT_NAME exec zookeeper zkCli.sh get /brokers/topics/${TOPIC:-TOPIC}/partitions/0/state
		  /usr/share/zookeeper/bin/zkCli.sh -server $ZK_HOST ls /brokers/ids
		  ${COMPOSE_CMD[*]} -p $COMPOSE_PROJECT_NAME logs -f broker-1
		  scripts/demo-failover.sh status                           # containers, ZooKeeper modes, brokers
		  make compose-down                                         # remove it all
	HINTS
}

cmd_status() {
	local i
	compose ps
	for i in "${!ZK_SERVICES[@]}"; do
		printf 'ZooKeeper %s: %s\n' "${ZK_SERVICES[$i]}" \
			"$(ZOOKEEPER_HOST_PORT=${ZK_PORTS[$i]} zk_4lw srvr | grep -E '^Mode:' || echo 'no answer')"
	done
	printf 'registered brokers: %s\n' "$(registered)"
	kcat "${KCAT_SEC[@]+"${KCAT_SEC[@]}"}" -L -b "$BOOTSTRAP" -m 5 2>&1 || true
}

demo() {
	local fault=$1 check=$2 down=$3 rc=0
	local -a args=(-watch -scenarios "$fault")
	chaos_bin
	cluster_up
	cluster_repair
	[[ -z ${RESULT:-} ]] || args+=(-out "$RESULT")
	echo
	chaos_compose "${args[@]}" || rc=$?
	((check)) || rc=0
	if ((down)); then
		cluster_down
	else
		cluster_repair
		hints
	fi
	return "$rc"
}

main() {
	local fault=kill check=0 down=0
	# An ensemble cluster that is up is run, shown and removed as one.
	if ((ZK_ENSEMBLE != 1)) && command -v docker >/dev/null 2>&1 && ensemble_present; then
		use_zk_ensemble
	fi
	while (($# > 0)); do
		case $1 in
		--kill) fault="kill" ;;
		--pause) fault=pause ;;
		--partition) fault=partition ;;
		--zk-ensemble) use_zk_ensemble ;;
		--kill-zookeeper)
			fault=zk-kill
			use_zk_ensemble
			;;
		--assert) check=1 ;;
		--down) down=1 ;;
		up)
			cluster_up
			return
			;;
		down)
			cluster_down
			return
			;;
		status)
			cmd_status
			return
			;;
		-h | --help | help)
			usage
			return
			;;
		*)
			usage >&2
			exit 2
			;;
		esac
		shift
	done
	why=$(docker_usable) || die "$why"
	demo "$fault" "$check" "$down"
}

main "$@"
