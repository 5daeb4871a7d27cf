package partition

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kafkazk/broker/cluster"
)

// ErrStateConflict is returned by StateWriter.WriteLeaderAndIsr when the
// partition state znode changed since the version the leader holds: the
// leader is stale and must keep its old ISR until the controller tells it
// the new state.
var ErrStateConflict = errors.New("partition: partition state changed under the leader")

// StateConflictError is the ErrStateConflict of a StateWriter that read
// the state back: Stored is the state it found, with its zkVersion. It
// matches errors.Is(err, ErrStateConflict). A leader adopts Stored when it
// is its own state of its current leader epoch (see completeIsrChange).
type StateConflictError struct {
	Stored cluster.LeaderAndIsr
}

func (e *StateConflictError) Error() string {
	return fmt.Sprintf("%v: stored zk_version %d has leader %d leader_epoch %d isr %v controller_epoch %d",
		ErrStateConflict, e.Stored.ZkVersion, e.Stored.Leader, e.Stored.LeaderEpoch, e.Stored.Isr, e.Stored.ControllerEpoch)
}

// Unwrap makes errors.Is(err, ErrStateConflict) hold.
func (e *StateConflictError) Unwrap() error { return ErrStateConflict }

// FetchPartition is one partition of a follower's replica fetch.
type FetchPartition struct {
	TopicPartition     cluster.TopicPartition
	FetchOffset        int64
	CurrentLeaderEpoch int32
	LogStartOffset     int64
	MaxBytes           int32 // replica.fetch.max.bytes
}

// FetchRequest is one replica fetch from a follower broker to a leader
// broker, covering every partition it follows there and is ready to fetch.
// Partitions is the full list every time: a LeaderClient with fetch
// sessions sends only what changed since its previous fetch.
type FetchRequest struct {
	ReplicaID  int32         // the follower's broker id
	MaxWait    time.Duration // replica.fetch.wait.max.ms
	MinBytes   int32         // replica.fetch.min.bytes
	MaxBytes   int32         // replica.fetch.response.max.bytes
	Partitions []FetchPartition
}

// FetchPartitionResult is the leader's answer for one partition. Err is one
// of this package's sentinels (ErrNotLeader, ErrFencedLeaderEpoch,
// ErrUnknownLeaderEpoch, ErrOffsetOutOfRange, ErrUnknownTopicOrPartition,
// ...) or nil. Records are whole batches, the caller's until the
// response's Release.
type FetchPartitionResult struct {
	Err            error
	HighWatermark  int64
	LogStartOffset int64
	Records        []byte
}

// FetchResponse holds the leader's answers by partition. In an
// incremental fetch session (KIP-227) it holds only the partitions with
// records, an error, or a high watermark or log start offset the follower
// was not told yet: a partition asked for but left out has no new data and
// no error, and the fetcher leaves it as it is.
type FetchResponse struct {
	Partitions map[cluster.TopicPartition]FetchPartitionResult
	// Release, if not nil, gives back the memory the Records alias (the
	// response frame, to the client's buffer pool). The fetcher calls it
	// once it has appended them; nothing may use Records afterwards.
	Release func()
}

// EpochQuery asks a leader where LeaderEpoch ends in its log
// (OffsetForLeaderEpoch, KIP-101/279).
type EpochQuery struct {
	TopicPartition     cluster.TopicPartition
	CurrentLeaderEpoch int32 // the follower's view of the current leader epoch
	LeaderEpoch        int32 // the epoch whose end offset is wanted
}

// EpochAnswer is the leader's answer to one EpochQuery: the largest epoch
// at or below the one asked for and the offset where it ends (-1, -1 if
// unknown), or an error.
type EpochAnswer struct {
	TopicPartition cluster.TopicPartition
	Err            error
	LeaderEpoch    int32
	EndOffset      int64
}

// LeaderClient is how a follower reads from its leader. protocol
// implements it with Fetch and OffsetForLeaderEpoch requests; partition
// tests call the leader Manager directly.
type LeaderClient interface {
	// Fetch sends one replica fetch to broker leader. An error means the
	// request as a whole failed (connection, timeout); per-partition errors
	// are in the response.
	Fetch(ctx context.Context, leader int32, req FetchRequest) (FetchResponse, error)
	// OffsetsForLeaderEpoch asks broker leader for epoch end offsets.
	OffsetsForLeaderEpoch(ctx context.Context, leader int32, queries []EpochQuery) ([]EpochAnswer, error)
}

// EarliestOffsetLister is a LeaderClient that can also ask a leader for
// its log start offset, as Kafka's fetchEarliestOffsetFromLeader does. A
// follower whose fetch offset is out of range needs it: the Fetch answer
// for an errored partition carries log start offset -1 on the wire, so it
// cannot tell a log start that moved past the follower's LEO. protocol's
// client implements it; a LeaderClient without it falls back to the
// log start offset in the Fetch answer.
type EarliestOffsetLister interface {
	// ListEarliestOffset asks broker leader for tp's log start offset
	// (ListOffsets, timestamp EarliestTimestamp, with the follower's
	// broker id as replica id), fenced by currentLeaderEpoch (KIP-320).
	// An error wraps this package's sentinel for a per-partition error
	// (ErrNotLeader, ErrFencedLeaderEpoch, ...) or reports that the
	// request as a whole failed.
	ListEarliestOffset(ctx context.Context, leader int32, tp cluster.TopicPartition, currentLeaderEpoch int32) (int64, error)
}

// StateWriter is how a leader publishes an ISR change. zkcoord implements
// it with a conditional write of the partition state znode.
type StateWriter interface {
	// WriteLeaderAndIsr writes st as tp's state, conditional on
	// st.ZkVersion, and returns the new zkVersion. It returns an error
	// wrapping ErrStateConflict when the znode moved on, a
	// *StateConflictError with the stored state when it read it back.
	WriteLeaderAndIsr(ctx context.Context, tp cluster.TopicPartition, st cluster.LeaderAndIsr) (newZkVersion int32, err error)
	// NotifyIsrChange records that tp's ISR changed, so the controller
	// learns it through /isr_change_notification (batched by the writer).
	NotifyIsrChange(tp cluster.TopicPartition)
}
