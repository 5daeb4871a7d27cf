package group

import (
	"github.com/kafkazk/broker/cluster"
)

// TxnCommitRequest is one TxnOffsetCommit: offsets committed as part of
// the producer's transaction, visible only once its COMMIT marker is
// written to the group's partition of Topic.
type TxnCommitRequest struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	Group           string
	// Generation is -1 when not checked (TxnOffsetCommit < v3, KIP-447).
	Generation int32
	// MemberID is "" when not checked.
	MemberID   string
	InstanceID *string
	Offsets    map[cluster.TopicPartition]CommitOffset
}

// hasUnstableCommit is Kafka's hasPendingOffsetCommitsForTopicPartition: a
// commit of tp waits for replication. Caller holds Coordinator.mu.
func (g *group) hasUnstableCommit(tp cluster.TopicPartition) bool {
	return g.pendingCommits[tp] > 0
}
