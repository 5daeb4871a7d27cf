#!/usr/bin/env bash
# cluster.sh: a local ZooKeeper and N brokers as background processes, for
# people and for tests.
#
#   scripts/cluster.sh up            install what is missing, build bin/broker if
#                                    stale, start ZooKeeper and the brokers, wait
#                                    until every broker is registered and answers
#   scripts/cluster.sh down          SIGTERM the brokers, then ZooKeeper; wait;
#                                    SIGKILL whatever outlives STOP_TIMEOUT
#   scripts/cluster.sh status        ZooKeeper, each broker, the controller, and one
#                                    line per partition: leader, leader_epoch, replicas
#                                    (AR), ISR, OSR, HW and each replica's LEO, from every
#                                    broker's /v1/partitions (bin/kzstat); from ZooKeeper
#                                    (no HW/LEO) when no broker answers HTTP
#   scripts/cluster.sh start ID      start one broker and wait until it is ready
#   scripts/cluster.sh stop ID       SIGTERM one broker and wait for it to exit
#   scripts/cluster.sh kill ID       SIGKILL one broker
#   scripts/cluster.sh pause ID      SIGSTOP one broker
#   scripts/cluster.sh resume ID     SIGCONT one broker
#   scripts/cluster.sh logs ID|zk [-f]   the last LOG_LINES lines of a log, or follow it
#   scripts/cluster.sh add ID        start a new broker ID (not one of 0..BROKERS-1
#                                    already set up) and wait until it has joined;
#                                    it holds no replicas until a reassignment
#                                    moves some onto it
#   scripts/cluster.sh decommission ID   move every replica off broker ID onto the
#                                    other registered brokers (bin/kafka-admin
#                                    reassign-partitions --execute, then --verify
#                                    until complete), then stop it. The plan and its
#                                    rollback are kept in CLUSTER_DIR/decommission-ID*.json
#   scripts/cluster.sh roll          rolling restart: one running broker at a time,
#                                    the controller last, SIGTERM (controlled
#                                    shutdown), wait for the exit, start it again,
#                                    then wait until every broker's /metrics shows
#                                    0 under-replicated partitions before the next
#                                    (failing at once if the restarted broker exits).
#                                    A broker still running STOP_TIMEOUT after SIGTERM
#                                    is SIGKILLed, started again, and the roll fails
#   scripts/cluster.sh clean         down, then remove CLUSTER_DIR
#
# Environment (defaults in brackets):
#   CLUSTER_DIR [<repo>/.cluster]  everything the cluster writes: zookeeper/ and
#                                  broker-<id>/ with server.properties, data/,
#                                  broker.log and broker.pid
#   BROKERS [3]         number of brokers; ids are 0..BROKERS-1. BROKERS=0 runs
#                       ZooKeeper alone (for BROKER_TEST_ZK=127.0.0.1:$ZK_PORT)
#   BASE_PORT [9092]    broker <id> listens on 127.0.0.1:BASE_PORT+id
#   HTTP_BASE_PORT [8080]  broker <id> serves /metrics, /v1/partitions and its
#                       status page at http://127.0.0.1:HTTP_BASE_PORT+id/ (http.listener)
#   ZK_PORT [2181]      ZooKeeper's client port on 127.0.0.1; a server already
#                       answering there is used and left alone
#   ZK_HEAP [256m]      the local ZooKeeper's Java heap (-Xmx); size it for the partition count
#                       (measured by make bench-scale, heap live after a full GC: ~1.0 KiB a
#                       partition at 10,000 (15 MiB in all), 0.9-1.6 KiB at 1,000; 256m leaves
#                       room for 10,000 and their creation; give 100,000 ~650m)
#   ZK_CHROOT []        optional chroot for zookeeper.connect, e.g. /kafka
#   BROKER_BIN [<repo>/bin/broker]  binary to run; set it to skip building
#   BROKER_OVERRIDES [] extra server.properties settings for every broker,
#                       space-separated key=value words
#   BROKER_LOG_LEVEL    passed through to the brokers (debug|info|warn)
#   READY_TIMEOUT [60]  seconds `up`/`start` wait for readiness
#   STOP_TIMEOUT [30]   seconds `down`/`stop` wait before SIGKILL
#   LOG_LINES [100]     lines shown by `logs`
#   THROTTLE []         decommission: replication throttle in bytes/s for the move
#                       (kafka-admin --throttle); empty means unthrottled
#   MOVE_TIMEOUT [900]  decommission: seconds to wait for the reassignment
#   URP_TIMEOUT [300]   roll: seconds to wait for 0 under-replicated partitions
#   SECURITY [plaintext]  plaintext, or sasl_ssl for a secured cluster (issue 14):
#                       every broker listens on SASL_SSL://127.0.0.1:BASE_PORT+id
#                       only, clients authenticate with SCRAM-SHA-512, brokers talk
#                       to each other over the same listener as User:admin (in
#                       super.users), the AclAuthorizer is on with
#                       allow.everyone.if.no.acl.found=false, and the brokers use
#                       ZooKeeper digest auth with zookeeper.set.acl=true (JAAS
#                       Client section through KAFKA_OPTS). `up` makes, once per
#                       CLUSTER_DIR: a throwaway CA and certificates
#                       (scripts/gen-certs.sh, in certs/), random passwords
#                       (secrets.env, mode 600), zk_client_jaas.conf, and for
#                       clients client.properties (Kafka's names, for
#                       bin/kafka-admin --command-config) and kcat.conf (librdkafka's,
#                       for kcat -F); and it writes the admin user's SCRAM
#                       credentials into ZooKeeper before any broker starts
#                       (bin/kafka-admin configs --zookeeper, as kafka-configs.sh
#                       --zookeeper does)
#   PLAINTEXT_BASE_PORT []  with SECURITY=sasl_ssl: also a PLAINTEXT listener on
#                       127.0.0.1:PLAINTEXT_BASE_PORT+id, whose User:ANONYMOUS is
#                       then a super user too: for measuring both listeners of one
#                       cluster (make bench-secure), never for a shared network
#
# `up` records BROKERS, BASE_PORT, HTTP_BASE_PORT, ZK_PORT, ZK_CHROOT and SECURITY in CLUSTER_DIR/cluster.env,
# so later commands on the same CLUSTER_DIR need not repeat them. Signals go only
# to processes named in this cluster's pid files whose command line still
# matches what was started.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ZK_JAR=/usr/share/java/zookeeper.jar
ZK_CLI=/usr/share/zookeeper/bin/zkCli.sh

die() {
	printf 'cluster.sh: %s\n' "$*" >&2
	exit 1
}
say() { printf '%s\n' "$*"; }

CLUSTER_DIR=${CLUSTER_DIR:-$ROOT/.cluster}
[[ $CLUSTER_DIR == /* ]] || CLUSTER_DIR=$PWD/$CLUSTER_DIR
CLUSTER_DIR=${CLUSTER_DIR%/}
ENV_FILE=$CLUSTER_DIR/cluster.env

# Settings: the environment wins, then what `up` saved for this CLUSTER_DIR,
# then the default.
declare -A saved=()
if [[ -f $ENV_FILE ]]; then
	while IFS='=' read -r key value; do
		[[ $key =~ ^[A-Z_]+$ ]] && saved[$key]=$value
	done <"$ENV_FILE"
fi
setting() {
	local name=$1 default=$2
	if [[ -n ${!name+set} ]]; then
		printf '%s' "${!name}"
	elif [[ -n ${saved[$name]+set} ]]; then
		printf '%s' "${saved[$name]}"
	else
		printf '%s' "$default"
	fi
}
BROKERS=$(setting BROKERS 3)
BASE_PORT=$(setting BASE_PORT 9092)
HTTP_BASE_PORT=$(setting HTTP_BASE_PORT 8080)
ZK_PORT=$(setting ZK_PORT 2181)
ZK_CHROOT=$(setting ZK_CHROOT '')
BROKER_BIN=${BROKER_BIN:-}
READY_TIMEOUT=${READY_TIMEOUT:-60}
THROTTLE=${THROTTLE:-}
MOVE_TIMEOUT=${MOVE_TIMEOUT:-900}
URP_TIMEOUT=${URP_TIMEOUT:-300}
STOP_TIMEOUT=${STOP_TIMEOUT:-30}
LOG_LINES=${LOG_LINES:-100}
BROKER_OVERRIDES=${BROKER_OVERRIDES:-}
SECURITY=$(setting SECURITY plaintext)
PLAINTEXT_BASE_PORT=$(setting PLAINTEXT_BASE_PORT '')
[[ -z $PLAINTEXT_BASE_PORT || $PLAINTEXT_BASE_PORT =~ ^[0-9]+$ ]] || die "PLAINTEXT_BASE_PORT must be a port number, not '$PLAINTEXT_BASE_PORT'"
case $SECURITY in
plaintext | sasl_ssl) ;;
*) die "SECURITY must be plaintext or sasl_ssl, not '$SECURITY'" ;;
esac

for v in BROKERS BASE_PORT HTTP_BASE_PORT ZK_PORT READY_TIMEOUT STOP_TIMEOUT LOG_LINES MOVE_TIMEOUT URP_TIMEOUT; do
	[[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer, not '${!v}'"
done
[[ -z $THROTTLE || $THROTTLE =~ ^[0-9]+$ ]] || die "THROTTLE must be bytes/s (a non-negative integer), not '$THROTTLE'"
[[ -z $ZK_CHROOT || $ZK_CHROOT =~ ^(/[A-Za-z0-9._-]+)+$ ]] ||
	die "ZK_CHROOT must look like /name or /a/b, not '$ZK_CHROOT'"

ZK_ADDR=127.0.0.1:$ZK_PORT
ZK_DIR=$CLUSTER_DIR/zookeeper
ZK_CFG=$ZK_DIR/zoo.cfg
ZK_PIDFILE=$ZK_DIR/zookeeper.pid
ZK_LOG=$ZK_DIR/zookeeper.log

broker_dir() { printf '%s/broker-%s' "$CLUSTER_DIR" "$1"; }
broker_port() { printf '%s' $((BASE_PORT + $1)); }
broker_http_port() { printf '%s' $((HTTP_BASE_PORT + $1)); }
broker_props() { printf '%s/server.properties' "$(broker_dir "$1")"; }
broker_pidfile() { printf '%s/broker.pid' "$(broker_dir "$1")"; }
broker_log() { printf '%s/broker.log' "$(broker_dir "$1")"; }

# Security files (SECURITY=sasl_ssl).
CERT_DIR=$CLUSTER_DIR/certs
SECRETS=$CLUSTER_DIR/secrets.env
JAAS_FILE=$CLUSTER_DIR/zk_client_jaas.conf
CLIENT_PROPS=$CLUSTER_DIR/client.properties
KCAT_CONF=$CLUSTER_DIR/kcat.conf
secure() { [[ $SECURITY == sasl_ssl ]]; }
# ADMIN_SEC: the arguments that let bin/kafka-admin talk to this cluster.
ADMIN_SEC=()
KCAT_SEC=()
if secure; then
	ADMIN_SEC=(--command-config "$CLIENT_PROPS")
	KCAT_SEC=(-F "$KCAT_CONF")
fi

# known_ids: ids 0..BROKERS-1 and any other broker-<id> directory, sorted.
known_ids() {
	local d
	{
		if ((BROKERS > 0)); then seq 0 $((BROKERS - 1)); fi
		for d in "$CLUSTER_DIR"/broker-*; do
			[[ -d $d && ${d##*/broker-} =~ ^[0-9]+$ ]] && printf '%s\n' "${d##*/broker-}"
		done
	} | sort -nu
}

check_id() {
	[[ ${1:-} =~ ^[0-9]+$ ]] || die "want a broker id (0, 1, ...), got '${1:-}'"
}

# ---------------------------------------------------------------------------
# Processes, by pid file only.

# pid_of PIDFILE MARKER prints the pid recorded in PIDFILE when that process is
# alive and its command line contains MARKER (so a reused pid is never
# signalled); otherwise it fails. A zombie has an empty command line.
pid_of() {
	local file=$1 marker=$2 pid cmdline
	[[ -f $file ]] || return 1
	pid=$(<"$file")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	cmdline=$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline") || return 1
	[[ $cmdline == *"$marker"* ]] || return 1
	printf '%s\n' "$pid"
}

broker_pid() { pid_of "$(broker_pidfile "$1")" "$(broker_props "$1")"; }
zk_pid() { pid_of "$ZK_PIDFILE" "$ZK_CFG"; }

# proc_state PID: R, S, D, T (stopped), ... from /proc/PID/stat.
proc_state() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	stat=${stat##*) }
	printf '%s' "${stat%% *}"
}

# stop_pids TIMEOUT NAME:PIDFILE:MARKER...: SIGTERM each live process (and
# SIGCONT, so a paused one can act on it), wait up to TIMEOUT seconds for all to
# exit, then SIGKILL the rest. Removes the pid files. STOP_KILLED lists, one a
# line, the NAMEs that had to be SIGKILLed.
STOP_KILLED=''
stop_pids() {
	local timeout=$1 entry name file marker pid deadline left
	shift
	local -a live=()
	STOP_KILLED=
	for entry in "$@"; do
		IFS=: read -r name file marker <<<"$entry"
		if pid=$(pid_of "$file" "$marker"); then
			say "$name: SIGTERM pid $pid"
			kill -TERM "$pid" 2>/dev/null || true
			kill -CONT "$pid" 2>/dev/null || true
			live+=("$entry")
		else
			rm -f "$file"
		fi
	done
	deadline=$((SECONDS + timeout))
	while ((${#live[@]} > 0)); do
		left=()
		for entry in "${live[@]}"; do
			IFS=: read -r name file marker <<<"$entry"
			if pid=$(pid_of "$file" "$marker"); then
				if ((SECONDS >= deadline)); then
					say "$name: still running after ${timeout}s: SIGKILL pid $pid"
					kill -KILL "$pid" 2>/dev/null || true
					[[ $STOP_KILLED == *"$name"$'\n'* ]] || STOP_KILLED+="$name"$'\n'
				fi
				left+=("$entry")
			else
				say "$name: stopped"
				rm -f "$file"
			fi
		done
		live=("${left[@]+"${left[@]}"}")
		((${#live[@]} == 0)) || sleep 0.2
	done
}

# ---------------------------------------------------------------------------
# ZooKeeper.

# zk_4lw CMD: send a four-letter word to ZooKeeper and print the answer.
zk_4lw() {
	# shellcheck disable=SC2016 # expanded by the inner bash
	timeout 5 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf %s "$2" >&3 && cat <&3' \
		_ "$ZK_PORT" "$1" 2>/dev/null
}

zk_ruok() { [[ $(zk_4lw ruok || true) == imok ]]; }

# zk_owner PATH: the session that owns the ephemeral znode PATH (empty if none),
# from the `dump` four-letter word. Paths here are absolute, chroot included.
zk_owner() {
	zk_4lw dump | awk -v want="$1" '
		/^ephemeral nodes dump:/ { in_eph = 1; next }
		/^Connections dump:/     { in_eph = 0 }
		in_eph && /^0x[0-9a-f]+:$/ { sess = substr($0, 1, length($0) - 1); next }
		in_eph && $1 == want     { print sess; exit }
	' || true
}

# zk_batch CMD...: run zkCli commands in one JVM, relative to ZK_CHROOT. The
# output of command i follows a line "@@ i", so callers can split it.
zk_batch() {
	local i=0 cmd script=''
	for cmd in "$@"; do
		script+="get /zz-cluster-sh-mark-$i"$'\n'"$cmd"$'\n'
		i=$((i + 1))
	done
	script+=$'quit\n'
	printf '%s' "$script" |
		JVMFLAGS="${JVMFLAGS:--Xshare:auto -XX:TieredStopAtLevel=1 -Xmx64m}" \
			timeout 30 "$ZK_CLI" -server "$ZK_ADDR$ZK_CHROOT" 2>&1 |
		awk '
			/^Node does not exist: \/zz-cluster-sh-mark-[0-9]+$/ { sub(/.*-mark-/, ""); print "@@ " $0; next }
			/^(SLF4J:|Connecting to |Welcome to ZooKeeper|JLine support|WATCHER::|WatchedEvent )/ { next }
			/^$/ { next }
			{ print }
		' || true # zkCli exits 1 when its last command failed, as markers do
}

# section N: the lines of zk_batch output (on stdin) that belong to command N.
section() { awk -v n="$1" '/^@@ [0-9]+$/ { cur = $2 + 0; next } cur == n { print }'; }

zk_up() {
	local pid deadline
	if zk_ruok; then
		if pid=$(zk_pid); then
			say "zookeeper: already running at $ZK_ADDR (pid $pid)"
		else
			say "zookeeper: using the server already answering at $ZK_ADDR"
		fi
		return 0
	fi
	if ! pid=$(zk_pid); then
		[[ -f $ZK_JAR ]] || die "no ZooKeeper at $ZK_JAR: run scripts/install-deps.sh as root"
		mkdir -p "$ZK_DIR/data"
		cat >"$ZK_CFG" <<-CFG
			# Generated by scripts/cluster.sh up.
			tickTime=500
			dataDir=$ZK_DIR/data
			clientPort=$ZK_PORT
			clientPortAddress=127.0.0.1
			minSessionTimeout=1000
			maxSessionTimeout=60000
			4lw.commands.whitelist=*
			admin.enableServer=false
			maxClientCnxns=0
		CFG
		# setsid keeps a Ctrl-C at the terminal from reaching it; 9>&- drops the lock.
		setsid java -Xmx${ZK_HEAP:-256m} -cp "/etc/zookeeper/conf:$ZK_JAR" \
			org.apache.zookeeper.server.ZooKeeperServerMain "$ZK_CFG" \
			>>"$ZK_LOG" 2>&1 </dev/null 9>&- &
		pid=$!
		printf '%s\n' "$pid" >"$ZK_PIDFILE"
		say "zookeeper: starting at $ZK_ADDR (pid $pid, log $ZK_LOG)"
	fi
	deadline=$((SECONDS + READY_TIMEOUT))
	until zk_ruok; do
		if ! zk_pid >/dev/null; then
			tail -n 30 "$ZK_LOG" >&2 || true
			die "zookeeper exited; log: $ZK_LOG"
		fi
		((SECONDS < deadline)) || die "zookeeper did not answer ruok at $ZK_ADDR within ${READY_TIMEOUT}s; log: $ZK_LOG"
		sleep 0.2
	done
	say "zookeeper: up at $ZK_ADDR"
	if [[ -n $ZK_CHROOT ]]; then
		local path='' part cmds=()
		IFS=/ read -ra parts <<<"${ZK_CHROOT#/}"
		for part in "${parts[@]}"; do
			path+=/$part
			cmds+=("create $path")
		done
		ZK_CHROOT='' zk_batch "${cmds[@]}" >/dev/null || true
	fi
}

# ---------------------------------------------------------------------------
# Brokers.

# needs_build: bin/broker is missing or older than a Go source, go.mod or go.sum.
needs_build() {
	local bin=$1
	[[ -x $bin ]] || return 0
	[[ -n $(find "$ROOT" \( -path "$ROOT/.git" -o -path "$ROOT/test" -o -path "$CLUSTER_DIR" -o -name testdata \) -prune -o \
		\( \( -name '*.go' -a ! -name '*_test.go' \) -o -name go.mod -o -name go.sum \) -newer "$bin" -print -quit) ]]
}

ensure_binary() {
	if [[ -n $BROKER_BIN ]]; then
		[[ -x $BROKER_BIN ]] || die "BROKER_BIN=$BROKER_BIN is not an executable"
		return 0
	fi
	BROKER_BIN=$ROOT/bin/broker
	if needs_build "$BROKER_BIN"; then
		say "build: bin/broker"
		(cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -o bin/broker ./cmd/broker) ||
			die "cannot build bin/broker (BROKERS=0 runs ZooKeeper alone)"
	fi
}

# ensure_kzstat: build bin/kzstat (the status table's HTTP reader) if stale;
# fails quietly when it cannot, and status falls back to ZooKeeper.
ensure_kzstat() {
	KZSTAT=$ROOT/bin/kzstat
	if needs_build "$KZSTAT"; then
		(cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -o bin/kzstat ./cmd/kzstat) >/dev/null 2>&1 || return 1
	fi
}

# ensure_admin: build bin/kafka-admin if stale, or fail.
ensure_admin() {
	KAFKA_ADMIN=$ROOT/bin/kafka-admin
	if needs_build "$KAFKA_ADMIN"; then
		say "build: bin/kafka-admin"
		(cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -o bin/kafka-admin ./cmd/kafka-admin) ||
			die "cannot build bin/kafka-admin"
	fi
}

# http_table: the partition table from every broker's /v1/partitions; fails
# when kzstat is missing or no broker answers.
http_table() {
	local id
	local -a args=()
	ensure_kzstat || return 1
	while read -r id; do
		args+=("$id=http://127.0.0.1:$(broker_http_port "$id")")
	done < <(known_ids)
	((${#args[@]} > 0)) || return 1
	"$KZSTAT" "${args[@]}" 2>/dev/null
}

# secure_setup: the certificates, passwords, JAAS and client files of a
# SECURITY=sasl_ssl cluster (kept once made), then the admin user's SCRAM
# credentials in ZooKeeper.
secure_setup() {
	secure || return 0
	command -v openssl >/dev/null 2>&1 || die "SECURITY=sasl_ssl needs openssl"
	[[ -f $CERT_DIR/ca.pem && -f $CERT_DIR/broker-keystore.pem ]] || "$ROOT/scripts/gen-certs.sh" "$CERT_DIR" broker >/dev/null
	if [[ ! -f $SECRETS ]]; then
		(
			umask 077
			printf 'ADMIN_PASSWORD=%s\nZK_PASSWORD=%s\n' "$(openssl rand -hex 16)" "$(openssl rand -hex 16)" >"$SECRETS"
		)
		say "security: new passwords in $SECRETS"
	fi
	# shellcheck source=/dev/null
	. "$SECRETS"
	(
		umask 077
		cat >"$JAAS_FILE" <<-JAAS
			Client {
			  org.apache.zookeeper.server.auth.DigestLoginModule required
			  username="kafka"
			  password="$ZK_PASSWORD";
			};
		JAAS
		cat >"$CLIENT_PROPS" <<-PROPS
			# Kafka client properties for the admin user of $CLUSTER_DIR:
			#   bin/kafka-admin topics --list --bootstrap-server $(bootstrap) --command-config $CLIENT_PROPS
			security.protocol=SASL_SSL
			sasl.mechanism=SCRAM-SHA-512
			sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="$ADMIN_PASSWORD";
			ssl.truststore.type=PEM
			ssl.truststore.location=$CERT_DIR/ca.pem
		PROPS
		cat >"$KCAT_CONF" <<-CONF
			# librdkafka properties for the admin user: kcat -F $KCAT_CONF -b $(bootstrap) -L
			security.protocol=SASL_SSL
			sasl.mechanisms=SCRAM-SHA-512
			sasl.username=admin
			sasl.password=$ADMIN_PASSWORD
			ssl.ca.location=$CERT_DIR/ca.pem
		CONF
	)
	ensure_admin
	KAFKA_OPTS="-Djava.security.auth.login.config=$JAAS_FILE" "$KAFKA_ADMIN" configs --zookeeper "$ZK_ADDR$ZK_CHROOT" \
		--entity-type users --entity-name admin --alter \
		--add-config "SCRAM-SHA-512=[iterations=8192,password=$ADMIN_PASSWORD],SCRAM-SHA-256=[iterations=8192,password=$ADMIN_PASSWORD]" >/dev/null ||
		die "cannot write the admin user's SCRAM credentials into ZooKeeper"
	say "security: SCRAM user admin in ZooKeeper $ZK_ADDR$ZK_CHROOT/config/users/admin"
}

# secure_props: the security keys of a SECURITY=sasl_ssl broker.
secure_props() {
	# shellcheck source=/dev/null
	. "$SECRETS"
	local jaas="org.apache.kafka.common.security.scram.ScramLoginModule required username=\"admin\" password=\"$ADMIN_PASSWORD\";"
	printf '%s\n' \
		"listener.security.protocol.map=SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT" \
		"inter.broker.listener.name=SASL_SSL" \
		"sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512" \
		"sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256" \
		"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=$jaas" \
		"listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=$jaas" \
		"ssl.keystore.type=PEM" \
		"ssl.keystore.location=$CERT_DIR/broker-keystore.pem" \
		"ssl.truststore.type=PEM" \
		"ssl.truststore.location=$CERT_DIR/ca.pem" \
		"authorizer.class.name=kafka.security.authorizer.AclAuthorizer" \
		"super.users=User:admin${PLAINTEXT_BASE_PORT:+;User:ANONYMOUS}" \
		"allow.everyone.if.no.acl.found=false" \
		"zookeeper.set.acl=true"
}

# write_props ID: CLUSTER_DIR/broker-ID/server.properties is config/server.properties
# with the per-broker keys (and BROKER_OVERRIDES) replaced.
write_props() {
	local id=$1 port dir props kv rf
	port=$(broker_port "$id")
	dir=$(broker_dir "$id")
	props=$(broker_props "$id")
	rf=$((BROKERS < 3 ? BROKERS : 3))
	((rf > 0)) || rf=1
	local listeners=PLAINTEXT://127.0.0.1:$port
	if secure; then
		listeners=SASL_SSL://127.0.0.1:$port
		[[ -z $PLAINTEXT_BASE_PORT ]] || listeners+=,PLAINTEXT://127.0.0.1:$((PLAINTEXT_BASE_PORT + id))
	fi
	local -a over=(
		"broker.id=$id"
		"listeners=$listeners"
		"advertised.listeners=$listeners"
		"zookeeper.connect=$ZK_ADDR$ZK_CHROOT"
		"log.dirs=$dir/data"
		"http.listener=127.0.0.1:$(broker_http_port "$id")"
		"offsets.topic.replication.factor=$rf"
		"default.replication.factor=$rf"
		"transaction.state.log.replication.factor=$rf"
		"transaction.state.log.min.isr=$((rf < 2 ? rf : 2))"
	)
	if secure; then
		mapfile -t -O "${#over[@]}" over < <(secure_props)
	fi
	for kv in $BROKER_OVERRIDES; do
		[[ $kv =~ ^[a-z0-9._-]+=.*$ ]] || die "BROKER_OVERRIDES: want key=value, got '$kv'"
		over+=("$kv")
	done
	{
		printf '# Generated by scripts/cluster.sh from config/server.properties; edits are lost on start.\n'
		printf '%s\n' "${over[@]}" | cut -d= -f1 |
			awk 'NR == FNR { drop[$0] = 1; next }
			{
				line = $0; sub(/^[ \t]+/, "", line)
				if (line == "" || line ~ /^[#!]/) { print; next }
				key = line; sub(/[ \t]*[=:].*$/, "", key); sub(/[ \t].*$/, "", key)
				if (!(key in drop)) print
			}' - "$ROOT/config/server.properties"
		printf '\n# cluster.sh settings for broker %s\n' "$id"
		printf '%s\n' "${over[@]}"
	} >"$props.tmp"
	mv "$props.tmp" "$props"
}

# launch_broker ID: start broker ID unless it runs; prints "ID OWNER" where OWNER
# is the session that owned its znode before the start ("-" if none or if the
# broker was already running), so readiness can tell our registration from a
# stale one left by a killed process whose session has not expired yet.
launch_broker() {
	local id=$1 pid dir owner
	if pid=$(broker_pid "$id"); then
		say "broker $id: already running (pid $pid)" >&2
		printf '%s -\n' "$id"
		return 0
	fi
	dir=$(broker_dir "$id")
	mkdir -p "$dir/data"
	write_props "$id"
	owner=$(zk_owner "$ZK_CHROOT/brokers/ids/$id")
	if [[ -n $owner ]]; then
		# A killed broker's znode lives until its session expires, and a broker
		# (like Kafka's) refuses to register over another session's znode.
		say "broker $id: waiting for the registration of the old session $owner to expire" >&2
		local deadline=$((SECONDS + READY_TIMEOUT))
		while [[ -n $owner ]]; do
			((SECONDS < deadline)) || die "broker $id: $ZK_CHROOT/brokers/ids/$id still held by session $owner after ${READY_TIMEOUT}s"
			sleep 0.5
			owner=$(zk_owner "$ZK_CHROOT/brokers/ids/$id")
		done
	fi
	local kafka_opts=${KAFKA_OPTS:-}
	secure && kafka_opts="${kafka_opts:+$kafka_opts }-Djava.security.auth.login.config=$JAAS_FILE"
	KAFKA_OPTS=$kafka_opts setsid "$BROKER_BIN" "$(broker_props "$id")" >>"$(broker_log "$id")" 2>&1 </dev/null 9>&- &
	pid=$!
	printf '%s\n' "$pid" >"$(broker_pidfile "$id")"
	say "broker $id: starting on 127.0.0.1:$(broker_port "$id") (pid $pid, log $(broker_log "$id"))" >&2
	printf '%s %s\n' "$id" "${owner:--}"
}

# broker_ready ID OLD_OWNER: registered under a session other than OLD_OWNER,
# accepting connections, and (with kcat) answering Metadata.
broker_ready() {
	local id=$1 old=$2 owner port
	owner=$(zk_owner "$ZK_CHROOT/brokers/ids/$id")
	[[ -n $owner && $owner != "$old" ]] || return 1
	port=$(broker_port "$id")
	# shellcheck disable=SC2016 # expanded by the inner bash
	timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"' _ "$port" 2>/dev/null || return 1
	if command -v kcat >/dev/null 2>&1; then
		# -L without -t lists all topics, so it creates none.
		timeout 10 kcat "${KCAT_SEC[@]+"${KCAT_SEC[@]}"}" -L -b "127.0.0.1:$port" -m 5 -q >/dev/null 2>&1 || return 1
	fi
}

# wait_ready "ID OWNER"...: wait until each broker is ready, or fail.
wait_ready() {
	local entry id old deadline
	local -a pending=("$@") left
	deadline=$((SECONDS + READY_TIMEOUT))
	while ((${#pending[@]} > 0)); do
		left=()
		for entry in "${pending[@]}"; do
			read -r id old <<<"$entry"
			if ! broker_pid "$id" >/dev/null; then
				tail -n 30 "$(broker_log "$id")" >&2 || true
				die "broker $id exited during start; log: $(broker_log "$id")"
			elif broker_ready "$id" "$old"; then
				say "broker $id: ready at 127.0.0.1:$(broker_port "$id")"
			else
				left+=("$entry")
			fi
		done
		pending=("${left[@]+"${left[@]}"}")
		if ((${#pending[@]} > 0)); then
			if ((SECONDS >= deadline)); then
				for entry in "${pending[@]}"; do
					read -r id old <<<"$entry"
					tail -n 20 "$(broker_log "$id")" >&2 || true
					printf 'cluster.sh: broker %s not ready within %ss (registered in ZooKeeper, port open, Metadata answered); log: %s\n' \
						"$id" "$READY_TIMEOUT" "$(broker_log "$id")" >&2
				done
				exit 1
			fi
			sleep 0.3
		fi
	done
}

bootstrap() {
	local id out=''
	for ((id = 0; id < BROKERS; id++)); do
		out+=${out:+,}127.0.0.1:$(broker_port "$id")
	done
	printf '%s' "$out"
}

lock() {
	mkdir -p "$CLUSTER_DIR"
	exec 9>"$CLUSTER_DIR/.lock"
	flock -w 300 9 || die "another cluster.sh holds $CLUSTER_DIR/.lock"
}

save_settings() {
	printf 'BROKERS=%s\nBASE_PORT=%s\nHTTP_BASE_PORT=%s\nZK_PORT=%s\nZK_CHROOT=%s\nSECURITY=%s\nPLAINTEXT_BASE_PORT=%s\n' \
		"$BROKERS" "$BASE_PORT" "$HTTP_BASE_PORT" "$ZK_PORT" "$ZK_CHROOT" "$SECURITY" "$PLAINTEXT_BASE_PORT" >"$ENV_FILE"
}

# ---------------------------------------------------------------------------
# Subcommands.

cmd_up() {
	local id entry bs
	"$ROOT/scripts/install-deps.sh" --cluster
	lock
	save_settings
	((BROKERS == 0)) || ensure_binary
	zk_up
	((BROKERS == 0)) || secure_setup
	local -a entries=()
	for ((id = 0; id < BROKERS; id++)); do
		entry=$(launch_broker "$id")
		entries+=("$entry")
	done
	wait_ready "${entries[@]+"${entries[@]}"}"
	if ((BROKERS == 0)); then
		say ""
		say "ZooKeeper only: zookeeper.connect=$ZK_ADDR$ZK_CHROOT  (BROKER_TEST_ZK=$ZK_ADDR make integ)"
		return 0
	fi
	bs=$(bootstrap)
	say ""
	if secure; then
		say "bootstrap: $bs (SASL_SSL, SCRAM-SHA-512; admin's password in $SECRETS)"
		say "  kcat -F $KCAT_CONF -b $bs -L"
		say "  bin/kafka-admin topics --create --topic demo --partitions 3 --replication-factor $((BROKERS < 3 ? BROKERS : 3)) --bootstrap-server $bs --command-config $CLIENT_PROPS"
		say "  bin/kafka-admin configs --entity-type users --entity-name alice --alter --add-config 'SCRAM-SHA-512=[iterations=8192,password=alice-secret]' --bootstrap-server $bs --command-config $CLIENT_PROPS"
		say "  bin/kafka-admin acls --add --allow-principal User:alice --producer --consumer --topic demo --group demo --bootstrap-server $bs --command-config $CLIENT_PROPS"
		say "  http://127.0.0.1:$(broker_http_port 0)/  # broker 0's replicas (also /metrics, /v1/partitions)"
		say "  scripts/cluster.sh status | logs 0 | down"
		return 0
	fi
	say "bootstrap: $bs"
	say "  kcat -b $bs -L                        # metadata"
	say "  kcat -b $bs -t demo -P                # produce: one record per line, Ctrl-D to end"
	say "  kcat -b $bs -t demo -C -e             # consume from the start, exit at the end"
	say "  http://127.0.0.1:$(broker_http_port 0)/  # broker 0's replicas (also /metrics, /v1/partitions)"
	say "  scripts/cluster.sh status | logs 0 | down"
}

cmd_down() {
	local id
	local -a entries=()
	lock
	while read -r id; do
		entries+=("broker $id:$(broker_pidfile "$id"):$(broker_props "$id")")
	done < <(known_ids)
	stop_pids "$STOP_TIMEOUT" "${entries[@]+"${entries[@]}"}"
	if [[ -f $ZK_PIDFILE ]]; then
		stop_pids 15 "zookeeper:$ZK_PIDFILE:$ZK_CFG"
	elif zk_ruok; then
		say "zookeeper: the server at $ZK_ADDR was not started by cluster.sh; left running"
	fi
}

cmd_start() {
	local id=$1 entry
	lock
	ensure_binary
	zk_ruok || die "zookeeper does not answer at $ZK_ADDR: run scripts/cluster.sh up"
	entry=$(launch_broker "$id")
	wait_ready "$entry"
}

cmd_stop() {
	broker_pid "$1" >/dev/null || say "broker $1: not running"
	stop_pids "$STOP_TIMEOUT" "broker $1:$(broker_pidfile "$1"):$(broker_props "$1")"
}

cmd_signal() {
	local sig=$1 id=$2 pid
	pid=$(broker_pid "$id") || die "broker $id is not running (per $(broker_pidfile "$id"))"
	kill "-$sig" "$pid"
	say "broker $id: SIG$sig pid $pid"
	if [[ $sig == KILL ]]; then
		while broker_pid "$id" >/dev/null; do sleep 0.1; done
		rm -f "$(broker_pidfile "$id")"
	fi
}

cmd_status() {
	local id pid state reg zk_ok=0 out ids='' ctrl epoch line path json
	if zk_ruok; then
		zk_ok=1
		if pid=$(zk_pid); then
			say "zookeeper  $ZK_ADDR$ZK_CHROOT  up (pid $pid)"
		else
			say "zookeeper  $ZK_ADDR$ZK_CHROOT  up (not started by cluster.sh)"
		fi
		out=$(zk_batch "ls /brokers/ids" "get /controller" "get /controller_epoch" "ls -R /brokers/topics")
		ids=$(section 0 <<<"$out" | grep -E '^\[' | tr -d '[] ' | tr ',' ' ' || true)
	elif pid=$(zk_pid); then
		say "zookeeper  $ZK_ADDR  not answering (pid $pid)"
	else
		say "zookeeper  $ZK_ADDR  down"
	fi
	while read -r id; do
		if pid=$(broker_pid "$id"); then
			state="pid $pid running"
			if [[ $(proc_state "$pid" || true) == T ]]; then state="pid $pid paused"; fi
		else
			state="not running"
		fi
		reg="-"
		if ((zk_ok)); then
			reg="not registered"
			if [[ " $ids " == *" $id "* ]]; then reg="registered"; fi
		fi
		printf 'broker %-3s 127.0.0.1:%-5s  %-22s %-15s http://127.0.0.1:%s/\n' "$id" "$(broker_port "$id")" "$state" "$reg" "$(broker_http_port "$id")"
	done < <(known_ids)
	if ! ((zk_ok)); then
		http_table || true
		return 0
	fi
	for id in $ids; do
		[[ -d $(broker_dir "$id") ]] || say "broker $id   registered in ZooKeeper (not managed by this cluster.sh)"
	done
	ctrl=$(section 1 <<<"$out" | grep -oE '"brokerid":-?[0-9]+' | cut -d: -f2 || true)
	epoch=$(section 2 <<<"$out" | grep -E '^[0-9]+$' || true)
	say "controller ${ctrl:-none} (controller_epoch ${epoch:--})"
	http_table && return 0
	local -a states=()
	mapfile -t states < <(section 3 <<<"$out" |
		grep -E '^/brokers/topics/[^/]+/partitions/[0-9]+/state$' | sort -t/ -k4,4 -k6,6n || true)
	local -a topics=()
	mapfile -t topics < <(section 3 <<<"$out" | grep -E '^/brokers/topics/[^/]+$' | cut -d/ -f4 | sort || true)
	if ((${#topics[@]} == 0)); then
		say "no topics"
		return 0
	fi
	local -a cmds=()
	for path in "${states[@]+"${states[@]}"}"; do cmds+=("get $path"); done
	for t in "${topics[@]}"; do cmds+=("get /brokers/topics/$t"); done
	local i=0 j t p leader le isr replicas assign
	out=$(zk_batch "${cmds[@]}")
	printf '%-30s %9s %7s %12s  %-12s %s\n' topic partition leader leader_epoch replicas isr
	for path in "${states[@]+"${states[@]}"}"; do
		json=$(section "$i" <<<"$out" | head -n 1)
		i=$((i + 1))
		t=$(cut -d/ -f4 <<<"$path")
		p=$(cut -d/ -f6 <<<"$path")
		leader=$(grep -oE '"leader":-?[0-9]+' <<<"$json" | cut -d: -f2 || true)
		le=$(grep -oE '"leader_epoch":-?[0-9]+' <<<"$json" | cut -d: -f2 || true)
		isr=$(grep -oE '"isr":\[[-0-9,]*\]' <<<"$json" | cut -d: -f2 || true)
		replicas='?'
		for ((j = 0; j < ${#topics[@]}; j++)); do
			[[ ${topics[j]} == "$t" ]] || continue
			assign=$(section $((${#states[@]} + j)) <<<"$out" | head -n 1)
			replicas=$(grep -oE "\"$p\":\[[0-9,]*\]" <<<"$assign" | cut -d: -f2 || true)
		done
		printf '%-30s %9s %7s %12s  %-12s %s\n' "$t" "$p" "${leader:-?}" "${le:-?}" "${replicas:-?}" "${isr:-?}"
	done
	for t in "${topics[@]}"; do
		line=$(printf '%s\n' "${states[@]+"${states[@]}"}" | grep -c "^/brokers/topics/$t/" || true)
		((line > 0)) || printf '%-30s %9s\n' "$t" "(no partition state yet)"
	done
}

# running_ids: the ids of this cluster's brokers whose process is alive.
running_ids() {
	local id
	while read -r id; do
		if broker_pid "$id" >/dev/null; then printf '%s\n' "$id"; fi
	done < <(known_ids)
}

# live_bootstrap [EXCEPT]: host:port of every running broker but EXCEPT.
live_bootstrap() {
	local id out=''
	while read -r id; do
		[[ $id == "${1:-}" ]] && continue
		out+=${out:+,}127.0.0.1:$(broker_port "$id")
	done < <(running_ids)
	[[ -n $out ]] || die "no broker of this cluster is running"
	printf '%s' "$out"
}

# registered_ids: the broker ids registered in ZooKeeper, one a line.
registered_ids() {
	zk_batch "ls /brokers/ids" | section 0 | grep -E '^\[' | tr -d '[] ' | tr ',' '\n' | grep -E '^[0-9]+$' || true
}

# controller_id: the broker id in /controller, empty if none.
controller_id() {
	zk_batch "get /controller" | section 0 | grep -oE '"brokerid":-?[0-9]+' | cut -d: -f2 || true
}

cmd_add() {
	local id=$1 entry
	lock
	zk_ruok || die "zookeeper does not answer at $ZK_ADDR: run scripts/cluster.sh up"
	if broker_pid "$id" >/dev/null; then
		die "broker $id is already running"
	fi
	if [[ " $(registered_ids | tr '\n' ' ') " == *" $id "* ]]; then
		die "broker id $id is already registered in ZooKeeper by another process"
	fi
	if [[ -d $(broker_dir "$id")/data && -n $(ls -A "$(broker_dir "$id")/data" 2>/dev/null) ]]; then
		die "broker $id has data in $(broker_dir "$id"): it is not new; use 'start $id' to restart it"
	fi
	ensure_binary
	entry=$(launch_broker "$id")
	wait_ready "$entry"
	say "broker $id: joined; it holds no replicas until a reassignment moves some onto it:"
	say "  bin/kafka-admin reassign-partitions --bootstrap-server $(live_bootstrap) --generate --topics-to-move-json-file topics.json --broker-list ..."
}

# decommission_plan ID REMAINING CURRENT: from CURRENT (a reassignment JSON of
# every partition), a plan for the partitions that have a replica on ID, each
# replacing ID in place (so the preference order is otherwise kept) by the
# remaining broker outside its replica set that holds the fewest replicas so far.
decommission_plan() {
	jq -c --argjson id "$1" --argjson rem "$2" '
		.partitions as $ps
		| (reduce $ps[] as $p ({}; reduce $p.replicas[] as $r (.; .[$r | tostring] += 1))) as $load0
		| reduce ($ps[] | select(.replicas | index($id))) as $p ({load: $load0, out: []};
			.load as $l
			| ([$rem[] | select(. as $b | $p.replicas | index($b) | not)]
				| sort_by([($l[tostring] // 0), .]) | first) as $new
			| if $new == null then error("no broker left to take \($p.topic)-\($p.partition): replicas \($p.replicas)") else . end
			| .out += [$p | .replicas |= map(if . == $id then $new else . end) | .log_dirs = [.replicas[] | "any"]]
			| .load[$new | tostring] += 1)
		| {version: 1, partitions: .out}' <<<"$3"
}

cmd_decommission() {
	local id=$1 bs out topics remaining current plan dir deadline verify
	command -v jq >/dev/null 2>&1 || die "decommission needs jq (apt-get install jq)"
	zk_ruok || die "zookeeper does not answer at $ZK_ADDR"
	# The same lock as roll (and up/down/start): neither restarts a broker
	# under the other.
	lock
	broker_pid "$id" >/dev/null || die "broker $id is not running"
	ensure_admin
	bs=$(live_bootstrap)
	remaining=$(registered_ids | { grep -vx "$id" || true; } | paste -sd, -)
	[[ -n $remaining ]] || die "broker $id is the only registered broker: nowhere to move its replicas"
	out=$(zk_batch "ls /brokers/topics")
	topics=$(section 0 <<<"$out" | grep -E '^\[' | tr -d '[] ' | tr ',' '\n' | grep -v '^$' || true)
	dir=$CLUSTER_DIR/decommission-$id
	if [[ -n $topics ]]; then
		jq -cn --arg t "$topics" '{version: 1, topics: [$t | split("\n")[] | select(. != "") | {topic: .}]}' >"$dir.topics.json"
		# --generate's first section is the current assignment of every topic;
		# its proposal is not used, so racks must not make it fail.
		out=$("$KAFKA_ADMIN" reassign-partitions "${ADMIN_SEC[@]+"${ADMIN_SEC[@]}"}" --bootstrap-server "$bs" --generate --disable-rack-aware \
			--topics-to-move-json-file "$dir.topics.json" --broker-list "$remaining") ||
			die "kafka-admin --generate failed"
		current=$(sed -n '2p' <<<"$out")
		plan=$(decommission_plan "$id" "[$remaining]" "$current") || die "cannot plan the move off broker $id"
	else
		plan='{"version":1,"partitions":[]}'
	fi
	if [[ $(jq '.partitions | length' <<<"$plan") == 0 ]]; then
		say "broker $id: holds no replica"
	else
		printf '%s\n' "$plan" >"$dir.json"
		say "broker $id: moving $(jq '.partitions | length' <<<"$plan") partition(s) onto brokers $remaining (plan $dir.json)"
		local -a throttle=()
		[[ -z $THROTTLE ]] || throttle=(--throttle "$THROTTLE")
		"$KAFKA_ADMIN" reassign-partitions "${ADMIN_SEC[@]+"${ADMIN_SEC[@]}"}" --bootstrap-server "$bs" --execute \
			--reassignment-json-file "$dir.json" "${throttle[@]+"${throttle[@]}"}" | tee "$dir.execute.log" ||
			die "kafka-admin --execute failed; see above"
		sed -n '3p' "$dir.execute.log" >"$dir.rollback.json"
		# Poll with --preserve-throttles; the last --verify, once all is done,
		# clears the throttles (only needed when THROTTLE set them).
		deadline=$((SECONDS + MOVE_TIMEOUT))
		while :; do
			verify=$("$KAFKA_ADMIN" reassign-partitions "${ADMIN_SEC[@]+"${ADMIN_SEC[@]}"}" --bootstrap-server "$bs" --verify \
				--reassignment-json-file "$dir.json" --preserve-throttles) ||
				die "kafka-admin --verify failed: $verify"
			if ! grep -q 'is still in progress' <<<"$verify"; then break; fi
			((SECONDS < deadline)) || die "the move off broker $id is not complete after ${MOVE_TIMEOUT}s; it goes on (kafka-admin reassign-partitions --list); broker $id left running"
			sleep 1
		done
		if [[ -n $THROTTLE ]]; then
			verify=$("$KAFKA_ADMIN" reassign-partitions "${ADMIN_SEC[@]+"${ADMIN_SEC[@]}"}" --bootstrap-server "$bs" --verify --reassignment-json-file "$dir.json") ||
				die "kafka-admin --verify (clearing the throttles) failed: $verify"
		fi
		say "$verify"
		if [[ -n $THROTTLE ]] && ! grep -q '^Clearing broker-level throttles' <<<"$verify"; then
			# Kafka's --verify clears throttles only once no reassignment at
			# all is in progress.
			say "broker $id: the throttles set for this move are still in place: another reassignment is in progress" \
				"(kafka-admin reassign-partitions --bootstrap-server $bs --list); once it ends, clear them with" \
				"kafka-admin reassign-partitions --bootstrap-server $bs --verify --reassignment-json-file $dir.json" >&2
		fi
		if grep -q 'rather than' <<<"$verify"; then
			die "the reassignment ended but some replica sets differ from the plan (cancelled?); broker $id left running"
		fi
	fi
	cmd_stop "$id"
	say "broker $id: decommissioned; its data stays in $(broker_dir "$id") until 'clean'"
}

# urp ID: broker ID's UnderReplicatedPartitions from its /metrics; fails when
# the broker does not answer.
urp() {
	curl -sf --max-time 5 "http://127.0.0.1:$(broker_http_port "$1")/metrics" |
		awk '$1 == "kafka_server_replicamanager_underreplicatedpartitions" { print int($2); found = 1 } END { exit !found }'
}

# wait_no_urp [ID]: until every running broker answers /metrics with 0
# under-replicated partitions, twice in a row, or fail after URP_TIMEOUT. With
# ID (the broker just restarted), fail at once when it is no longer running: a
# dead broker drops out of running_ids, and the others may still count 0 until
# replica.lag.time.max.ms shrinks its replicas out of their ISRs.
wait_no_urp() {
	local id n total ok=0 deadline=$((SECONDS + URP_TIMEOUT)) detail watch=${1:-}
	while ((ok < 2)); do
		if [[ -n $watch ]] && ! broker_pid "$watch" >/dev/null; then
			tail -n 30 "$(broker_log "$watch")" >&2 || true
			die "broker $watch exited after its restart, while waiting for 0 under-replicated partitions; roll stopped (log: $(broker_log "$watch"))"
		fi
		total=0 detail=''
		while read -r id; do
			if n=$(urp "$id"); then
				total=$((total + n))
				detail+=" $id:$n"
			else
				total=$((total + 1))
				detail+=" $id:?"
			fi
		done < <(running_ids)
		if ((total == 0)); then
			ok=$((ok + 1))
		else
			ok=0
		fi
		((ok >= 2)) && break
		((SECONDS < deadline)) || die "under-replicated partitions still not 0 after ${URP_TIMEOUT}s (broker:count$detail)"
		sleep 1
	done
	say "under-replicated partitions: 0 on every running broker"
}

cmd_roll() {
	local id ctrl entry
	local -a order=()
	zk_ruok || die "zookeeper does not answer at $ZK_ADDR"
	lock
	ensure_binary
	ctrl=$(controller_id)
	while read -r id; do
		[[ $id == "$ctrl" ]] || order+=("$id")
	done < <(running_ids)
	if [[ -n $ctrl ]] && broker_pid "$ctrl" >/dev/null; then order+=("$ctrl"); fi
	((${#order[@]} > 0)) || die "no broker of this cluster is running"
	say "roll: brokers ${order[*]} in this order (controller ${ctrl:-none} last)"
	wait_no_urp
	for id in "${order[@]}"; do
		say "roll: broker $id"
		stop_pids "$STOP_TIMEOUT" "broker $id:$(broker_pidfile "$id"):$(broker_props "$id")"
		if [[ -n $STOP_KILLED ]]; then
			# No controlled shutdown finished: its partitions were not moved
			# off it first, and 0 under-replicated partitions soon after the
			# restart would prove nothing (the others notice a dead follower
			# only after replica.lag.time.max.ms). Restart it, then stop.
			say "roll: broker $id did not exit within STOP_TIMEOUT=${STOP_TIMEOUT}s of SIGTERM and was SIGKILLed; starting it again" >&2
			entry=$(launch_broker "$id")
			wait_ready "$entry"
			die "roll stopped at broker $id: its controlled shutdown did not finish within STOP_TIMEOUT=${STOP_TIMEOUT}s, so it was SIGKILLed (restarted since); check its log ($(broker_log "$id")) and 'status' before rolling again, with a larger STOP_TIMEOUT if the shutdown is just slow"
		fi
		entry=$(launch_broker "$id")
		wait_ready "$entry"
		wait_no_urp "$id"
	done
	say "roll: done; controller now $(controller_id)"
}

cmd_logs() {
	local which=$1 follow=${2:-} file
	if [[ $which == zk || $which == zookeeper ]]; then
		file=$ZK_LOG
	else
		check_id "$which"
		file=$(broker_log "$which")
	fi
	[[ -f $file ]] || die "no log at $file"
	if [[ $follow == -f ]]; then
		exec tail -n "$LOG_LINES" -f "$file"
	fi
	tail -n "$LOG_LINES" "$file"
}

cmd_clean() {
	case $CLUSTER_DIR in
	/ | "$ROOT" | "${HOME:-/}" | /tmp | /root) die "refusing to remove $CLUSTER_DIR" ;;
	esac
	[[ -d $CLUSTER_DIR ]] || return 0
	if [[ ! -f $ENV_FILE && -n $(ls -A "$CLUSTER_DIR") ]]; then
		die "$CLUSTER_DIR has no cluster.env, so cluster.sh did not make it; not removing it"
	fi
	cmd_down
	rm -rf "$CLUSTER_DIR"
	say "removed $CLUSTER_DIR"
}

usage() {
	sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
}

main() {
	local cmd=${1:-}
	shift || true
	case $cmd in
	up) cmd_up ;;
	down) cmd_down ;;
	status) cmd_status ;;
	start) check_id "${1:-}" && cmd_start "$1" ;;
	stop) check_id "${1:-}" && cmd_stop "$1" ;;
	kill) check_id "${1:-}" && cmd_signal KILL "$1" ;;
	pause) check_id "${1:-}" && cmd_signal STOP "$1" ;;
	resume) check_id "${1:-}" && cmd_signal CONT "$1" ;;
	logs) cmd_logs "${1:-}" "${2:-}" ;;
	clean) cmd_clean ;;
	add) check_id "${1:-}" && cmd_add "$1" ;;
	decommission) check_id "${1:-}" && cmd_decommission "$1" ;;
	roll) cmd_roll ;;
	-h | --help | help) usage ;;
	*)
		usage >&2
		exit 2
		;;
	esac
}

main "$@"
