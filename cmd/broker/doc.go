// Command broker runs one Kafka-compatible broker coordinated through
// ZooKeeper.
//
//	broker server.properties [--override key=value ...]
//
// It reads Kafka's server.properties names (broker.id, listeners,
// zookeeper.connect, log.dirs, ...) with Kafka's defaults; an unknown key or
// a bad value stops it at start with a message naming the key. It logs JSON
// lines to stderr with zerolog (BROKER_LOG_LEVEL=debug|info|warn|error).
//
// Start order: parse the config, bind the listeners (so a port in use fails
// fast), open the replica manager (checkpoints), connect to ZooKeeper
// (top-level paths, cluster id), register /brokers/ids/<id>, start the
// metadata watches and apply the partition states they carry, then serve
// clients. SIGTERM or SIGINT stops it in the reverse order: stop serving,
// flush and checkpoint the logs, close the ZooKeeper session.
//
// A log dir that an I/O error took offline (partition's LogDirFailure,
// logdirs.go) makes the broker write its log dir event notification
// through zkcoord, so the controller moves the dir's leaders elsewhere;
// when no log dir is left it logs Kafka's "Shutdown broker because all log
// dirs in ... have failed", stops as on SIGTERM (controlled shutdown
// first; Kafka halts at once) and exits 1.
//
// The transaction coordinator (package txn, transaction.* keys) starts
// after the group coordinator and closes before it, once the server has
// stopped: it keeps __transaction_state through the replica manager
// (offsetsLog, shared with the group coordinator), draws producer ids from
// the allocator the idempotent producers use, and writes markers through
// markerWriter: one WriteTxnMarkers per leader broker from the metadata
// cache, a partition missing from the metadata being a deleted topic (the
// coordinator drops it) and a missing or dead leader, or a leader without
// the replica, a retriable NOT_LEADER. controlPlane tells it of the
// __transaction_state partitions this broker leads and stops leading, as
// it tells the group coordinator of __consumer_offsets. The transaction
// keys are read-only (server.properties only) as in Kafka; cluster's
// broker key table does not list them yet, so DescribeConfigs does not
// show them.
//
// Security (security.go, issue 14): listener.security.protocol.map takes
// PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL; each listener's ssl.*,
// sasl.enabled.mechanisms and ssl.principal.mapping.rules may be set as
// listener.name.<listener>.<key>, and its JAAS configs only as
// listener.name.<listener>.<mechanism>.sasl.jaas.config (PLAIN's
// user_<name> entries are its users; the inter-broker listener's entry for
// sasl.mechanism.inter.broker.protocol carries the broker's own username
// and password). inter.broker.listener.name or security.inter.broker.protocol
// (a listener named after the protocol), not both, picks the inter-broker
// listener; BrokerClient authenticates to it with that listener's
// TLSContext and mechanism. serve builds one TLSContext per TLS listener,
// a ScramCredentialCache that zkcoord's WatchScramCredentials fills, and
// with authorizer.class.name=kafka.security.authorizer.AclAuthorizer a
// security.Authorizer (super.users, allow.everyone.if.no.acl.found) that
// WatchACLs fills; zkcoord's ACLStore is protocol's ACLAdmin and
// scramAdmin adapts its ScramStore to ScramAdmin. The ZooKeeper digest
// identity is the Client section of the JAAS file named by
// -Djava.security.auth.login.config in KAFKA_OPTS, as the JVM reads it;
// zookeeper.set.acl makes zkcoord create znodes with ACLs. Passwords,
// private keys and listener-prefixed keys describe as null.
package main
