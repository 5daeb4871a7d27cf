// Package cluster holds the value types and sentinel errors that every other
// package of the broker speaks: topic-partition names, broker endpoints, the
// leader-and-ISR state of a partition, replica assignments, and topic-level
// configuration with Kafka's names and defaults.
//
// It owns no state and starts no goroutines. It sits below partition in the
// dependency order (cmd/broker -> protocol, zkcoord -> partition -> logstore,
// with cluster importable by all of them) so that zkcoord and protocol can
// exchange values without importing each other.
package cluster
