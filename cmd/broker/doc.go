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
package main
