package partition

import "github.com/kafkazk/broker/cluster"

// Metrics receives the replica manager's events for monitoring (the
// broker's observe package turns them into Kafka's ReplicaManager and
// BrokerTopicMetrics). Implementations are called on the produce and
// fetch paths, never under a replica lock, and must be cheap and safe for
// concurrent use. Gauges (under-replicated partitions, follower lag) are
// not pushed: they are computed from PartitionStatus when read.
type Metrics interface {
	// IsrChanged is called after this broker, as leader of tp, wrote an
	// ISR change to ZooKeeper: expand is true when a follower was added
	// (Kafka's IsrExpandsPerSec), false when followers were removed
	// (IsrShrinksPerSec).
	IsrChanged(tp cluster.TopicPartition, expand bool)
	// BytesIn is called after a produced batch of messages records and
	// bytes bytes was appended to topic as leader.
	BytesIn(topic string, bytes, messages int64)
	// BytesOut is called after a fetch returned bytes of topic; replication
	// is true for a follower's fetch (Kafka's ReplicationBytesOutPerSec).
	BytesOut(topic string, bytes int64, replication bool)
}

// ReassignmentMetrics is what a Metrics may also implement to count the
// replication traffic of reassignments (KIP-573's ReassignmentBytesInPerSec
// and ReassignmentBytesOutPerSec): bytes a leader returned to a follower
// that a reassignment in progress is adding, and bytes this broker
// appended as such an adding follower. Same rules as Metrics.
type ReassignmentMetrics interface {
	ReassignmentBytes(bytes int64, in bool)
}

// noMetrics is the Metrics of a Manager configured without one.
type noMetrics struct{}

func (noMetrics) IsrChanged(cluster.TopicPartition, bool) {}
func (noMetrics) BytesIn(string, int64, int64)            {}
func (noMetrics) BytesOut(string, int64, bool)            {}

// PendingProduceWaits is the number of acks=all produces waiting for the
// high watermark right now: Kafka's produce purgatory size.
func (m *Manager) PendingProduceWaits() int64 { return m.produceWaits.Load() }
