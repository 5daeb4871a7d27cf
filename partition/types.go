package partition

import (
	"errors"

	"github.com/kafkazk/broker/cluster"
)

// Errors returned by Manager and Replica methods. protocol maps each to a
// Kafka error code in one table.
var (
	// ErrUnknownTopicOrPartition: this broker holds no replica of the partition.
	ErrUnknownTopicOrPartition = errors.New("partition: unknown topic or partition")
	// ErrNotLeader: the request needs the leader and this replica is not it.
	ErrNotLeader = errors.New("partition: not leader or follower")
	// ErrNotEnoughReplicas: acks=all and the ISR is smaller than
	// min.insync.replicas before the append; nothing was written.
	ErrNotEnoughReplicas = errors.New("partition: not enough replicas")
	// ErrNotEnoughReplicasAfterAppend: written, but the ISR shrank below
	// min.insync.replicas before the acks=all wait completed.
	ErrNotEnoughReplicasAfterAppend = errors.New("partition: not enough replicas after append")
	// ErrRequestTimedOut: an acks=all wait reached its deadline.
	ErrRequestTimedOut = errors.New("partition: request timed out")
	// ErrOffsetOutOfRange: a fetch or list offset outside [LogStartOffset, LogEndOffset].
	ErrOffsetOutOfRange = errors.New("partition: offset out of range")
	// ErrCorruptMessage: a batch failed its CRC or framing check; nothing was written.
	ErrCorruptMessage = errors.New("partition: corrupt message")
	// ErrInvalidRecord: a batch is well formed but breaks a rule (base offset
	// not 0, control batch from a client, bad magic, record count mismatch).
	ErrInvalidRecord = errors.New("partition: invalid record")
	// ErrMessageTooLarge: a batch is larger than max.message.bytes.
	ErrMessageTooLarge = errors.New("partition: message too large")
	// ErrRecordListTooLarge: a batch is larger than segment.bytes.
	ErrRecordListTooLarge = errors.New("partition: record list too large")
	// ErrOutOfOrderSequence: an idempotent batch's sequence is not the next expected.
	ErrOutOfOrderSequence = errors.New("partition: out of order sequence number")
	// ErrInvalidProducerEpoch: an idempotent batch carries an older producer epoch.
	ErrInvalidProducerEpoch = errors.New("partition: invalid producer epoch")
	// ErrUnknownProducerID: a producer id with a non-zero first sequence and no state.
	ErrUnknownProducerID = errors.New("partition: unknown producer id")
	// ErrFencedLeaderEpoch: the client's leader epoch is older than ours.
	ErrFencedLeaderEpoch = errors.New("partition: fenced leader epoch")
	// ErrUnknownLeaderEpoch: the client's leader epoch is newer than ours.
	ErrUnknownLeaderEpoch = errors.New("partition: unknown leader epoch")
	// ErrOffsetNotAvailable: a consumer asked for the latest offset (or a
	// timestamp past the high watermark) while a new leader's high
	// watermark still lags the start of its epoch (KIP-207); it retries.
	ErrOffsetNotAvailable = errors.New("partition: offset not available")
	// ErrStorage: the log could not be read or written (disk error).
	ErrStorage = errors.New("partition: storage error")
	// ErrInvalidTxnState (INVALID_TXN_STATE): a transactional batch of a
	// producer with no ongoing transaction on the partition came without
	// the verification guard the leader holds for it (or the guard was
	// cleared by a marker meanwhile), or a non-transactional batch came
	// from a producer with an ongoing transaction.
	ErrInvalidTxnState = errors.New("partition: invalid transaction state")
	// ErrTransactionCoordinatorFenced (TRANSACTION_COORDINATOR_FENCED):
	// WriteTxnMarker with a coordinator epoch below the last one seen for
	// the producer on the partition.
	ErrTransactionCoordinatorFenced = errors.New("partition: transaction coordinator fenced")
)

// AppendResult describes a successful leader append.
type AppendResult struct {
	BaseOffset     int64 // offset of the first record appended (or of the original, for a duplicate)
	LastOffset     int64 // offset of the last record appended; acks=all waits for HW > LastOffset
	LogAppendTime  int64 // -1 unless the topic uses LogAppendTime
	LogStartOffset int64
	// LeaderEpoch is the epoch the records were appended in (or a
	// duplicate found in): WaitCommitted fails if this broker stopped
	// leading at some point since, even if it leads again, because a
	// leader in between may have truncated them; a later epoch in which
	// it stayed leader is no loss.
	LeaderEpoch int32
}

// ReadRequest asks a replica for records from FetchOffset on.
type ReadRequest struct {
	FetchOffset int64
	MaxBytes    int32
	// ReplicaID is -1 for consumers (read up to the high watermark) and the
	// follower's broker id for replication (read up to the log end offset).
	ReplicaID int32
	// CurrentLeaderEpoch is the client's view of the leader epoch, or -1.
	CurrentLeaderEpoch int32
	// LogStartOffset is a follower's own log start offset (Fetch v5+), from
	// which the leader computes the low watermark DeleteRecords waits for;
	// ignored for consumers.
	LogStartOffset int64
	// IsolationLevel is 0 (read_uncommitted) or 1 (read_committed); only
	// a consumer's read (ReplicaID -1) honours read_committed, which
	// bounds it by the last stable offset and lists the aborted
	// transactions of the range.
	IsolationLevel int8
	// Buf, if not nil, is where Read puts the records: it appends them to
	// Buf, growing it only if its capacity is short, and returns the
	// extended slice as ReadResult.Buf. A caller that reads many
	// partitions into one pooled buffer allocates nothing per read; the
	// records then live only as long as the caller keeps the buffer.
	Buf []byte
}

// ReadResult is what a Read returns. Records holds whole v2 batches as
// stored; it may be empty and is owned by the caller.
type ReadResult struct {
	Records []byte
	// Buf is ReadRequest.Buf with Records appended (Records is its tail),
	// or nil when the request had no Buf and nothing was read.
	Buf           []byte
	HighWatermark int64
	// LastStableOffset is filled for every read: min(first offset of an
	// unstable transaction, HW), where a transaction ended by a marker at
	// or above the HW still counts as unstable.
	LastStableOffset int64
	LogStartOffset   int64
	// AbortedTransactions is set on a read_committed read only: the
	// aborted transactions overlapping the returned records, oldest
	// first. Empty (nil) when none.
	AbortedTransactions []AbortedTransaction
	// Throttled is set on a follower's read of a replica that the topic's
	// leader.replication.throttled.replicas names on this broker: the
	// caller passes the bytes it sends of such reads, once its response is
	// final, to Manager.RecordLeaderReplication.
	Throttled bool
}

// AbortedTransaction is one aborted transaction of a read_committed read:
// the consumer drops the producer's batches from FirstOffset on until it
// meets the producer's ABORT marker.
type AbortedTransaction struct {
	ProducerID  int64
	FirstOffset int64
}

// ListOffsets timestamps with special meaning, as in Kafka's protocol.
const (
	LatestTimestamp   int64 = -1
	EarliestTimestamp int64 = -2
	// MaxTimestamp (v7, KIP-734) asks for the batch with the largest
	// timestamp.
	MaxTimestamp int64 = -3
)

// OffsetsAsker is who sends a ListOffsets, which decides what bounds the
// answer, as the isolation level Kafka derives from the request does. The
// zero value is the most restricted asker, a consumer.
type OffsetsAsker uint8

const (
	// AskerConsumer is a read_uncommitted consumer's v1+ request (replica
	// id -1): the high watermark bounds the answer, and while a new
	// leader's HW lags the start of its epoch the answer is
	// ErrOffsetNotAvailable (KIP-207).
	AskerConsumer OffsetsAsker = iota
	// AskerLegacyConsumer is a consumer's v0 request: the high watermark
	// bounds the answer.
	AskerLegacyConsumer
	// AskerReplica is a request with a replica id (not -1), at any
	// version: Kafka gives it no isolation level, so the log end offset
	// bounds the answer.
	AskerReplica
	// AskerCommittedConsumer is a read_committed consumer's request
	// (v2+, isolation level 1): the last stable offset bounds the answer,
	// with KIP-207's high watermark check as for AskerConsumer.
	AskerCommittedConsumer
)

// TxnMarker is one WriteTxnMarkers entry for one partition.
type TxnMarker struct {
	ProducerID       int64
	ProducerEpoch    int16
	CoordinatorEpoch int32
	Commit           bool
}

// AppendOrigin is who appends (Kafka's AppendOrigin).
type AppendOrigin uint8

const (
	// OriginClient is a producer's batch: sequence checks and, for a
	// transactional batch, verification.
	OriginClient AppendOrigin = iota
	// OriginCoordinator is a group or transaction coordinator's own
	// write: no sequence checks; a transactional one (a TxnOffsetCommit)
	// is verified as a client's is.
	OriginCoordinator
)

// AppendOptions are the options of Manager.AppendWith.
type AppendOptions struct {
	Acks   int16
	Origin AppendOrigin
	// VerificationGuard is the guard TxnVerificationGuard returned, for a
	// transactional client batch of a producer with no ongoing
	// transaction on the partition (0: none).
	VerificationGuard uint64
	// Wakes, if not nil, collects the append's wake-up of long-polling
	// fetches instead of sending it: the caller appends a request's
	// partitions, then sends them all at once with Manager.Wake (Kafka
	// completes delayed fetches after the whole produce request is
	// appended, through its ActionQueue).
	Wakes *Wakes
}

// OngoingTxn is one open transaction of a replica, for ReplicaStatus.
type OngoingTxn struct {
	ProducerID    int64
	ProducerEpoch int16
	FirstOffset   int64
	LastTimestamp int64
}

// ProducerInfo is one producer of a partition, for DescribeProducers.
type ProducerInfo struct {
	ProducerID            int64
	ProducerEpoch         int16
	LastSequence          int32
	LastTimestamp         int64
	CoordinatorEpoch      int32 // -1 if none seen
	CurrentTxnStartOffset int64 // -1 if no ongoing transaction
}

// PartitionState is what the broker is told about one partition it holds a
// replica of: its assignment, its leader-and-ISR state and its effective
// log configuration.
type PartitionState struct {
	TopicPartition cluster.TopicPartition
	Replicas       []int32
	LeaderAndIsr   cluster.LeaderAndIsr
	Config         cluster.LogConfig
	// AddingReplicas and RemovingReplicas are the replicas a reassignment
	// in progress adds and removes (a subset of Replicas each); empty when
	// none runs.
	AddingReplicas   []int32
	RemovingReplicas []int32
	// IsNew is LeaderAndIsr's is_new: the partition was just created, so
	// its log may be created even while a log dir is offline (Kafka's
	// LogManager.getOrCreateLog); a log not new and not found on an
	// online dir may be on the offline one and is answered ErrStorage.
	IsNew bool
}
