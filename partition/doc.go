// Package partition holds this broker's replicas: one Replica per partition
// it is assigned, and the Manager that owns them and runs replication.
//
// A Replica knows its role (leader or follower), leader epoch, assigned
// replicas (AR), in-sync replicas (ISR), its own log end offset (LEO) and
// the high watermark (HW). Consumers read only below the HW and followers
// up to the LEO. acks=all waiters sit in a list ordered by the offset they
// need (hashicorp/raft's commitment): an HW advance completes exactly those
// it passes, and nothing else wakes them but a lost leadership or a close,
// which fail them all with ErrNotLeader, or a storage failure of the log
// (logstore.ErrStorage: an fsync failed) met by an append or DeleteRecords,
// which fails them, and every later wait the HW has not passed, with
// ErrStorage (KAFKA_STORAGE_ERROR); a failure met by the background flush
// or retention fails them at the next append. A wait for records appended in
// epoch E fails unless this broker has led without a break since E: a new
// epoch in which it stays leader (the controller removed a dead follower)
// keeps its waiters, as Kafka's DelayedProduce does, but once it has
// followed, a truncation may have removed the records.
//
// # Roles
//
// Manager.BecomeLeaderOrFollower (ApplyPartitionStates is a wrapper) is
// what a LeaderAndIsr request becomes. A state with an older leader epoch
// is ignored; the same epoch and leader only refresh AR, ISR and zkVersion.
// A new epoch naming this broker leader records (epoch, LEO) in the leader
// epoch cache (KAFKA-7415) as the epoch start offset and resets follower
// state (LEO unknown, lastCaughtUp = now for ISR members). Any other new
// epoch makes a follower: acks=all waiters fail with ErrNotLeader, and the
// partition leaves its old fetcher and joins the new leader's in the
// Truncating state, even when the leader did not change (KAFKA-7164).
// Leader -1 means no leader: the follower just stops fetching. Its result
// says per partition what was applied (Transition: the role and epoch now
// held, or nothing for a stale state), so that what follows the role (the
// group coordinator, in cmd/broker) follows the replica, not the request.
// StopReplica refuses a stop of an older leader epoch than the replica's
// (ErrFencedLeaderEpoch) and reports whether it stopped; StopReplicaBatch
// does one request's partitions, flushing and closing their logs with
// RecoveryThreadsPerDataDir goroutines per log dir.
//
// # Opening logs
//
// A LeaderAndIsr of 10,000 partitions costs per partition only what the
// log itself needs: BecomeLeaderOrFollower first places an opening
// placeholder for every partition without a replica, then opens those
// logs with Config.RecoveryThreadsPerDataDir (num.recovery.threads.per.data.dir)
// goroutines per log dir, which end with the call, then applies the
// states in request order; an open that fails fails its partition alone,
// and the call logs one line at Info (each partition's at Debug). A new
// partition goes to the log dir holding the fewest partition directories,
// counted from one listing per log dir at NewManager and kept up to date
// by creations, failed opens and deletions (dirLayout), never by listing
// again; a partition already on disk opens where it is. Every log shares
// Config.Files, the broker's bounded cache of open .log descriptors.
//
// Clean shutdown: Close flushes, snapshots (producer state) and closes
// every log, one job per log run by RecoveryThreadsPerDataDir goroutines
// per log dir (Kafka's LogManager.shutdown; an idle log costs no fsync and
// no new snapshot), then writes the offset checkpoints once and Kafka's
// marker .kafka_cleanshutdown (CleanShutdownFile) in each log
// dir whose logs all closed and whose checkpoints were written. NewManager
// reads and deletes each marker (fsyncing the dir) before any log opens;
// the first open of each log of such a dir passes logstore's
// CleanShutdown, which trusts the recovery point and the index files and
// reads no segment data. Without it a log is recovered from its recovery
// point. An empty log with no producer state gets no producer snapshot.
//
// # Fetchers
//
// One fetcher per source leader broker replicates every partition followed
// there; its goroutine runs from Manager.Start until the fetcher has no
// partitions or the Manager closes, and every wait selects on its stop
// channel. A round (1) truncates Truncating partitions with
// OffsetsForLeaderEpoch for the follower's latest epoch, with KIP-279's
// iteration: when the leader answers an epoch the follower lacks, truncate
// to the end of the follower's own largest epoch below it and ask again;
// otherwise truncate to min(leader end, own end of that epoch, LEO). Only a
// log with no epochs, or an answer of -1, truncates to the HW. (2) sends
// one Fetch (replica id = own id, fetch offset = LEO, the current leader
// epoch) for all fetching partitions, (3) appends the batches unchanged,
// takes HW = min(leader HW, LEO), and restarts the log at the leader's log
// start if that passed our LEO (logstore cannot raise a log start in
// place). Offset out of range follows Kafka's fetchOffsetAndTruncate
// (§4.4): the leader's LEO comes from OffsetsForLeaderEpoch of its current
// epoch; below our fetch offset, truncate to it; else ask the leader for
// its log start (ListOffsets EARLIEST as a replica, through
// EarliestOffsetLister, since an errored Fetch partition carries log start
// -1 on the wire) and, if it is past our LEO, empty the log and restart it
// there. Fenced epochs park the partition until a new state; other errors
// back off ReplicaFetchBackoff. Responses are applied only if the replica
// still follows in the same epoch at the same LEO. A partition the response
// leaves out (an incremental fetch session, KIP-227, answers only those with
// records, errors or new offsets) has nothing new: no records, no error,
// and the leader's HW and log start as last answered. On the leader side,
// such a session reads every partition with Read (recording the follower's
// fetch) and, while it long-polls, asks Manager.PeekFetch (one replica
// lock, no log read, nothing recorded) which partitions changed.
//
// Wake-ups of long-polling fetches (Manager.Changed) are batched: appends
// with AppendOptions.Wakes collect theirs and Manager.Wake sends them once
// (protocol's Produce, after its last append, as Kafka's ActionQueue
// completes delayed fetches after the whole request), and a fetcher sends
// one for every partition of a response it applied. A replica's own state
// channel still closes at each change.
//
// # ISR and HW
//
// A leader keeps, per follower, the fetch offset (its LEO), the leader LEO
// at its previous fetch and the last time it was caught up (§3.1). An ISR
// follower is out of sync when its LEO differs from the leader's and it has
// not caught up for longer than ReplicaLagTimeMax: time, not record count
// (MaybeShrinkIsr, every ReplicaLagTimeMax/2). A follower outside the ISR
// whose fetch reaches the HW and the epoch start offset is added back. Both
// changes are conditional writes through StateWriter with the cached
// zkVersion and controller epoch, one in flight per partition, never under
// Replica.mu; on success the ISR and zkVersion change, the HW may advance
// and NotifyIsrChange is called. On ErrStateConflict Kafka's ZK-era
// leader logs "Cached zkVersion not equal to that in zookeeper, skip
// updating ISR" and stays stuck until the controller sends a new state,
// which it does only on a leader change or a broker's death (KAFKA-2729).
// Here, when the StateWriter read the state back (*StateConflictError) and
// it has this broker as leader in its current leader epoch, the leader
// adopts its ISR and zkVersion: the controller bumps the leader epoch on
// every state it writes, so within an epoch only its leader writes, and
// the stored state is an earlier write of ours whose reply was lost. That
// clears the maximal ISR (every failed write was conditional on the older
// zkVersion and can no longer land), and the change is proposed again on
// the next pass or fetch; without that, a member added by such a write and
// then stuck (alive) would hold the HW for ever. Any other conflict keeps
// the old ISR until the controller sends a new state. (A topic deleted and
// recreated under the same name restarts at leader epoch 0, as it can
// restart at zkVersion 0: a replica of the old topic that missed its
// deletion could take the new state for its own either way, as in Kafka
// before topic ids.) An expansion is written on its
// own goroutine, so the follower's fetch answers at once; ISR expiration
// runs on its own goroutine too, apart from the flush, retention and
// checkpoint loop, and writes its shrinks concurrently (at most
// maxConcurrentShrinks at once), so that a ZooKeeper outage, where each
// write may wait isrWriteTimeout, stalls neither. Without a StateWriter the
// ISR never changes. The HW is the minimum LEO over the leader, the maximal
// ISR and the followers caught up within the lag time (Kafka 2.4+), and
// never moves backwards on a leader. The maximal ISR (AlterIsr's) is the
// ISR plus the members of a write in flight, and of every write that failed
// since (a conflict, or an outcome the StateWriter could not resolve): such
// a write may have landed, putting its members in the znode ISR where the
// controller may elect them. It is the ISR again after a successful write
// (which proves the failed ones, based on the same zkVersion, did not land),
// an adopted stored state, or a newer state from the controller; so that a member of a write that
// did not land cannot hold the HW for ever, the expiration pass writes the
// ISR (changed or not) once such a member is out of sync. The HW is
// checkpointed for leaders and followers alike
// (replication-offset-checkpoint) and restored on open.
//
// # Checkpoints
//
// Every log dir has replication-offset-checkpoint (HW),
// recovery-point-offset-checkpoint and log-start-offset-checkpoint. Each
// write covers every partition with a log in the dir: open replicas with
// their live values, and partitions without an open replica (not yet
// opened since the start, or stopped without delete) with the values read
// at start or taken when they were stopped, as Kafka's LogManager keeps
// the logs of stopped replicas. Only a deletion (StopReplicas with
// remove) drops a partition's entries.
//
// Idempotent producers: per producer id the replica keeps the producer
// epoch and the last five batches' sequence ranges with their offsets, so a
// retried batch is answered with its original offsets and not appended
// again, and a gap is refused with ErrOutOfOrderSequence. The state is
// rebuilt from the newest producer snapshot (<offset>.snapshot, version 2;
// version 1, from before transactions, is still read) and the log's
// batches after it when a replica is opened, or truncated at or below a
// batch, transaction start or marker it remembers. An open uses only a
// snapshot at or below the checkpointed recovery point (an unclean
// shutdown may have lost .txnindex entries above it, which the replay adds
// again, as Kafka's recovery does), so besides the newest two the newest
// snapshot at or below the last checkpointed recovery point (where such an
// open starts) and the newest at or below the log's own (which the next
// checkpoint writes) are kept.
//
// # Transactions
//
// Per producer the replica also keeps, as Kafka's ProducerStateManager,
// its coordinator epoch (from its last marker), last timestamp, the first
// offset of its ongoing transaction and the offset of its last marker;
// and, ordered by first offset, the ongoing transactions and the completed
// ones whose marker the HW has not passed (Kafka's unreplicated
// transactions). The last stable offset is min(first offset of either
// kind, HW), no lower than the log start: a marker could still be
// truncated away until the HW passes it. Every read reports it; a
// consumer's read_committed read (ReadRequest.IsolationLevel 1) stops
// before it and lists the aborted transactions overlapping the batches it
// returns (Log.CollectAbortedTxns, up to the end of the last batch); a
// read_committed consumer's ListOffsets (AskerCommittedConsumer) is
// bounded by it; the cleaner cleans only below it. The LSO moves only with
// the HW, the log start or a marker, and a move wakes consumers' long
// polls (Changed(false)) even when the HW stayed: a marker's, a
// DeleteRecords', or retention's deleting the segment where an open
// transaction began (the LSO then is the new log start).
//
// Append rules (appendAsLeader, Kafka's analyzeAndValidateProducerState):
// a client's retry is answered first; then, with Config.TxnVerification
// (transaction.partition.verification.enable, zero value off), a
// transactional batch of a producer with no ongoing transaction (a
// client's, or the group coordinator's TxnOffsetCommit write) needs
// AppendOptions.VerificationGuard equal to the guard
// TxnVerificationGuard stored for it (KIP-890 part 1; ErrInvalidTxnState
// otherwise); then the epoch and sequence checks (only the epoch for
// OriginCoordinator, the group coordinator's writes with sequence -1);
// then a non-transactional batch of a producer inside a transaction is
// ErrInvalidTxnState. The first transactional batch starts the
// producer's transaction at its base offset. Guards are numbered across
// the process, handed out again while unused (the concurrent first
// requests of a transaction share one), cleared by any transactional batch
// or marker of the producer, and dropped after guardExpiry unused. With
// verification off TxnVerificationGuard answers (0, false) and keeps
// nothing.
//
// WriteTxnMarker checks leadership, min.insync.replicas, the producer
// epoch (ErrInvalidProducerEpoch below the producer's) and the
// coordinator epoch (ErrTransactionCoordinatorFenced below the last seen
// for the producer), appends one control batch built by
// logstore.BuildControlBatch, and ends the producer's transaction: an
// ABORT adds it to the log's .txnindex (Log.AppendAbortedTxn) with the LSO
// it leaves (the oldest other ongoing transaction's start, else the offset
// after the marker); the transaction then waits for the HW as an
// unreplicated one. Followers apply the same state from the
// batches they replicate, reading each control batch's marker from the
// fetched bytes (no checks: the leader made them), and so does the replay
// of the log at open, which adds the aborted-index entries again (the log
// ignores those it has, per segment, and puts back those an unclean
// shutdown lost, even below entries of later segments that survived).
//
// If the index write fails (the .txnindex cannot be created, written or
// fsynced: EISDIR, ENOSPC, EMFILE, EIO), the marker is in the log and its
// entry is not. As in Kafka, where any I/O error of the log takes its
// directory offline, logstore then fails the log (ErrStorage) and the
// replica sets storageErr: the transaction stays ongoing in memory, so the
// LSO does not pass it and read_committed never sees its batches without
// the entry; appends, markers, DeleteRecords, truncations and producer
// snapshots are refused with ErrStorage (KAFKA_STORAGE_ERROR), so the
// false state is never saved; a follower appends a fetch a piece at a
// time, each ending at a control batch, so it stops at the marker and
// nothing after it enters the log, and its fetcher parks the partition.
// The failure also takes the replica's log dir offline (see Log dirs
// below), or with EMFILE or ENFILE fails this replica alone, which then
// answers ErrStorage to appends, reads and LeaderAndIsr states: either
// way the replica serves nothing more until the broker restarts;
// the open then replays the marker from the last snapshot and writes the
// entry. The snapshot (version 2) keeps each producer's
// transaction fields and the unreplicated transactions. A truncation that
// reaches any of it rebuilds it from the snapshot and log below the new
// end (logstore drops the index entries of the markers it removed); a log
// emptied (TruncateFullyAndStartAt) forgets it.
//
// Produced batches are checked record by record as Kafka's LogValidator
// does: framing, and the topic's per-record rules. A topic whose
// cleanup.policy includes compact refuses records without a key
// (ErrInvalidRecord); a CreateTime topic refuses records whose timestamp
// is farther from the clock than message.timestamp.before/after.max.ms
// (or message.timestamp.difference.max.ms) allow (ErrInvalidTimestamp).
// Either refuses the whole batch with a *RecordValidationError listing
// every record at fault. Time and size retention apply only when
// cleanup.policy includes delete.
//
// # Log cleaner
//
// The cleaner (cleaner.go) is Kafka's LogCleaner with its
// LogCleanerManager, over logstore's one-pass Log.Clean. With
// log.cleaner.enable, Start runs log.cleaner.threads goroutines through
// goFunc; each allocates, at its first pass, one offset map of
// log.cleaner.dedupe.buffer.size / threads, reused pass after pass, and all share one RateThrottler of
// log.cleaner.io.max.bytes.per.second. A thread repeatedly picks the
// dirtiest log (Kafka's grabFilthiestCompactedLog): among open replicas,
// leaders and followers alike, whose cleanup.policy includes compact and
// that are not being cleaned, paused or uncleanable, the one with the
// largest dirty ratio above min.cleanable.dirty.ratio, or whose first
// dirty batch is older than max.compaction.lag.ms, and whose cleanable
// range is not empty. It cleans it below the replica's LSO (min(HW, first
// unstable offset), as Kafka) with the topic's min.compaction.lag.ms and
// delete.retention.ms (segment.bytes is the log's own), and with nothing
// cleanable sleeps
// log.cleaner.backoff.ms, waking on Close. A pass that cleaned something,
// or filled its map, is followed at once by another scan. ErrCleanAborted
// (a truncation, retention or a close under the pass) is retried at a
// later scan; any other failure marks the partition uncleanable until it
// is deleted or the broker restarts. A panic kills its thread, counted in
// DeadThreadCount, and the others go on. The cleaner position per
// partition (the first dirty offset) is in cleaner-offset-checkpoint in
// each log dir: read by NewManager (entries without a partition directory
// dropped), written after each pass and by Close, the entry removed when
// the partition is deleted; with the cleaner disabled it is not written.
// A follower's truncation lowers the checkpoint to the truncation point
// (Kafka's maybeTruncateCheckpoint), so records appended again there
// count as dirty: the replica notes it (an atomic), and the cleaner takes
// it into its own state, keyed by partition, at the next scan, at
// StopReplica, or when a pass of the partition ends; a truncation during
// a pass caps that pass's checkpoint at the truncation point, whichever
// thread saw it. StopReplica pauses the partition's cleaning, aborts a
// pass in progress (Kafka's abortAndPauseCleaning: CleanConfig.Abort, seen
// at the pass's next batch or throttle wait) and waits for it to end,
// before it closes or deletes the log; Close likewise aborts the threads'
// passes and waits for them.
// Fetch and the HW do not depend on the cleaner: a cleaned log is read as
// any other (logstore returns the next surviving batch inside a gap).
//
// ListOffsets for a timestamp answers, as Kafka's
// LogSegment.findOffsetByTimestamp, the first record at or above the log
// start whose timestamp reaches it, found from the first batch whose max
// timestamp does (logstore's time index) by walking its records,
// inflating compressed ones; the walk runs without Replica.mu.
//
// # Log dirs
//
// An I/O error on a log dir takes the whole dir offline, as Kafka's
// LogDirFailureChannel (logdir.go): any error of a write to a log (append,
// roll, flush, truncation, retention, DeleteRecords, a follower's append
// or truncation, a producer snapshot, a log open or delete) that is not a
// refusal of the request (corrupt or invalid input, offsets, a closed log)
// or a shortage of descriptors (EMFILE, ENFILE: unlike Kafka), and any
// failed checkpoint write of the dir. The first error of a dir marks it
// offline; a goroutine started for it (ReplicaManager.handleLogDirFailure)
// takes the dir's replicas out of the replica map and out of their
// fetchers, fails their acks=all waiters with ErrStorage and closes their
// logs without flushing (Kafka's closeHandlers). They stay known as
// offline partitions: Append, Read, ListOffset, OffsetForLeaderEpoch,
// DeleteRecords and a LeaderAndIsr state for them answer ErrStorage
// (KAFKA_STORAGE_ERROR), which is how the controller learns which replicas
// are offline. No checkpoint of the dir is written again, and new
// partitions go to the online dirs only: as Kafka's getOrCreateLog, a
// state not new (PartitionState.IsNew, LeaderAndIsr's is_new) for a log
// not found on an online dir answers ErrStorage while a dir is offline,
// and a partition whose directory an offline dir holds, or cannot tell
// it does not (stat failed with other than ENOENT), is offline: a failed
// disk must not turn an acknowledged log into an empty one. Then the
// handler set with SetLogDirFailureHandler gets a LogDirFailure (dir,
// error, partitions, dirs still online): cmd/broker writes the log dir
// event notification and, with no dir online, stops the broker.
// DescribeLogDirs reports an offline dir with its error and no replicas.
// A dir stays offline until the process restarts.
//
// A shortage of descriptors fails only the log that met it, for good as
// any storage failure (logstore takes no more writes): that replica
// answers ErrStorage to appends, reads and LeaderAndIsr states, so the
// controller takes it offline and moves its leadership, and the handler
// is told with ReplicaOnly, which notifies the controller as for a dir.
//
// Partition knows nothing of sockets, ZooKeeper or the wire format: it is
// told partition states (PartitionState), reaches leaders through
// LeaderClient and publishes ISR changes through StateWriter.
//
// # Concurrency
//
// Manager.mu guards the replica map, the saved checkpoint entries and the
// opening placeholders. It is never held while a log opens (recovery,
// fsync) or closes: getOrOpen places a placeholder, opens the log without
// the lock and then installs the replica, so lookups of other partitions
// (Append, Read, Fetch) go on meanwhile; a second open of the same
// partition, StopReplicas and Close wait for the placeholder's open to
// finish.
//
// Replica.mu guards role, epochs, ISR and maximal ISR, HW, LEO, follower
// state, producer and transaction state, verification guards and the
// acks=all waiter list. A waiter's outcome
// is sent under Replica.mu on its own buffered channel (capacity 1, one
// send per wait), so completing waiters never blocks; a waiter whose
// context ends takes itself off the list under Replica.mu, or else
// receives the outcome already sent. A leader holds Replica.mu while
// checking leadership and producer sequences, assigning offsets and
// appending (the batch's record walk runs before, without it), a follower
// while truncating and appending, and neither across a network call or a
// StateWriter write. Manager.fetchMu guards the fetcher map; fetcher.mu
// guards one fetcher's partitions and is never held while calling into a
// Replica. Manager.checkpointMu serializes the checkpoint writes (the
// background loop, DeleteRecords, Close) and is held while they take
// Manager.mu and each Replica.mu. cleaner.mu guards the cleaner's
// checkpoints, the partitions being cleaned or paused, the uncleanable set
// and the figures; it is held briefly, takes Manager.mu (read) to check
// that a replica is still the open one, and is never held while calling
// into a Replica or a Log: a thread reads a replica's config and HW under
// Replica.mu, then calls Log.Cleanable and Log.Clean holding no partition
// lock (Log.Clean takes the log's own cmu, then wmu, fmu and mu only to
// swap segments in, so appends under Replica.mu wait at most for a swap).
// cleaner.fileMu serializes the cleaner-offset-checkpoint writes. Lock
// order:
//
//	Manager.checkpointMu -> Manager.mu -> Replica.mu -> logstore.Log
//	cleaner.fileMu -> cleaner.mu -> Manager.mu
//	Manager.fetchMu -> fetcher.mu
//
// (logstore.Log: its internal locks.) dirLayout.mu (taken under
// Manager.mu by BecomeLeaderOrFollower), Manager.cleanMu,
// Manager.changedMu, Manager.goMu and
// the replication quotas' mutexes (throttle.go, taken on the fetch paths
// outside any Replica.mu) are leaf locks.
package partition
