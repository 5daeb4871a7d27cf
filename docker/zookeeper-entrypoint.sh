#!/bin/bash
# zookeeper-entrypoint.sh: the entrypoint of the local ZooKeeper image that
# scripts/images.sh builds from Debian's packages (kafkazk/zookeeper:3.8-debian).
#
# It honours the same environment variables as the official `zookeeper` image's
# docker-entrypoint.sh, so docker-compose.yml runs unchanged on either image:
#
#   ZOO_CONF_DIR [/conf]          where zoo.cfg is written (kept if it exists)
#   ZOO_DATA_DIR [/data]          dataDir (snapshots, myid)
#   ZOO_DATA_LOG_DIR [/datalog]   dataLogDir (transaction log)
#   ZOO_MY_ID [1]                 this server's id, written to dataDir/myid
#   ZOO_SERVERS []                "server.1=host:2888:3888;2181 server.2=..."; empty
#                                 means standalone
#   ZOO_TICK_TIME [2000], ZOO_INIT_LIMIT [5], ZOO_SYNC_LIMIT [2],
#   ZOO_MAX_CLIENT_CNXNS [60], ZOO_STANDALONE_ENABLED [true],
#   ZOO_ADMINSERVER_ENABLED [true], ZOO_AUTOPURGE_PURGEINTERVAL [0],
#   ZOO_AUTOPURGE_SNAPRETAINCOUNT [3], ZOO_4LW_COMMANDS_WHITELIST [srvr],
#   ZOO_CFG_EXTRA []              extra "key=value key=value" lines for zoo.cfg
#   JVMFLAGS [-Xmx256m]           flags for the JVM
#
# With arguments it runs them instead (e.g. `docker run IMAGE zkCli.sh ...`);
# `zkServer.sh start-foreground` (the official image's CMD) starts the server.
set -euo pipefail

ZOO_CONF_DIR=${ZOO_CONF_DIR:-/conf}
ZOO_DATA_DIR=${ZOO_DATA_DIR:-/data}
ZOO_DATA_LOG_DIR=${ZOO_DATA_LOG_DIR:-/datalog}
ZOO_MY_ID=${ZOO_MY_ID:-1}
cfg=$ZOO_CONF_DIR/zoo.cfg

if [[ $# -gt 0 && ! ($1 == zkServer.sh && ${2:-} == start-foreground) ]]; then
	exec "$@"
fi

mkdir -p "$ZOO_CONF_DIR" "$ZOO_DATA_DIR" "$ZOO_DATA_LOG_DIR"
if [[ ! -f $cfg ]]; then
	{
		printf 'dataDir=%s\n' "$ZOO_DATA_DIR"
		printf 'dataLogDir=%s\n' "$ZOO_DATA_LOG_DIR"
		printf 'tickTime=%s\n' "${ZOO_TICK_TIME:-2000}"
		printf 'initLimit=%s\n' "${ZOO_INIT_LIMIT:-5}"
		printf 'syncLimit=%s\n' "${ZOO_SYNC_LIMIT:-2}"
		printf 'autopurge.snapRetainCount=%s\n' "${ZOO_AUTOPURGE_SNAPRETAINCOUNT:-3}"
		printf 'autopurge.purgeInterval=%s\n' "${ZOO_AUTOPURGE_PURGEINTERVAL:-0}"
		printf 'maxClientCnxns=%s\n' "${ZOO_MAX_CLIENT_CNXNS:-60}"
		printf 'standaloneEnabled=%s\n' "${ZOO_STANDALONE_ENABLED:-true}"
		printf 'admin.enableServer=%s\n' "${ZOO_ADMINSERVER_ENABLED:-true}"
		printf '4lw.commands.whitelist=%s\n' "${ZOO_4LW_COMMANDS_WHITELIST:-srvr}"
		if [[ -z ${ZOO_SERVERS:-} ]]; then
			printf 'clientPort=2181\n'
		else
			for server in $ZOO_SERVERS; do printf '%s\n' "$server"; done
		fi
		for kv in ${ZOO_CFG_EXTRA:-}; do printf '%s\n' "$kv"; done
	} >"$cfg"
fi
[[ -f $ZOO_DATA_DIR/myid ]] || printf '%s\n' "$ZOO_MY_ID" >"$ZOO_DATA_DIR/myid"

# QuorumPeerMain runs a quorum member, or a standalone server when zoo.cfg names
# no servers (as zkServer.sh does).
# shellcheck disable=SC2086 # JVMFLAGS is a list of words
exec java ${JVMFLAGS:--Xmx256m} -Dzookeeper.log.dir=/tmp -Dzookeeper.root.logger=INFO,CONSOLE \
	-cp "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar" \
	org.apache.zookeeper.server.quorum.QuorumPeerMain "$cfg"
