package txn

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/internal/coordlog"
	"github.com/kafkazk/broker/partition"
)

// Topic is the internal topic holding the transaction state.
const Topic = "__transaction_state"

// offsetsTopic is the group coordinator's topic, whose partition of a group
// AddOffsets adds to a transaction.
const offsetsTopic = coordlog.OffsetsTopic

// PartitionFor is the partition of Topic holding transactionalID among n:
// abs(Java's String.hashCode) mod n, with Kafka's Utils.abs (MinInt32 maps
// to 0), 0 for n <= 0: coordlog.PartitionFor, as group.PartitionFor.
func PartitionFor(transactionalID string, n int32) int32 {
	return coordlog.PartitionFor(transactionalID, n)
}

// Log is how the coordinator reads and writes the partitions of Topic it
// leads; the same methods as group.Log (cmd/broker's offsetsLog implements
// both).
type Log interface {
	// Append appends records (whole v2 batches) as leader of tp; with acks
	// -1 it first checks min.insync.replicas.
	Append(tp cluster.TopicPartition, records []byte, acks int16) (partition.AppendResult, error)
	// WaitCommitted blocks until tp's high watermark passes lastOffset,
	// appended in leaderEpoch (AppendResult's); it fails if that
	// leadership is lost.
	WaitCommitted(ctx context.Context, tp cluster.TopicPartition, lastOffset int64, leaderEpoch int32) error
	// Read returns whole batches from req.FetchOffset, up to the high
	// watermark for ReplicaID -1.
	Read(tp cluster.TopicPartition, req partition.ReadRequest) (partition.ReadResult, error)
	// LogEndOffset is tp's log end offset on this broker.
	LogEndOffset(tp cluster.TopicPartition) (int64, error)
}

// ProducerIDs allocates producer ids (zkcoord's /latest_producer_id_block
// block allocator).
type ProducerIDs interface {
	InitProducerID(ctx context.Context) (producerID int64, producerEpoch int16, err error)
}

// Markers is one WriteTxnMarkers fan-out.
type Markers struct {
	ProducerID       int64
	ProducerEpoch    int16
	CoordinatorEpoch int32
	Commit           bool
	Partitions       []cluster.TopicPartition
}

// MarkerWriter sends markers to each partition's current leader (cmd/broker
// implements it with protocol.BrokerClient.WriteTxnMarkers and the metadata
// cache). The result holds an error for each partition not written (nil or
// absent: written and committed). The coordinator retries retriable errors
// with backoff until written, partition.ErrUnknownTopicOrPartition among
// them (a broker without the replica, maybe only for now), and drops only
// partitions whose error wraps cluster.ErrUnknownTopic, which the
// implementation returns only when the metadata has no such topic (a
// deleted topic). ErrInvalidProducerEpoch and
// ErrTransactionCoordinatorFenced end the transaction's fan-out.
type MarkerWriter interface {
	WriteMarkers(ctx context.Context, m Markers) map[cluster.TopicPartition]error
}

// Config configures a Coordinator. Zero values take Kafka's defaults.
type Config struct {
	BrokerID int32
	// NumPartitions is transaction.state.log.num.partitions (50).
	NumPartitions int32
	// OffsetsTopicPartitions is offsets.topic.num.partitions (50), for
	// AddOffsetsToTxn.
	OffsetsTopicPartitions int32
	// MaxTimeout is transaction.max.timeout.ms (15 min).
	MaxTimeout time.Duration
	// IDExpiration is transactional.id.expiration.ms (7 days).
	IDExpiration time.Duration
	// AbortTimedOutInterval is
	// transaction.abort.timed.out.transaction.cleanup.interval.ms (10 s).
	AbortTimedOutInterval time.Duration
	// RemoveExpiredInterval is
	// transaction.remove.expired.transaction.cleanup.interval.ms (1 h).
	RemoveExpiredInterval time.Duration
	// WriteTimeout is how long a state write waits for replication (5 s).
	WriteTimeout time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	Log         Log
	ProducerIDs ProducerIDs
	Markers     MarkerWriter
	Logger      zerolog.Logger
}

// InitRequest is one InitProducerId with a transactional id.
type InitRequest struct {
	TransactionalID      string
	TransactionTimeoutMs int32
	ProducerID           int64 // -1 unless a KIP-360 epoch bump
	ProducerEpoch        int16 // -1 unless a KIP-360 epoch bump
}

// Listing is one transactional id of ListTransactions.
type Listing struct {
	TransactionalID string
	ProducerID      int64
	State           string
}

// Description is one transactional id of DescribeTransactions.
type Description struct {
	TransactionalID string
	Err             error // ErrNotCoordinator, ErrCoordinatorLoadInProgress, ErrTransactionalIDNotFound
	State           string
	TimeoutMs       int32
	StartTimestamp  int64 // ms, -1 if none
	ProducerID      int64
	ProducerEpoch   int16
	Partitions      []cluster.TopicPartition
}
