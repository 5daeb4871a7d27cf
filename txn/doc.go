// Package txn is the transaction coordinator, as Kafka 3.x's
// TransactionCoordinator, TransactionStateManager and
// TransactionMarkerChannelManager in ZooKeeper mode (KIP-98, KIP-360,
// KIP-447, KIP-890 part 1; transaction version 0, so EndTxn does not bump
// the epoch): InitProducerId with a transactional id, AddPartitionsToTxn
// and its verify-only form, AddOffsetsToTxn, EndTxn, ListTransactions and
// DescribeTransactions, for the transactional ids whose partition of
// __transaction_state this broker leads. It sends transaction markers
// through a MarkerWriter and allocates producer ids through ProducerIDs.
// txn imports cluster, partition (types and errors) and kmsg, never
// protocol, zkcoord, logstore or group.
//
// # Ownership and loading
//
// A transactional id lives in partition PartitionFor(id, n) = abs(Java
// String.hashCode(id)) mod transaction.state.log.num.partitions of Topic
// (the hash of group.PartitionFor) and is coordinated by that partition's
// leader; its coordinator epoch is the partition's leader epoch, sent in
// every marker so partition leaders refuse a deposed coordinator's.
// cmd/broker calls OnBecomeLeader(p, leaderEpoch) and OnBecomeFollower(p)
// as for the group coordinator; a newer leader epoch of a partition already
// led reloads it. Loading reads the partition (ReplicaID -1, so bounded by
// the high watermark) from the log start to the log end offset it had at
// becoming leader, the last record of each id winning and a tombstone
// removing it; a batch that fails its CRC, does not decode or has a length
// below a v2 batch header's (only a batch cut off by the end of a read is
// a partial tail) is retried with backoff (up to 1 s), never skipped (the
// read loop is internal/coordlog's Load, shared with group), and
// records with an unknown key version are logged and skipped, as Kafka's
// loader does. Meanwhile the partition's ids answer
// ErrCoordinatorLoadInProgress, and ids of partitions not led here
// ErrNotCoordinator. Once loaded, every
// PrepareCommit/PrepareAbort found is completed (markers resent with the
// new coordinator epoch, then CompleteCommit/CompleteAbort written) and
// Ongoing transactions past their timeout are fenced and aborted.
// Resigning drops the partition's ids, stops its marker fan-outs and
// answers requests waiting for one of its writes ErrNotCoordinator.
//
// # State machine
//
// Kafka's states and transitions (TransactionMetadata.validPreviousStates):
// Empty <- Empty, CompleteCommit, CompleteAbort; Ongoing <- Ongoing, Empty,
// CompleteCommit, CompleteAbort; PrepareCommit <- Ongoing; PrepareAbort <-
// Ongoing, PrepareEpochFence; CompleteCommit <- PrepareCommit;
// CompleteAbort <- PrepareAbort; Dead <- Empty, CompleteCommit,
// CompleteAbort; PrepareEpochFence <- Ongoing. A transition is prepared
// (the id's pending state set), its record written and replicated, and only
// then applied (Kafka's prepareTransitionTo/completeTransitionTo); a failed
// write clears the pending state and leaves the cached state as it was, so
// the coordinator never answers success for, nor acts on, a transition
// that was not persisted. While a transition is pending, other requests for
// the id answer ErrConcurrentTransactions. Dead is never written (a
// tombstone is) and PrepareEpochFence is only ever pending: a fence writes
// PrepareAbort with the bumped epoch. The bump of a fence takes effect in
// memory at once, so the old producer stays fenced if the write fails;
// the next fence then reuses that epoch (Kafka's hasFailedEpochFence),
// also when it is 32767, which a bump could not reach.
//
// InitProducerID: a new id gets a producer id from ProducerIDs at epoch 0;
// Empty/CompleteCommit/CompleteAbort bump the epoch, or move to a new
// producer id at epoch 0 when the epoch is exhausted (>= 32766, one epoch
// being kept for fencing); Ongoing is fenced and aborted, answering
// ErrConcurrentTransactions until the abort completed; PrepareCommit/
// PrepareAbort answer ErrConcurrentTransactions. With a KIP-360 producer
// id and epoch: the current epoch bumps again, the last epoch (a retry of
// a bump that succeeded) answers the current one, the previous producer id
// at an exhausted epoch is recognised, anything else is ErrProducerFenced;
// an id with no epoch yet gets the fresh producer id. AddPartitions,
// AddOffsets (partition group.PartitionFor(group,
// offsets.topic.num.partitions) of __consumer_offsets) and
// VerifyPartitions need the current producer id (else
// ErrInvalidProducerIDMapping) and epoch (else ErrProducerFenced).
// AddPartitions and AddOffsets that find a transition pending or the
// previous transaction still completing (PrepareCommit/PrepareAbort)
// wait for it, up to completionWait (100 ms) and the request's context,
// and are then decided afresh; ErrConcurrentTransactions only if it has
// not ended by then. Kafka answers at once and the producer retries after
// its backoff (20 ms), which every back-to-back transaction paid: EndTxn
// is answered at PrepareCommit, the next AddPartitionsToTxn follows within
// a millisecond, and the markers plus CompleteCommit take about one. The
// outcome is a retry's; only when it is answered differs. EndTxn
// persists PrepareCommit/PrepareAbort, answers, and a background fan-out
// writes the markers, retrying every partition that failed with backoff
// (100 ms doubling to 5 s) until written, dropping only partitions whose
// error wraps cluster.ErrUnknownTopic (MarkerWriter's word that the
// metadata has no such topic: it was deleted; this narrows the contract,
// which also named partition.ErrUnknownTopicOrPartition), retrying
// partition.ErrUnknownTopicOrPartition like ErrNotLeader (the broker
// asked may not hold the replica yet, and dropping the marker would leave
// the transaction open on that partition), and stopping (as Kafka) when a leader refuses a marker
// with partition.ErrInvalidProducerEpoch (a newer producer epoch wrote
// there) or partition.ErrTransactionCoordinatorFenced (a coordinator with
// a newer coordinator epoch did: this one was deposed, and the new one
// completes the transaction); then CompleteCommit/CompleteAbort
// is written, retried until it is. A retried EndTxn of the completed
// outcome answers success, of the other ErrInvalidTxnState.
//
// Errors answered as Kafka's coordinator does: a client's older epoch is
// ErrProducerFenced (protocol answers INVALID_PRODUCER_EPOCH to request
// versions before KIP-588, as KafkaApis does; the coordinator itself never
// returns ErrInvalidProducerEpoch). A failed state write maps as
// TransactionStateManager.appendTransactionToLog: unknown partition, too
// few replicas and timeouts (a wait past WriteTimeout) answer
// ErrCoordinatorNotAvailable, not leader and storage errors
// ErrNotCoordinator, too large records neither (UNKNOWN_SERVER_ERROR).
// VerifyPartitions answers ErrInvalidTxnState for a partition not in the
// transaction (Kafka 3.6/3.7; later versions say TRANSACTION_ABORTABLE).
// A failed producer id allocation answers ErrCoordinatorNotAvailable so
// the client retries. An empty transactional id is ErrInvalidRequest.
//
// # Timeouts and expiry
//
// The background loop started by Start (once, however often it is
// called) runs on every tick of an AbortTimedOutInterval ticker the abort
// of Ongoing transactions without a pending transition whose start is more
// than their timeout ago (fenced with an epoch bump, so the producer's next
// request is ErrProducerFenced; the pass appends the PrepareAbort of every
// one of them, then waits for them together, each applied once its own
// record is replicated), and on every tick of a
// RemoveExpiredInterval ticker the removal of ids in Empty, CompleteCommit
// or CompleteAbort last updated more than IDExpiration ago: their
// tombstones are written (batches of at most 256 KiB) and the ids dropped
// once replicated; a failed tombstone write keeps them. Each id is checked
// again under the lock just before its batch is prepared, since the lock
// is released while an earlier batch replicates and a producer may have
// re-initialized the id meanwhile. Tick runs the same passes for tests
// with a fake clock, each when its interval passed since it was last due
// (due times advance by whole intervals, so a late Tick does not delay the
// next pass).
//
// # Storage format
//
// As Kafka 3.x in ZooKeeper mode writes __transaction_state
// (TransactionLog), with kmsg's TxnMetadataKey (version 0: the
// transactional id) and TxnMetadataValue (version 0: producer id, producer
// epoch, timeout ms, state id 0-7, partitions by topic -- null for Empty --,
// last update and start timestamps ms). Version 1 values (KIP-915) are
// read. The last producer epoch is not stored, so after a failover a
// KIP-360 retry of a bump answers ErrProducerFenced, as in Kafka. Each
// write is one uncompressed v2 batch (base offset 0, no producer id,
// CRC32C; internal/coordlog encodes and reads it, as for group) appended with acks -1 and waited for (WriteTimeout); the
// compacted topic keeps the last record of each id.
//
// # Concurrency
//
// One mutex, Coordinator.mu, guards the partitions and every
// transactional id's state. Requests run on their caller's goroutine:
// they prepare and append under the lock (so the records of an id are in
// the log in the order of its transitions), wait for replication without
// it (bounded by WriteTimeout and the partition's leadership, not by the
// request's context, so the outcome always reaches the cache), and retake
// it to apply the result, checking the partition was not unloaded or
// reloaded meanwhile. ProducerIDs and MarkerWriter are called without the
// lock. Loads and marker fan-outs run in goroutines counted by Close, and
// stop with their partition's context when it is unloaded.
//
// Lock order: Coordinator.mu -> (inside Log.Append) partition.Manager's
// and Replica's locks. The coordinator is never called with a partition
// lock held, and never holds Coordinator.mu while waiting for replication,
// a producer id or a marker.
package txn
