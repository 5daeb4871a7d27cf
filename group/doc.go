// Package group is the consumer group coordinator, as Kafka 2.x's
// GroupCoordinator and GroupMetadataManager: the classic rebalance
// protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), committed
// offsets (OffsetCommit, OffsetFetch), transactional offsets
// (TxnOffsetCommit and the markers that end them), ListGroups,
// DescribeGroups, DeleteGroups and OffsetDelete, for the groups whose
// partition of __consumer_offsets this broker leads.
//
// # Ownership
//
// A group lives in partition PartitionFor(id) = abs(Java
// String.hashCode(id)) mod offsets.topic.num.partitions of
// __consumer_offsets, and is coordinated by that partition's leader.
// cmd/broker calls OnBecomeLeader(p, leaderEpoch) when the replica of
// partition p applied a LeaderAndIsr state making this broker leader, and
// OnBecomeFollower(p) when it applied one making it a follower or a
// StopReplica stopped it; a state or stop the replica refused as stale
// (an older leader epoch) calls neither. Becoming leader starts a
// load: the partition is read through Log.Read (ReplicaID -1, so bounded
// by the high watermark) from the log start up to the log end offset the
// replica had when it became leader; reading waits for the high watermark
// to get there, so everything loaded is committed and nothing acknowledged
// by the previous leader is missed. A batch that does not decode or
// inflate fails the load (as Kafka's): the loader retries it, backing off
// up to 1s, and never marks the partition loaded without it (the read
// loop is internal/coordlog's Load, shared with txn). Meanwhile
// requests for its groups answer ErrCoordinatorLoadInProgress. Resigning drops the partition's
// groups and answers their waiting requests ErrNotCoordinator; so does
// every request for a partition not led here. The coordinator does not
// create the topic: protocol's FindCoordinator does, through Admin.
//
// # State machine
//
// Groups are Empty, PreparingRebalance, CompletingRebalance, Stable or
// Dead (removed). A join of a new member, a known member with new
// protocols, or the leader, moves the group to PreparingRebalance; the
// join phase completes when every member has rejoined (and no KIP-394
// pending member id is outstanding) or at the rebalance deadline (the
// largest member rebalance timeout), removing members that did not
// rejoin. A group that was Empty waits group.initial.rebalance.delay.ms
// first, extended by the same delay while new members keep arriving, up
// to the rebalance timeout. Completion bumps the generation, picks the
// protocol most members prefer among those all support, and answers every
// JoinGroup (the leader with the members' metadata). The leader's
// SyncGroup writes the group metadata with the assignments; once it is
// replicated every waiting SyncGroup gets its assignment and the group is
// Stable. If the write fails the error is answered and the group
// rebalances again. Heartbeats answer REBALANCE_IN_PROGRESS during a
// rebalance; a member without a heartbeat for its session timeout is
// removed. Stale generations get ErrIllegalGeneration, unknown members
// ErrUnknownMemberID; static members (group.instance.id, KIP-345) rejoin
// under a new member id without a rebalance when the group is Stable and
// their protocols are unchanged, fencing the old id
// (ErrFencedInstanceID). A group that loses its last member gets a new
// generation, becomes Empty and that is written too. Deadlines are checked
// by Tick, which a background goroutine calls every TickInterval (tests
// call it with a fake clock).
//
// # Storage formats
//
// Everything is written to __consumer_offsets as Kafka 2.x writes it, with
// kmsg's OffsetCommitKey/Value and GroupMetadataKey/Value: offset commits
// under key version 1 (group, topic, partition) with value version 3
// (offset, leader epoch, metadata, commit timestamp), or 1 when the commit
// carried an explicit retention (expire timestamp); group metadata under
// key version 2 (group) with value version 3 (protocol type, generation,
// protocol, leader, state timestamp, members with group.instance.id,
// client id and host, timeouts, subscription and assignment). A null
// value is a tombstone, which compaction keeps for delete.retention.ms
// and then drops with every earlier record of its key: DeleteGroups
// writes one for each offset key of the group and for its metadata key,
// offset expiry for each expired offset and for the metadata key of an
// Empty group left without offsets (Kafka's cleanupGroupMetadata; a
// group that never had metadata written, generation 0, gets no metadata
// tombstone). Records go in one v2 batch per write (base offset 0, no
// producer id unless transactional, CRC32C), compressed with
// offsets.topic.compression.codec
// (none by default; loading reads every codec), encoded and read back by
// internal/coordlog (shared with txn; the offsets topic is read without
// its CRC check), through Log.Append with
// acks -1, and a commit or a
// SyncGroup is answered only after Log.WaitCommitted (bounded by
// offsets.commit.timeout.ms); only then do the offsets become visible to
// OffsetFetch. Each cached offset remembers the offset of its record in
// the log, so that of two commits of one partition whose replication
// completes out of order the one appended later stays, as in the log and
// after a reload (Kafka's appendedBatchOffset). Write failures map as Kafka's: too few replicas or an
// unknown partition -> ErrCoordinatorNotAvailable, not leader ->
// ErrNotCoordinator, too large -> ErrInvalidCommitOffsetSize, timeout ->
// ErrRequestTimedOut; any other partition error (a transactional batch's
// partition.ErrInvalidProducerEpoch, say) is returned as it is, as
// Kafka's maybeConvertOffsetCommitError passes it on. Loading applies records in offset order, the last
// one for a key winning; groups with members come back Stable in their
// stored generation (sessions restart at load time), so consumers keep
// heartbeating to the new coordinator without a rebalance.
//
// # Transactional offset commits
//
// CommitTxnOffsets (TxnOffsetCommit, Kafka's handleTxnCommitOffsets)
// creates a missing group Empty, checks the member, instance id and
// generation when the request names them (KIP-447, v3+; older requests
// name none and any state accepts them), and writes one transactional
// batch: the producer's id and epoch, base sequence -1, attribute 0x10,
// the offset records of a plain commit, through Log.AppendWith with
// partition.OriginCoordinator, acks -1 and the request's
// VerificationGuard. (Kafka writes base sequence 0; the sequence of a
// coordinator's batch is not checked, and loading reads either.) The
// guard is what protocol got from the partition and verified with the
// transaction coordinator (KIP-890, Kafka 3.6+'s
// maybeStartTransactionVerificationForPartition), so that a late or
// zombie TxnOffsetCommit of a transaction already ended is refused
// (INVALID_TXN_STATE, answered as it is) instead of staying pending with
// no marker to come; the log's refusal is a failed write like any other.
// From the append its offsets are
// pending for the producer (Kafka's pendingTransactionalOffsetCommits):
// FetchOffsets does not show them, and with requireStable (OffsetFetch
// v7+) answers UNSTABLE_OFFSET_COMMIT for their partitions, as for a
// plain commit still replicating. The call returns once the batch is
// replicated; a failed write answers its mapped error and forgets the
// offsets. protocol calls CompleteTxn(p, producerID, markerOffset,
// commit) once a marker appended at markerOffset is written and committed
// on partition p: COMMIT makes the producer's pending offsets of p's
// groups appended below the marker the committed ones, except for a
// partition whose cached offset comes from a later record in the log
// (Kafka's offset-order rule, so that the live cache, a reload and a
// compacted log agree); ABORT drops them. Pending offsets appended after
// the marker are the producer's next transaction and stay pending, so a
// completion that arrives late, or twice, does what the loader does at
// the marker. A CompleteTxn while p loads is kept (at most 100000; beyond
// that the oldest is dropped, with an error logged, and its offsets stay
// pending until the next load) and applied, in order and by the same
// rule, when the load installs: a marker appended after the load's end
// offset completes the loaded offsets below it, one the load also read
// finds nothing left below it. One for a partition not led here is
// ignored, its next leader's load reading the marker. The partition's
// index of the groups holding a producer's pending offsets loses a group
// once its offsets of the producer are gone.
//
// Loading keeps the offsets of a transactional batch pending for its
// producer and applies (COMMIT) or drops (ABORT, or any other control
// type, as Kafka) them at the producer's control batch (key: version
// int16, type int16); transactions without a marker yet stay pending until
// CompleteTxn. A tombstone of an offset key drops the committed offset and
// every pending one of the key, both live and when loading (Kafka's
// OffsetMetadataManager.replay), so what DeleteOffsets or DeleteGroups
// removed does not come back at a later COMMIT. Accordingly, as Kafka:
// expiry keeps an offset whose partition has a pending transactional
// offset, and a group holding any (it is not "without offsets");
// OffsetDelete of a partition with only a pending offset writes its
// tombstone, and a group still holding other pending offsets stays;
// DeleteGroups of an Empty group deletes it even with pending offsets,
// with a tombstone for every committed and every pending partition
// (Kafka's deleteAllOffsets); if that append fails, the group and all its
// offsets, pending ones included, stay in the cache as they stay in the
// log (as for OffsetDelete). Unloading a partition drops its pending
// offsets with its groups; the next load rebuilds them from the log.
//
// # Retention and compaction
//
// __consumer_offsets is compacted (protocol's FindCoordinator creates it
// with cleanup.policy=compact), so what a load reads follows the live
// groups and offsets, not the history of commits. Loading applies
// tombstones (a tombstoned offset or group is absent afterwards) and stops
// at the first read that finds nothing below a high watermark that has
// reached the end, since compaction may leave no record between the last
// batch and the log end offset; Log.Read must therefore return the next
// surviving batch for an offset inside a cleaned gap.
//
// Offsets expire as in Kafka 2.1+ (KIP-211, GroupMetadata.
// removeExpiredOffsets), offsets.retention.minutes after: the time an
// Empty group became empty, for all its offsets; the commit, for an
// offset of a group without protocol type (simple consumers); the commit,
// for an offset of a Stable "consumer" group on a topic no member
// subscribes to (ConsumerProtocol subscriptions, v0 prefix). Groups in
// other states or of other protocol types keep their offsets. An explicit
// retention (OffsetCommit v2-v4) replaces the rule's time with its expire
// timestamp, within those cases. An offset whose commit waits for
// replication is kept, and its group too. Expiry is one periodic task of
// the coordinator, run from Tick every offsets.retention.check.interval.ms
// (the first Tick runs it at once); its tombstones are written without
// anyone waiting, and a lost one is written again when the next
// coordinator of the partition expires the reloaded offsets.
//
// # Concurrency
//
// One mutex, Coordinator.mu, guards the partition states, every group and
// every member. Requests that wait (JoinGroup, a follower's SyncGroup)
// register a channel with room for one reply and wait on it without the
// lock, with their request's context, so they park only their own
// connection. Writes append under the lock (so records of a group are in
// the log in the order its state changed) and wait for replication
// without it, with the coordinator's context, so the outcome reaches the
// cache even if the client went away; a partition token recorded before
// the wait tells a late completion that the partition was unloaded or
// reloaded meanwhile. Loading runs in its own goroutine and takes the lock
// only to check it is still wanted and to install what it read. Close
// ends the loads and the background loop and answers every waiter.
//
// Lock order: Coordinator.mu -> (inside Log.Append) partition.Manager's
// and Replica's locks. The coordinator is never called with a partition
// lock held, and never holds Coordinator.mu while waiting on a channel or
// for replication.
package group
