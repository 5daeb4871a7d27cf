# shellcheck shell=bash
# lib.sh: shared by scripts/demo-failover.sh and scripts/compose-test.sh, which
# source it. It picks the compose command, sets the defaults of the compose
# cluster, and brings the cluster up and down.
#
# Environment (defaults in brackets):
#   COMPOSE [docker compose if it works, else docker-compose]
#   COMPOSE_PROJECT_NAME [kafkazk]
#   ZOOKEEPER_IMAGE [kafkazk/zookeeper:3.8-debian]  built by scripts/images.sh;
#                   set it to zookeeper:3.8 to use the official image
#   ZOOKEEPER_HOST_PORT [22181], KAFKAZK_PORT_1..3 [19092..19094]
#   KAFKA_ZOOKEEPER_SESSION_TIMEOUT_MS [6000]
#   NO_BUILD [0]    1: do not run scripts/images.sh before `up`
#   READY_TIMEOUT [120]  seconds to wait for ZooKeeper and the brokers
#   ZK_ENSEMBLE [0] 1: three ZooKeeper nodes (docker-compose.zk3.yml over
#                   docker-compose.yml), as use_zk_ensemble sets
#   ZOOKEEPER_HOST_PORT_2, _3 [22182, 22183]  zookeeper-2/3's client ports on
#                   the host (ensemble only)
#   KAFKAZK_SECURE [0]  1: the secured cluster of docker-compose.secure.yml over
#                   the others (SASL_SSL + SCRAM-SHA-512 for clients, TLS between
#                   brokers, ZooKeeper digest auth); secure_setup makes its
#                   certificates, passwords and config files in
#   KAFKAZK_SECURE_DIR [<repo>/.compose-secure], and host-side clients get the
#                   security config: kcat through KCAT_SEC (-F kcat.conf),
#                   bin/chaos and bin/kafka-admin through the same file and
#                   client.properties

ROOT=${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
export COMPOSE_PROJECT_NAME=${COMPOSE_PROJECT_NAME:-kafkazk}
export ZOOKEEPER_IMAGE=${ZOOKEEPER_IMAGE:-kafkazk/zookeeper:3.8-debian}
export ZOOKEEPER_HOST_PORT=${ZOOKEEPER_HOST_PORT:-22181}
export KAFKAZK_PORT_1=${KAFKAZK_PORT_1:-19092}
export KAFKAZK_PORT_2=${KAFKAZK_PORT_2:-19093}
export KAFKAZK_PORT_3=${KAFKAZK_PORT_3:-19094}
export KAFKA_ZOOKEEPER_SESSION_TIMEOUT_MS=${KAFKA_ZOOKEEPER_SESSION_TIMEOUT_MS:-6000}
NO_BUILD=${NO_BUILD:-0}
READY_TIMEOUT=${READY_TIMEOUT:-120}
BROKER_IDS=(1 2 3)
BOOTSTRAP=127.0.0.1:$KAFKAZK_PORT_1,127.0.0.1:$KAFKAZK_PORT_2,127.0.0.1:$KAFKAZK_PORT_3
ZK_HOST=127.0.0.1:$ZOOKEEPER_HOST_PORT
NETWORK=${COMPOSE_PROJECT_NAME}_kafkazk
COMPOSE_FILES=(-f "$ROOT/docker-compose.yml")
KAFKAZK_SECURE=${KAFKAZK_SECURE:-0}
export KAFKAZK_SECURE_DIR=${KAFKAZK_SECURE_DIR:-$ROOT/.compose-secure}
KCAT_SEC=()
if [[ $KAFKAZK_SECURE == 1 ]]; then
	COMPOSE_FILES+=(-f "$ROOT/docker-compose.secure.yml")
	KCAT_SEC=(-F "$KAFKAZK_SECURE_DIR/kcat.conf")
fi
# secure_file: the secured variant's compose file, when KAFKAZK_SECURE=1.
secure_file() { [[ $KAFKAZK_SECURE != 1 ]] || printf '%s\n' -f "$ROOT/docker-compose.secure.yml"; }
export ZOOKEEPER_HOST_PORT_2=${ZOOKEEPER_HOST_PORT_2:-22182}
export ZOOKEEPER_HOST_PORT_3=${ZOOKEEPER_HOST_PORT_3:-22183}
ZK_SERVICES=(zookeeper) # the ZooKeeper services, and their client ports on the host
ZK_PORTS=("$ZOOKEEPER_HOST_PORT")
ZK_CONNECT_SAVED=${KAFKA_ZOOKEEPER_CONNECT-unset}

# use_zk_ensemble: from now on, the cluster of docker-compose.yml with
# docker-compose.zk3.yml over it: ZooKeeper servers zookeeper, zookeeper-2 and
# zookeeper-3, and the brokers' zookeeper.connect naming all three.
use_zk_ensemble() {
	ZK_ENSEMBLE=1
	COMPOSE_FILES=(-f "$ROOT/docker-compose.yml" -f "$ROOT/docker-compose.zk3.yml")
	mapfile -t -O "${#COMPOSE_FILES[@]}" COMPOSE_FILES < <(secure_file)
	export KAFKA_ZOOKEEPER_CONNECT=zookeeper:2181,zookeeper-2:2181,zookeeper-3:2181
	ZK_SERVICES=(zookeeper zookeeper-2 zookeeper-3)
	ZK_PORTS=("$ZOOKEEPER_HOST_PORT" "$ZOOKEEPER_HOST_PORT_2" "$ZOOKEEPER_HOST_PORT_3")
	ZK_HOST=127.0.0.1:$ZOOKEEPER_HOST_PORT,127.0.0.1:$ZOOKEEPER_HOST_PORT_2,127.0.0.1:$ZOOKEEPER_HOST_PORT_3
}

# use_single_zookeeper: back to docker-compose.yml alone (one ZooKeeper).
# shellcheck disable=SC2034 # ZK_SERVICES, ZK_PORTS: for the scripts sourcing this
use_single_zookeeper() {
	ZK_ENSEMBLE=0
	COMPOSE_FILES=(-f "$ROOT/docker-compose.yml")
	mapfile -t -O "${#COMPOSE_FILES[@]}" COMPOSE_FILES < <(secure_file)
	if [[ $ZK_CONNECT_SAVED == unset ]]; then unset KAFKA_ZOOKEEPER_CONNECT; else export KAFKA_ZOOKEEPER_CONNECT=$ZK_CONNECT_SAVED; fi
	ZK_SERVICES=(zookeeper)
	ZK_PORTS=("$ZOOKEEPER_HOST_PORT")
	ZK_HOST=127.0.0.1:$ZOOKEEPER_HOST_PORT
}
ZK_ENSEMBLE=${ZK_ENSEMBLE:-0}
[[ $ZK_ENSEMBLE != 1 ]] || use_zk_ensemble

# ensemble_present: the project has a zookeeper-2 container (running or not),
# so it was brought up with docker-compose.zk3.yml.
ensemble_present() {
	[[ -n $(docker ps -aq --filter "label=com.docker.compose.project=$COMPOSE_PROJECT_NAME" \
		--filter label=com.docker.compose.service=zookeeper-2 2>/dev/null) ]]
}

say() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*"; }
die() {
	printf '%s: %s\n' "${0##*/}" "$*" >&2
	exit 1
}

# docker_usable: docker and a compose command exist and the engine answers.
# Otherwise it prints why and fails.
docker_usable() {
	if ! command -v docker >/dev/null 2>&1; then
		echo "docker is not installed"
		return 1
	fi
	if ! docker info >/dev/null 2>&1; then
		echo "the docker engine does not answer (docker info failed)"
		return 1
	fi
	if ! docker compose version >/dev/null 2>&1 && ! command -v docker-compose >/dev/null 2>&1; then
		echo "neither 'docker compose' nor 'docker-compose' is installed"
		return 1
	fi
}

if [[ -n ${COMPOSE:-} ]]; then
	read -ra COMPOSE_CMD <<<"$COMPOSE"
elif docker compose version >/dev/null 2>&1; then
	COMPOSE_CMD=(docker compose)
else
	COMPOSE_CMD=(docker-compose)
fi

compose() { "${COMPOSE_CMD[@]}" "${COMPOSE_FILES[@]}" "$@"; }

# deps: what the host side needs: kcat (the smoke test and `status`); the
# failover checks are bin/chaos (cmd/chaos compose), built by chaos_bin.
deps() {
	command -v kcat >/dev/null 2>&1 && return 0
	[[ $(id -u) -eq 0 ]] || die "missing: kcat; run as root: apt-get install -y kcat"
	say "installing kcat"
	DEBIAN_FRONTEND=noninteractive apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends kcat >/dev/null
}

# chaos_bin: build bin/chaos and bin/kafka-admin from this tree (the
# workload, docker faults and history checker of internal/chaos, which the
# demo, compose-test and chaos-compose print through).
chaos_bin() {
	(cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -o bin/chaos ./cmd/chaos &&
		CGO_ENABLED=0 go build -trimpath -o bin/kafka-admin ./cmd/kafka-admin) || die "cannot build bin/chaos"
}

# chaos_compose_args: CHAOS_ARGS, the bin/chaos compose flags naming this
# project's cluster: the brokers' host listeners and containers, every
# ZooKeeper server, the network, the session timeout, and the secured
# variant's client config.
chaos_compose_args() {
	local id i cid port_var
	local -a brokers=() containers=() zks=()
	for id in "${BROKER_IDS[@]}"; do
		port_var=KAFKAZK_PORT_$id
		cid=$(container "broker-$id")
		[[ -n $cid ]] || die "no container for broker-$id"
		brokers+=("$id=127.0.0.1:${!port_var}")
		containers+=("$id=$cid")
	done
	for i in "${!ZK_SERVICES[@]}"; do
		cid=$(container "${ZK_SERVICES[$i]}")
		[[ -n $cid ]] || die "no container for ${ZK_SERVICES[$i]}"
		zks+=("${ZK_SERVICES[$i]}=127.0.0.1:${ZK_PORTS[$i]}=$cid")
	done
	CHAOS_ARGS=(-brokers "$(IFS=,; echo "${brokers[*]}")" -containers "$(IFS=,; echo "${containers[*]}")"
		-zk "$(IFS=,; echo "${zks[*]}")" -network "$NETWORK" -session "${KAFKA_ZOOKEEPER_SESSION_TIMEOUT_MS}ms")
	[[ $KAFKAZK_SECURE != 1 ]] || CHAOS_ARGS+=(-client-config "$KAFKAZK_SECURE_DIR/kcat.conf")
}

# chaos_compose ARGS...: bin/chaos compose against this project's cluster.
chaos_compose() {
	chaos_compose_args
	"$ROOT/bin/chaos" compose "${CHAOS_ARGS[@]}" "$@"
}

container() { compose ps -q "$1"; }

# zk_4lw CMD: a ZooKeeper four-letter word through the published port.
zk_4lw() {
	# shellcheck disable=SC2016 # expanded by the inner bash
	timeout 5 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf %s "$2" >&3 && cat <&3' \
		_ "$ZOOKEEPER_HOST_PORT" "$1" 2>/dev/null
}

# registered: the broker ids with a /brokers/ids znode, from `dump`.
registered() {
	zk_4lw dump | grep -oE '^[[:space:]]*/brokers/ids/[0-9]+$' | grep -oE '[0-9]+$' | sort -n | tr '\n' ' '
}

# broker_answers ID: Metadata through the broker's host listener names 3 brokers.
broker_answers() {
	local port_var=KAFKAZK_PORT_$1
	timeout 10 kcat "${KCAT_SEC[@]+"${KCAT_SEC[@]}"}" -L -b "127.0.0.1:${!port_var}" -m 5 2>/dev/null | grep -q '^ 3 brokers:'
}

# secure_setup: for KAFKAZK_SECURE=1, the files docker-compose.secure.yml
# mounts and the host-side clients read, in KAFKAZK_SECURE_DIR; made once and
# kept (`rm -rf` the directory for new certificates and passwords).
secure_setup() {
	[[ $KAFKAZK_SECURE == 1 ]] || return 0
	local d=$KAFKAZK_SECURE_DIR
	command -v openssl >/dev/null 2>&1 || die "KAFKAZK_SECURE=1 needs openssl"
	mkdir -p "$d"
	# The containers run as root, but as another uid on rootless engines:
	# the keys of this throwaway CA are made readable (CHMOD=644).
	[[ -f $d/certs/broker-keystore.pem ]] ||
		SANS="DNS:broker-1 DNS:broker-2 DNS:broker-3" CHMOD=644 "$ROOT/scripts/gen-certs.sh" "$d/certs" broker >/dev/null ||
		die "scripts/gen-certs.sh failed"
	if [[ ! -f $d/secrets.env ]]; then
		(umask 077 && printf 'ADMIN_PASSWORD=%s\nZK_PASSWORD=%s\n' "$(openssl rand -hex 16)" "$(openssl rand -hex 16)" >"$d/secrets.env")
	fi
	# shellcheck source=/dev/null
	. "$d/secrets.env"
	local c=/etc/kafkazk/secure
	{
		cat "$ROOT/docker/server.properties"
		printf '\n# docker/lib.sh secure_setup: the secured variant (docker-compose.secure.yml)\n'
		printf '%s\n' \
			"listener.name.internal.ssl.client.auth=required" \
			"ssl.keystore.type=PEM" \
			"ssl.keystore.location=$c/certs/broker-keystore.pem" \
			"ssl.truststore.type=PEM" \
			"ssl.truststore.location=$c/certs/ca.pem" \
			'ssl.principal.mapping.rules=RULE:^CN=([^,]*),.*$/$1/,DEFAULT' \
			"sasl.enabled.mechanisms=SCRAM-SHA-512" \
			"listener.name.external.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;" \
			"authorizer.class.name=kafka.security.authorizer.AclAuthorizer" \
			"super.users=User:admin;User:broker" \
			"allow.everyone.if.no.acl.found=false" \
			"zookeeper.set.acl=true"
	} >"$d/server.properties"
	printf 'Client {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  username="kafka"\n  password="%s";\n};\n' \
		"$ZK_PASSWORD" >"$d/zk_client_jaas.conf"
	printf '%s\n' "# bin/kafka-admin --command-config $d/client.properties --bootstrap-server $BOOTSTRAP ..." \
		"security.protocol=SASL_SSL" \
		"sasl.mechanism=SCRAM-SHA-512" \
		"sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"admin\" password=\"$ADMIN_PASSWORD\";" \
		"ssl.truststore.type=PEM" \
		"ssl.truststore.location=$d/certs/ca.pem" >"$d/client.properties"
	printf '%s\n' "# kcat -F $d/kcat.conf -b $BOOTSTRAP -L   (librdkafka properties)" \
		"security.protocol=SASL_SSL" \
		"sasl.mechanisms=SCRAM-SHA-512" \
		"sasl.username=admin" \
		"sasl.password=$ADMIN_PASSWORD" \
		"ssl.ca.location=$d/certs/ca.pem" >"$d/kcat.conf"
	chmod 644 "$d/server.properties" "$d/zk_client_jaas.conf"
	chmod 600 "$d/client.properties" "$d/kcat.conf"
}

# secure_admin_user: the admin user's SCRAM credentials written into
# ZooKeeper with bin/kafka-admin configs --zookeeper (as kafka-configs.sh
# --zookeeper), authenticated with the brokers' digest credentials.
secure_admin_user() {
	[[ $KAFKAZK_SECURE == 1 ]] || return 0
	local admin=$ROOT/bin/kafka-admin
	if [[ ! -x $admin ]]; then
		(cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -o bin/kafka-admin ./cmd/kafka-admin) || die "cannot build bin/kafka-admin"
	fi
	# shellcheck source=/dev/null
	. "$KAFKAZK_SECURE_DIR/secrets.env"
	KAFKA_OPTS="-Djava.security.auth.login.config=$KAFKAZK_SECURE_DIR/zk_client_jaas.conf" "$admin" configs \
		--zookeeper "$ZK_HOST" --entity-type users --entity-name admin --alter \
		--add-config "SCRAM-SHA-512=[iterations=8192,password=$ADMIN_PASSWORD]" >/dev/null ||
		die "cannot write the admin user's SCRAM credentials into ZooKeeper at $ZK_HOST"
	say "SCRAM user admin written to ZooKeeper (client config: $KAFKAZK_SECURE_DIR/client.properties, kcat -F $KAFKAZK_SECURE_DIR/kcat.conf)"
}

# cluster_up: images (unless NO_BUILD=1), `compose up -d`, then wait until
# ZooKeeper answers ruok and every broker is registered and answers Metadata on
# its host port. Prints how long each step took.
cluster_up() {
	local start=$SECONDS deadline id pending
	deps
	if [[ $NO_BUILD != 1 ]]; then
		"$ROOT/scripts/images.sh" || die "scripts/images.sh failed"
		say "images ready in $((SECONDS - start))s"
	fi
	start=$SECONDS
	secure_setup
	say "${COMPOSE_CMD[*]} up -d (project $COMPOSE_PROJECT_NAME, ZooKeeper image $ZOOKEEPER_IMAGE)"
	compose up -d || die "${COMPOSE_CMD[*]} up failed"
	deadline=$((SECONDS + READY_TIMEOUT))
	until [[ $(zk_4lw ruok || true) == imok ]]; do
		((SECONDS < deadline)) || die "ZooKeeper does not answer ruok at $ZK_HOST after ${READY_TIMEOUT}s"
		sleep 0.5
	done
	# Brokers talk to each other over TLS with certificates, so they start
	# without it; clients (and the readiness check) need the admin user.
	secure_admin_user
	while :; do
		pending=()
		for id in "${BROKER_IDS[@]}"; do
			[[ " $(registered) " == *" $id "* ]] && broker_answers "$id" || pending+=("$id")
		done
		((${#pending[@]} == 0)) && break
		if ((SECONDS >= deadline)); then
			compose ps >&2 || true
			for id in "${pending[@]}"; do compose logs --tail=20 "broker-$id" >&2 || true; done
			die "brokers ${pending[*]} not registered and answering after ${READY_TIMEOUT}s"
		fi
		sleep 0.5
	done
	say "cluster up in $((SECONDS - start))s: ZooKeeper at $ZK_HOST, brokers $(registered)at $BOOTSTRAP"
}

# cluster_repair: every broker container running, unpaused and connected, as
# after a demo that stopped half-way.
cluster_repair() {
	local id cid
	for id in "${BROKER_IDS[@]}"; do
		cid=$(container "broker-$id") || continue
		[[ -n $cid ]] || continue
		if [[ $(docker inspect -f '{{.State.Paused}}' "$cid" 2>/dev/null) == true ]]; then
			docker unpause "$cid" >/dev/null 2>&1 || true
		fi
		if ! docker inspect -f '{{json .NetworkSettings.Networks}}' "$cid" 2>/dev/null | grep -q "\"$NETWORK\""; then
			docker network connect --ip "${KAFKAZK_NET:-172.29.0}.1$id" --alias "broker-$id" "$NETWORK" "$cid" >/dev/null 2>&1 || true
		fi
	done
}

# cluster_down: remove the containers, the network and the volumes.
cluster_down() {
	cluster_repair
	compose down -v --remove-orphans -t 10
}
