package partition

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/logstore"
)

// followerState is what a leader knows of one follower, from its fetches.
type followerState struct {
	logEndOffset             int64 // the follower's fetch offset; -1 when unknown
	logStartOffset           int64 // the follower's log start offset; -1 when unknown
	lastFetchLeaderEndOffset int64
	lastFetchTime            time.Time
	lastCaughtUpTime         time.Time
}

// Replica is this broker's replica of one partition.
type Replica struct {
	tp       cluster.TopicPartition
	dir      string // the partition directory, <log.dir>/<topic>-<partition>
	brokerID int32
	log      *logstore.Log
	logger   zerolog.Logger
	notify   func(wake) // tells the Manager that HW or LEO moved
	// lagTimeMax is replica.lag.time.max.ms; isrWritable is false when
	// the Manager has no StateWriter, so the ISR never changes locally.
	lagTimeMax  time.Duration
	isrWritable bool
	// timestampWalkHook, when set by a test, runs in offsetForTimestamp
	// once the time index has answered, before the records are read.
	timestampWalkHook func()
	// cleanTruncatedTo is the lowest offset the log was truncated to since
	// the cleaner last looked (MaxInt64: none); the cleaner lowers its
	// checkpoint to it, as Kafka's maybeTruncateCheckpoint.
	cleanTruncatedTo atomic.Int64
	// checkpointedRP is the recovery point as last written to
	// recovery-point-offset-checkpoint (at open, the one read from it):
	// what an open after a crash would start from.
	checkpointedRP atomic.Int64

	mu       sync.Mutex
	cfg      cluster.LogConfig
	replicas []int32
	// adding and removing are the reassignment's, as the last applied
	// state had them (PartitionState.AddingReplicas, RemovingReplicas).
	adding, removing       []int32
	leader                 int32
	leaderEpoch            int32
	leaderEpochStartOffset int64
	// leaderSinceEpoch is the first leader epoch of this broker's current
	// unbroken leadership (set when it becomes leader after not leading).
	// Records appended in an earlier epoch may have been truncated while
	// it followed, so their acks=all waits fail; records of a later epoch
	// of the same run were never at risk.
	leaderSinceEpoch int32
	isr              []int32
	zkVersion        int32
	controllerEpoch  int32
	hw               int64
	followers        map[int32]*followerState
	producers        map[int64]*producerState
	// ongoingTxns are the transactions without a marker yet, and
	// unreplicatedTxns those whose marker the HW has not passed, both
	// ordered by first offset (Kafka's ongoingTxns and unreplicatedTxns):
	// together they hold the LSO back (lsoLocked).
	ongoingTxns, unreplicatedTxns []txnMeta
	// guards are the verification guards handed out to producers with no
	// ongoing transaction (KIP-890); txnVerification is
	// transaction.partition.verification.enable.
	guards          map[int64]guardEntry
	txnVerification bool
	// lsoSignalled is the LSO as of the last wake of consumers, so that a
	// move of the LSO alone wakes read_committed fetches too.
	lsoSignalled int64
	// isrChangeInFlight is set while an ISR write is outstanding: one
	// change at a time per partition, as Kafka does.
	isrChangeInFlight bool
	// maximalIsr, when not nil, is the ISR the HW is computed over: the
	// ISR plus every member of an ISR write in flight or of one whose
	// write failed since the last state (AlterIsr's maximal ISR). Such a
	// write may have landed, its new members be in the znode ISR and be
	// elected, so the HW must not pass what they hold. It is cleared by a
	// successful write (which proves the failed ones, based on the same
	// zkVersion, did not land) and by a newer state from the controller.
	maximalIsr []int32
	// waiters are the acks=all waits, ordered by the offset they need
	// (hashicorp/raft's commitment): an HW advance completes exactly
	// those it passes, a lost leadership or close fails them all.
	waiters []*commitWaiter
	// storageErr is set once the log failed with logstore.ErrStorage
	// (an fsync or an aborted-index write failed): no later write can
	// succeed, so acks=all waits not yet passed by the HW end with it
	// (logFailedLocked), and appends, markers, follower appends,
	// truncations, DeleteRecords, producer snapshots, reads and partition
	// states (LeaderAndIsr) are refused with it until the broker restarts
	// (the producer state may not match the log).
	storageErr error
	// ioFailed, set by the Manager, takes the replica's log dir offline
	// (Manager.maybeAddOfflineLogDir); logFailedLocked calls it.
	ioFailed func(error)
	// fs is the file system of the log (nil: the OS's), kept across
	// config changes.
	fs logstore.FS
	// waiterWakeups counts waiters completed or failed, for tests.
	waiterWakeups uint64
	// stateCh is closed and replaced whenever the HW, the ISR or the role
	// changes, waking DeleteRecords waits for the low watermark.
	stateCh chan struct{}
	closed  bool
	// leaderHW is, on a follower, the HW of the leader's last fetch
	// response in this epoch (-1 before one), for the fetcher lag metric.
	leaderHW int64
	// leaderThrottled and followerThrottled say whether the topic's
	// leader.replication.throttled.replicas and
	// follower.replication.throttled.replicas name this replica
	// (setThrottlesLocked, whenever cfg is set).
	leaderThrottled, followerThrottled bool
}

// logstoreConfig is the log's part of a topic config. Time and size
// retention apply only when cleanup.policy includes delete, as in Kafka's
// UnifiedLog.deleteOldSegments: a compact-only log keeps its segments for
// the cleaner.
func logstoreConfig(c cluster.LogConfig, log zerolog.Logger) logstore.Config {
	if !c.Delete {
		c.RetentionMs, c.RetentionBytes = -1, -1
	}
	return logstore.Config{
		SegmentBytes:       c.SegmentBytes,
		SegmentMs:          c.SegmentMs,
		IndexIntervalBytes: c.IndexIntervalBytes,
		RetentionMs:        c.RetentionMs,
		RetentionBytes:     c.RetentionBytes,
		FlushMessages:      c.FlushMessages,
		FlushMs:            c.FlushMs,
		Log:                log,
	}
}

// openReplica opens the log in dir and restores the log start offset and
// the HW from their checkpoints (the HW never above the LEO) and the
// producer state from the log.
// The log opens with base's Files, FS and CleanShutdown.
func openReplica(tp cluster.TopicPartition, dir string, brokerID int32, cfg cluster.LogConfig, base logstore.Config,
	hwCheckpoint, recoveryPoint, logStartCheckpoint int64, logger zerolog.Logger, notify func(wake)) (*Replica, error) {
	logger = logger.With().Str("topic", tp.Topic).Int32("partition", tp.Partition).Logger()
	lc := logstoreConfig(cfg, logger)
	lc.Files, lc.FS, lc.CleanShutdown = base.Files, base.FS, base.CleanShutdown
	l, err := logstore.Open(dir, lc, recoveryPoint)
	if err != nil {
		return nil, fmt.Errorf("open log %s: %w", dir, err)
	}
	// A start moved by DeleteRecords inside a segment is known only from
	// the checkpoint (Kafka's log-start-offset-checkpoint).
	if logStartCheckpoint > l.LogStartOffset() && logStartCheckpoint <= l.LogEndOffset() {
		if _, err := l.IncrementLogStartOffset(logStartCheckpoint); err != nil {
			_ = l.Close()
			return nil, fmt.Errorf("open log %s at log start %d: %w", dir, logStartCheckpoint, err)
		}
	}
	r := &Replica{
		tp: tp, dir: dir, brokerID: brokerID, log: l, logger: logger, notify: notify, fs: base.FS,
		cfg: cfg, leader: cluster.NoLeader, leaderEpoch: -1, zkVersion: -1, leaderHW: -1,
		followers: map[int32]*followerState{},
		producers: map[int64]*producerState{},
		guards:    map[int64]guardEntry{},
		stateCh:   make(chan struct{}),
	}
	r.setThrottlesLocked()
	r.cleanTruncatedTo.Store(math.MaxInt64)
	r.checkpointedRP.Store(recoveryPoint)
	r.hw = min(max(hwCheckpoint, l.LogStartOffset()), l.LogEndOffset())
	// After an unclean shutdown (the checkpointed recovery point below
	// the LEO) a snapshot above the recovery point may describe markers
	// whose .txnindex entries, not yet fsynced, were lost: start from one
	// at or below it, as Kafka's recovery reloads the producer state from
	// a snapshot below the first unflushed segment, and replay the rest.
	if err := r.rebuildProducerState(min(max(recoveryPoint, 0), l.LogEndOffset())); err != nil {
		_ = l.Close()
		return nil, err
	}
	r.lsoSignalled = r.lsoLocked()
	return r, nil
}

// rebuildProducerState restores the producers' sequence history and
// transactions: from the newest producer snapshot at or below upTo and the
// LEO, then the batches of the log after it (the whole log without a
// snapshot), replaying the markers there (an ABORT's aborted-index entry
// is added again, which the log ignores when it has it already).
func (r *Replica) rebuildProducerState(upTo int64) error {
	off := r.loadProducerSnapshot(upTo)
	end := r.log.LogEndOffset()
	for off < end {
		data, err := r.log.Read(off, 4<<20, end)
		if err != nil {
			return fmt.Errorf("rebuild producer state of %s at %d: %w", r.tp, off, err)
		}
		if len(data) == 0 {
			break
		}
		err = forEachBatch(data, func(h logstore.BatchHeader, raw []byte) error {
			if h.IsControl() {
				if err := r.recordControlLocked(h, raw); err != nil {
					return err
				}
			} else {
				r.recordProducerLocked(h)
			}
			off = h.LastOffset() + 1
			return nil
		})
		if err != nil {
			return fmt.Errorf("rebuild producer state of %s at %d: %w", r.tp, off, err)
		}
	}
	return nil
}

// signalLocked wakes stateCh waits and every long-polling fetch.
// Caller holds r.mu.
func (r *Replica) signalLocked() { r.signalToLocked(wakeAll) }

// signalToLocked wakes stateCh waits and the long-polling fetches w
// names: a leader's LEO moving alone is news to followers only, its HW
// moving alone to consumers only. Caller holds r.mu.
func (r *Replica) signalToLocked(w wake) {
	w = r.signalDeferredLocked(w)
	if r.notify != nil {
		r.notify(w)
	}
}

// signalDeferredLocked is signalToLocked without the Manager's wake of the
// long-polling fetches, which it returns for the caller to pass on: a
// LeaderAndIsr applying thousands of states wakes them once, not once per
// partition. Caller holds r.mu.
func (r *Replica) signalDeferredLocked(w wake) wake {
	if lso := r.lsoLocked(); lso != r.lsoSignalled {
		// read_committed fetches wait for the LSO, which can move
		// without the HW (a marker's transaction ends below it).
		r.lsoSignalled = lso
		w |= wakeConsumers
	}
	close(r.stateCh)
	r.stateCh = make(chan struct{})
	return w
}

// wake says which long-polling fetches a change concerns.
type wake uint8

const (
	wakeFollowers wake = 1 << iota // new records below the LEO
	wakeConsumers                  // new records below the HW
	wakeAll       = wakeFollowers | wakeConsumers
)

// roleChange tells the Manager what applyState did, so it can move the
// partition between fetchers.
type roleChange struct {
	applied     bool // false: the state was older and ignored
	newEpoch    bool // the leader or leader epoch changed
	leader      int32
	leaderEpoch int32
	// wake is the long-polling fetches the change concerns, which the
	// caller wakes (Manager.notifyChanged) once for all its states.
	wake wake
}

// applyState makes the replica leader or follower as st says. A state with
// an older leader epoch than the one held is ignored; the same epoch with
// the same leader only refreshes the assignment, ISR and zkVersion (never
// to an older zkVersion).
func (r *Replica) applyState(st PartitionState, now time.Time) (roleChange, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return roleChange{}, fmt.Errorf("apply state to %s: replica closed", r.tp)
	}
	if err := r.storageErr; err != nil {
		// KAFKA_STORAGE_ERROR: the controller takes the replica offline.
		return roleChange{}, fmt.Errorf("apply state to %s: %w", r.tp, err)
	}
	lai := st.LeaderAndIsr
	if lai.LeaderEpoch < r.leaderEpoch {
		r.logger.Warn().Int32("leader_epoch", lai.LeaderEpoch).Int32("current_leader_epoch", r.leaderEpoch).
			Msg("ignoring partition state with an older leader epoch")
		return roleChange{}, nil
	}
	newEpoch := lai.LeaderEpoch != r.leaderEpoch || lai.Leader != r.leader
	if !newEpoch && lai.ZkVersion < r.zkVersion {
		r.logger.Warn().Int32("zk_version", lai.ZkVersion).Int32("current_zk_version", r.zkVersion).
			Msg("ignoring partition state with an older zkVersion")
		return roleChange{}, nil
	}
	if newEpoch || lai.ZkVersion > r.zkVersion {
		// The controller wrote this state after any write of ours that
		// landed (a conditional write cannot land after it), so it is
		// what the znode holds now.
		r.maximalIsr = nil
	}
	if st.Config != r.cfg {
		r.cfg = st.Config
		r.log.SetConfig(logstoreConfig(st.Config, r.logger))
		r.setThrottlesLocked()
	}
	r.replicas = slices.Clone(st.Replicas)
	r.adding, r.removing = slices.Clone(st.AddingReplicas), slices.Clone(st.RemovingReplicas)
	r.isr = slices.Clone(lai.Isr)
	r.zkVersion = lai.ZkVersion
	r.controllerEpoch = lai.ControllerEpoch
	if !newEpoch {
		r.maybeIncrementHWLocked(now)
		return roleChange{applied: true, leader: r.leader, leaderEpoch: r.leaderEpoch, wake: r.signalDeferredLocked(wakeAll)}, nil
	}
	wasLeader := r.leader == r.brokerID
	r.leader = lai.Leader
	r.leaderEpoch = lai.LeaderEpoch
	r.leaderHW = -1
	if lai.Leader == r.brokerID {
		// A new epoch of a leader that stays leader (the controller
		// removed a dead follower) keeps its acks=all waiters, as Kafka's
		// DelayedProduce does: its log was never truncated meanwhile.
		if !wasLeader {
			r.leaderSinceEpoch = lai.LeaderEpoch
		}
		r.makeLeaderLocked(now)
	} else {
		// A follower keeps no follower state and fails its acks=all
		// waiters: once it truncates, the HW would speak of other
		// records. The Manager moves the partition to the new leader's
		// fetcher in the Truncating state.
		r.followers = map[int32]*followerState{}
		r.hw = min(r.hw, r.log.LogEndOffset())
		r.failWaitersLocked(ErrNotLeader)
	}
	// Debug: a LeaderAndIsr of many partitions logs one Info line
	// (BecomeLeaderOrFollower), not one per partition.
	r.logger.Debug().Int32("leader", r.leader).Int32("leader_epoch", r.leaderEpoch).
		Ints32("isr", r.isr).Int32("zk_version", r.zkVersion).Int64("hw", r.hw).
		Int64("leo", r.log.LogEndOffset()).Msg("partition state applied")
	return roleChange{applied: true, newEpoch: true, leader: r.leader, leaderEpoch: r.leaderEpoch, wake: r.signalDeferredLocked(wakeAll)}, nil
}

// makeLeaderLocked records the new epoch at the LEO and resets follower
// state. Caller holds r.mu.
func (r *Replica) makeLeaderLocked(now time.Time) {
	leo := r.log.LogEndOffset()
	r.leaderEpochStartOffset = leo
	if err := r.log.LeaderEpochs().Assign(r.leaderEpoch, leo); err != nil {
		r.logger.Error().Err(err).Int32("leader_epoch", r.leaderEpoch).Msg("record leader epoch")
	}
	r.followers = map[int32]*followerState{}
	for _, id := range r.replicas {
		if id == r.brokerID {
			continue
		}
		f := &followerState{logEndOffset: -1, logStartOffset: -1, lastFetchLeaderEndOffset: leo, lastFetchTime: now}
		if slices.Contains(r.isr, id) {
			f.lastCaughtUpTime = now
		}
		r.followers[id] = f
	}
	r.maybeIncrementHWLocked(now)
}

// isLeaderLocked reports whether this replica leads. Caller holds r.mu.
func (r *Replica) isLeaderLocked() bool { return r.leader == r.brokerID && !r.closed }

// maybeIncrementHWLocked moves the HW forward to highWatermarkCandidate
// (Kafka 2.4+ rule, §3.5). Caller holds r.mu.
func (r *Replica) maybeIncrementHWLocked(now time.Time) bool {
	if !r.isLeaderLocked() {
		return false
	}
	candidate := highWatermarkCandidate(r.log.LogEndOffset(), r.brokerID, r.hwIsrLocked(), r.followers, now, r.lagTimeMax)
	if candidate <= r.hw {
		return false
	}
	r.hw = candidate
	r.completeWaitersLocked()
	return true
}

// hwIsrLocked is the ISR the HW is computed over: the maximal ISR while
// an ISR change may have landed unseen, else the ISR. Caller holds r.mu.
func (r *Replica) hwIsrLocked() []int32 {
	if r.maximalIsr != nil {
		return r.maximalIsr
	}
	return r.isr
}

// checkLeaderEpochLocked applies KIP-320 fencing for a client's view of the
// leader epoch (-1 means no check). Caller holds r.mu.
func (r *Replica) checkLeaderEpochLocked(current int32) error {
	switch {
	case current < 0 || current == r.leaderEpoch:
		return nil
	case current < r.leaderEpoch:
		return fmt.Errorf("%w: %d < %d", ErrFencedLeaderEpoch, current, r.leaderEpoch)
	default:
		return fmt.Errorf("%w: %d > %d", ErrUnknownLeaderEpoch, current, r.leaderEpoch)
	}
}

// appendAsLeader validates one produced batch and appends it. A client's
// batch (OriginClient) goes through the sequence checks and duplicate
// detection and, if transactional, verification; a coordinator's only
// through the producer epoch check. Either kind is refused with
// ErrInvalidTxnState when it breaks the transaction rules
// (checkTxnAppendLocked).
func (r *Replica) appendAsLeader(records []byte, opts AppendOptions, now time.Time) (AppendResult, error) {
	acks := opts.Acks
	var h logstore.BatchHeader
	var raw []byte
	n := 0
	err := forEachBatch(records, func(bh logstore.BatchHeader, b []byte) error {
		h, raw = bh, b
		n++
		return nil
	})
	if err != nil {
		return AppendResult{}, mapLogError(err)
	}
	if n != 1 {
		return AppendResult{}, fmt.Errorf("%w: produce carries %d batches, want exactly 1", ErrInvalidRecord, n)
	}
	// The batch size first, as Kafka's analyzeAndValidateRecords, before
	// its records are inflated and walked: a compressed batch over the
	// limit is too large whatever its records hold.
	r.mu.Lock()
	maxMessageBytes := r.cfg.MaxMessageBytes
	rules := rulesFor(r.cfg, r.tp, now)
	r.mu.Unlock()
	if int64(h.Size()) > maxMessageBytes {
		return AppendResult{}, fmt.Errorf("%w: batch of %d bytes > max.message.bytes %d", ErrMessageTooLarge, h.Size(), maxMessageBytes)
	}
	if err := validateProduced(raw, h, inflateFactor*maxMessageBytes, rules); err != nil {
		return AppendResult{}, err
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.isLeaderLocked() {
		return AppendResult{}, ErrNotLeader
	}
	if err := r.storageErr; err != nil {
		// The log or the state kept beside it failed: even a retry is
		// not answered, as Kafka's offline log directory answers none.
		return AppendResult{}, err
	}
	if int64(h.Size()) > r.cfg.MaxMessageBytes { // changed meanwhile
		return AppendResult{}, fmt.Errorf("%w: batch of %d bytes > max.message.bytes %d", ErrMessageTooLarge, h.Size(), r.cfg.MaxMessageBytes)
	}
	if int64(h.Size()) > r.cfg.SegmentBytes {
		return AppendResult{}, fmt.Errorf("%w: batch of %d bytes > segment.bytes %d", ErrRecordListTooLarge, h.Size(), r.cfg.SegmentBytes)
	}
	if acks == -1 && int64(len(r.isr)) < r.cfg.MinInsyncReplicas {
		return AppendResult{}, fmt.Errorf("%w: isr %v < min.insync.replicas %d", ErrNotEnoughReplicas, r.isr, r.cfg.MinInsyncReplicas)
	}
	if h.IsTransactional() && h.ProducerID < 0 {
		return AppendResult{}, fmt.Errorf("%w: transactional batch without a producer id", ErrInvalidRecord)
	}
	if h.ProducerID >= 0 {
		s := r.producers[h.ProducerID]
		lastSeq := nextSeq(h.BaseSequence, h.LastOffsetDelta)
		if opts.Origin == OriginClient {
			// A retry first, as Kafka: it is answered with its
			// original offsets whatever happened since.
			if orig, ok := s.duplicate(h.ProducerEpoch, h.BaseSequence, lastSeq); ok {
				return AppendResult{BaseOffset: orig.firstOffset, LastOffset: orig.lastOffset,
					LogAppendTime: -1, LogStartOffset: r.log.LogStartOffset(), LeaderEpoch: r.leaderEpoch}, nil
			}
		}
		if err := r.checkVerifiedLocked(h, opts); err != nil {
			return AppendResult{}, err
		}
		if opts.Origin == OriginClient {
			if _, _, err := s.check(h.ProducerEpoch, h.BaseSequence, lastSeq); err != nil {
				return AppendResult{}, err
			}
		} else if s != nil && h.ProducerEpoch < s.epoch {
			return AppendResult{}, fmt.Errorf("%w: epoch %d < %d", ErrInvalidProducerEpoch, h.ProducerEpoch, s.epoch)
		}
		if err := r.checkInTxnLocked(h); err != nil {
			return AppendResult{}, err
		}
	}
	appendTime := int64(-1)
	if r.cfg.MessageTimestampType == "LogAppendTime" {
		appendTime = now.UnixMilli()
	}
	info, err := r.log.AppendAsLeader(records, r.leaderEpoch, appendTime)
	if err != nil {
		err = fmt.Errorf("append to %s: %w", r.tp, mapLogError(err))
		r.logFailedLocked(err)
		return AppendResult{}, err
	}
	for _, bh := range info.Batches {
		r.recordProducerLocked(bh)
	}
	w := wakeFollowers
	if r.maybeIncrementHWLocked(now) { // an ISR of one
		w = wakeAll
	}
	if opts.Wakes != nil {
		opts.Wakes.w |= r.signalDeferredLocked(w)
	} else {
		r.signalToLocked(w)
	}
	return AppendResult{BaseOffset: info.FirstOffset, LastOffset: info.LastOffset,
		LogAppendTime: appendTime, LogStartOffset: r.log.LogStartOffset(), LeaderEpoch: r.leaderEpoch}, nil
}

// commitWaiter is one acks=all wait: done receives its outcome once,
// sent under r.mu by whoever takes it off r.waiters. Waiters are pooled,
// so a wait allocates nothing in steady state.
type commitWaiter struct {
	lastOffset int64 // complete once the HW passes it
	done       chan error
}

var commitWaiterPool = sync.Pool{New: func() any { return &commitWaiter{done: make(chan error, 1)} }}

// waitCommitted blocks until the HW passes lastOffset, this broker's
// leadership since leaderEpoch (the append's) is lost, or ctx ends. A
// later epoch of this broker's leadership counts only if it led without a
// break since the append: a leader in between may have truncated the
// records, and the HW passing lastOffset would then speak of others.
func (r *Replica) waitCommitted(ctx context.Context, lastOffset int64, leaderEpoch int32) error {
	r.mu.Lock()
	if !r.ledSinceLocked(leaderEpoch) {
		r.mu.Unlock()
		return ErrNotLeader
	}
	if r.hw > lastOffset {
		err := r.committedLocked()
		r.mu.Unlock()
		return err
	}
	if err := r.storageErr; err != nil {
		r.mu.Unlock()
		return err
	}
	w := commitWaiterPool.Get().(*commitWaiter)
	w.lastOffset = lastOffset
	r.addWaiterLocked(w)
	r.mu.Unlock()

	var err error
	select {
	case err = <-w.done:
	case <-ctx.Done():
		r.mu.Lock()
		removed := r.removeWaiterLocked(w)
		r.mu.Unlock()
		if removed {
			err = fmt.Errorf("%w: high watermark below %d", ErrRequestTimedOut, lastOffset+1)
		} else {
			err = <-w.done // completed as ctx ended: the outcome is sent
		}
	}
	commitWaiterPool.Put(w)
	return err
}

// ledSinceLocked reports whether this broker has led without a break since
// leaderEpoch, so records it appended then are still in its log. Caller
// holds r.mu.
func (r *Replica) ledSinceLocked(leaderEpoch int32) bool {
	return r.isLeaderLocked() && leaderEpoch >= r.leaderSinceEpoch && leaderEpoch <= r.leaderEpoch
}

// committedLocked is the outcome of a wait the HW has passed: Kafka
// answers NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR is then below
// min.insync.replicas. Caller holds r.mu.
func (r *Replica) committedLocked() error {
	if int64(len(r.isr)) < r.cfg.MinInsyncReplicas {
		return ErrNotEnoughReplicasAfterAppend
	}
	return nil
}

// addWaiterLocked inserts w after every waiter needing an offset at or
// below its own; appends come in offset order, so this is usually the
// end. Caller holds r.mu.
func (r *Replica) addWaiterLocked(w *commitWaiter) {
	i := len(r.waiters)
	for i > 0 && r.waiters[i-1].lastOffset > w.lastOffset {
		i--
	}
	r.waiters = slices.Insert(r.waiters, i, w)
}

// removeWaiterLocked takes w off the list, reporting whether it was still
// there (not yet completed). Caller holds r.mu.
func (r *Replica) removeWaiterLocked(w *commitWaiter) bool {
	i, _ := slices.BinarySearchFunc(r.waiters, w.lastOffset, func(x *commitWaiter, off int64) int {
		return cmp.Compare(x.lastOffset, off)
	})
	for ; i < len(r.waiters) && r.waiters[i].lastOffset == w.lastOffset; i++ {
		if r.waiters[i] == w {
			r.waiters = slices.Delete(r.waiters, i, i+1)
			return true
		}
	}
	return false
}

// completeWaitersLocked completes the waiters the HW has passed, from the
// head of the list, touching no other. Caller holds r.mu.
func (r *Replica) completeWaitersLocked() {
	n := 0
	for n < len(r.waiters) && r.waiters[n].lastOffset < r.hw {
		n++
	}
	if n == 0 {
		return
	}
	err := r.committedLocked()
	for _, w := range r.waiters[:n] {
		w.done <- err
	}
	r.waiterWakeups += uint64(n)
	clear(r.waiters[:n])
	if n == len(r.waiters) {
		// All done: start again at the front of the same array.
		r.waiters = r.waiters[:0]
		return
	}
	// Slide past them, not copy the rest down: the array is dropped for
	// a new one when an append outgrows it.
	r.waiters = r.waiters[n:]
}

// logFailedLocked notes err, from a write to the log, if it is a storage
// failure (ErrStorage, which mapLogError makes of logstore.ErrStorage):
// the log takes no more writes, so the acks=all waits fail with it now
// (KAFKA_STORAGE_ERROR, as Kafka's delayed produce once the log dir is
// offline) rather than time out, and so do the waits begun later that the
// HW has not passed. Caller holds r.mu.
func (r *Replica) logFailedLocked(err error) {
	if !errors.Is(err, ErrStorage) || r.storageErr != nil {
		return
	}
	if errors.Is(err, logstore.ErrClosed) || errors.Is(err, errManagerClosed) {
		return // a closed log, not a failed one
	}
	// Every other storage failure, EMFILE and ENFILE too, is for good:
	// logstore takes no more writes once it hit one.
	r.storageErr = err
	r.logger.Error().Err(err).Int("waiters", len(r.waiters)).
		Msg("log storage failed; failing acks=all waits, the log takes no more writes")
	r.failWaitersLocked(err)
	if r.ioFailed != nil {
		r.ioFailed(err)
	}
}

// failWaitersLocked ends every waiter with err. Caller holds r.mu.
func (r *Replica) failWaitersLocked(err error) {
	for _, w := range r.waiters {
		w.done <- err
	}
	r.waiterWakeups += uint64(len(r.waiters))
	clear(r.waiters)
	r.waiters = r.waiters[:0]
}

// updateFollowerLocked records a follower's fetch at offset as its LEO and
// keeps the last time it was caught up (Kafka's rule: caught up now if it
// fetched at the leader's LEO, or caught up as of its previous fetch if it
// reached the LEO the leader had then), then tries to advance the HW.
// It returns an ISR expansion to write when the follower qualifies.
// Caller holds r.mu.
func (r *Replica) updateFollowerLocked(id int32, offset, logStart int64, now time.Time) *isrChange {
	f := r.followers[id]
	if f == nil {
		return nil // not an assigned replica: its fetch updates nothing
	}
	if logStart != f.logStartOffset {
		// Wakes DeleteRecords waiting for the low watermark.
		f.logStartOffset = logStart
		r.signalLocked()
	}
	leo := r.log.LogEndOffset()
	switch {
	case offset >= leo:
		if now.After(f.lastCaughtUpTime) {
			f.lastCaughtUpTime = now
		}
	case offset >= f.lastFetchLeaderEndOffset:
		if f.lastFetchTime.After(f.lastCaughtUpTime) {
			f.lastCaughtUpTime = f.lastFetchTime
		}
	}
	f.lastFetchLeaderEndOffset = leo
	f.lastFetchTime = now
	moved := f.logEndOffset != offset
	f.logEndOffset = offset
	if moved && r.maybeIncrementHWLocked(now) {
		// Followers learn the HW from their next fetch, as in Kafka,
		// where an HW move completes no follower's delayed fetch.
		r.signalToLocked(wakeConsumers)
	}
	return r.maybeExpandIsrLocked(id)
}

// read serves a Fetch: consumers up to the HW, followers up to the LEO. A
// follower's fetch may qualify it for the ISR: the change to write is
// returned for the Manager to publish. overQuota says whether the leader
// replication quota is exceeded: a follower outside the ISR then reads no
// records of a leader-throttled replica (Kafka's shouldLeaderThrottle).
func (r *Replica) read(req ReadRequest, now time.Time, overQuota bool) (ReadResult, *isrChange, error) {
	r.mu.Lock()
	if !r.isLeaderLocked() {
		r.mu.Unlock()
		return ReadResult{}, nil, ErrNotLeader
	}
	if err := r.storageErr; err != nil {
		r.mu.Unlock()
		return ReadResult{}, nil, err
	}
	if err := r.checkLeaderEpochLocked(req.CurrentLeaderEpoch); err != nil {
		r.mu.Unlock()
		return ReadResult{}, nil, err
	}
	var change *isrChange
	// An out-of-range fetch offset says nothing true about the follower's
	// log (it is about to truncate), so it updates no follower state.
	if req.ReplicaID >= 0 && req.FetchOffset >= r.log.LogStartOffset() && req.FetchOffset <= r.log.LogEndOffset() {
		change = r.updateFollowerLocked(req.ReplicaID, req.FetchOffset, req.LogStartOffset, now)
	}
	hw := r.hw
	lso := r.lsoLocked()
	leo := r.log.LogEndOffset()
	start := r.log.LogStartOffset()
	throttled := req.ReplicaID >= 0 && r.leaderThrottled
	holdBack := throttled && overQuota && !slices.Contains(r.isr, req.ReplicaID)
	r.mu.Unlock()

	// Records is never nil: a null record set means "no data" to old
	// clients but librdkafka refuses it (invalid MessageSetSize -1).
	res := ReadResult{Records: []byte{}, Buf: req.Buf, HighWatermark: hw, LastStableOffset: lso, LogStartOffset: start,
		Throttled: throttled}
	if req.FetchOffset < start || req.FetchOffset > leo {
		return res, change, fmt.Errorf("%w: fetch offset %d outside [%d, %d]", ErrOffsetOutOfRange, req.FetchOffset, start, leo)
	}
	committed := req.ReplicaID < 0 && req.IsolationLevel == 1
	maxOffset := hw
	switch {
	case req.ReplicaID >= 0:
		maxOffset = leo
	case committed:
		// read_committed: nothing at or past the LSO, whose
		// transactions may still abort.
		maxOffset = lso
	}
	if req.FetchOffset >= maxOffset || holdBack {
		return res, change, nil
	}
	buf, err := r.log.AppendRead(req.Buf, req.FetchOffset, req.MaxBytes, maxOffset)
	if err != nil {
		return res, change, fmt.Errorf("read %s at %d: %w", r.tp, req.FetchOffset, mapLogError(err))
	}
	res.Buf = buf
	if n := len(req.Buf); len(buf) > n {
		res.Records = buf[n:len(buf):len(buf)]
	}
	if committed && len(res.Records) > 0 {
		// Every aborted transaction overlapping the records returned is
		// complete below the HW (else the LSO would be at or below its
		// first offset), so its index entry is in place and stays.
		upper := lastBatchEnd(res.Records, maxOffset)
		if res.AbortedTransactions, err = r.abortedTransactions(req.FetchOffset, upper); err != nil {
			return res, change, err
		}
	}
	return res, change, nil
}

// lastBatchEnd is the offset after the last whole batch in records, or
// bound if they hold none.
func lastBatchEnd(records []byte, bound int64) int64 {
	end := int64(-1)
	_ = forEachBatch(records, func(h logstore.BatchHeader, _ []byte) error {
		end = h.NextOffset()
		return nil
	})
	if end < 0 {
		return bound
	}
	return min(end, bound)
}

// listOffset resolves a ListOffsets timestamp for asker, as Kafka's
// Partition.fetchOffsetForTimestamp: latest is the last offset asker may
// fetch (the HW for consumers, the LSO for read_committed ones, the LEO
// for replicas), earliest the log
// start offset, and a timestamp the first record whose timestamp reaches
// it (offsetForTimestamp; MaxTimestamp: the batch with the largest), or
// -1 when that is at or past the bound.
func (r *Replica) listOffset(ts int64, currentLeaderEpoch int32, asker OffsetsAsker) (int64, int64, int32, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.isLeaderLocked() {
		return 0, 0, 0, ErrNotLeader
	}
	if err := r.checkLeaderEpochLocked(currentLeaderEpoch); err != nil {
		return 0, 0, 0, err
	}
	// KIP-207: a new leader's HW can lag records that were committed
	// under the previous leader (it learns the followers' LEOs only from
	// their next fetches), so until it reaches the start of this epoch the
	// "latest" offset it would answer may go backwards; consumers are told
	// to retry instead, as Kafka's Partition.fetchOffsetForTimestamp does.
	lagging := (asker == AskerConsumer || asker == AskerCommittedConsumer) && r.leaderEpochStartOffset > r.hw
	lastFetchable := r.hw
	switch asker {
	case AskerReplica:
		lastFetchable = r.log.LogEndOffset()
	case AskerCommittedConsumer:
		lastFetchable = r.lsoLocked()
	}
	var (
		off, found int64
		ok         bool
		err        error
	)
	switch ts {
	case LatestTimestamp:
		if lagging {
			return 0, 0, 0, fmt.Errorf("%s: high watermark %d lags the start of leader epoch %d at %d: %w",
				r.tp, r.hw, r.leaderEpoch, r.leaderEpochStartOffset, ErrOffsetNotAvailable)
		}
		return lastFetchable, -1, r.leaderEpoch, nil
	case EarliestTimestamp:
		start := r.log.LogStartOffset()
		return start, -1, r.epochForOffsetLocked(start), nil
	case MaxTimestamp:
		off, found, ok, err = r.log.OffsetOfMaxTimestamp()
	default:
		// The search reads, and may inflate, records: without r.mu, so
		// that appends go on meanwhile. The bounds taken above stay
		// valid while this broker leads (its HW never moves back, a new
		// epoch in which it stays leader included), which is checked
		// after.
		r.mu.Unlock()
		off, found, ok, err = r.offsetForTimestamp(ts)
		r.mu.Lock()
		if !r.isLeaderLocked() {
			return 0, 0, 0, ErrNotLeader
		}
	}
	if err != nil {
		return 0, 0, 0, fmt.Errorf("offset for timestamp %d in %s: %w", ts, r.tp, mapLogError(err))
	}
	if !ok || off >= lastFetchable {
		if lagging {
			return 0, 0, 0, fmt.Errorf("%s: no offset for timestamp %d below high watermark %d, which lags the start of leader epoch %d at %d: %w",
				r.tp, ts, r.hw, r.leaderEpoch, r.leaderEpochStartOffset, ErrOffsetNotAvailable)
		}
		return -1, -1, -1, nil
	}
	return off, found, r.epochForOffsetLocked(off), nil
}

// epochForOffsetLocked is the leader epoch in which offset was written.
// Caller holds r.mu.
func (r *Replica) epochForOffsetLocked(offset int64) int32 {
	epoch := int32(-1)
	for _, e := range r.log.LeaderEpochs().Entries() {
		if e.StartOffset > offset {
			break
		}
		epoch = e.LeaderEpoch
	}
	return epoch
}

// snapshot returns the checkpointed values of the replica.
func (r *Replica) snapshot() (hw, recoveryPoint, logStart int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hw, r.log.RecoveryPoint(), r.log.LogStartOffset()
}

// close closes the log, failing waiters; with remove it deletes the directory.
func (r *Replica) close(remove bool) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.failWaitersLocked(ErrNotLeader)
	r.signalLocked()
	r.mu.Unlock()
	if remove {
		return r.log.Delete()
	}
	return r.log.Close() // flushes first
}

// mapLogError turns logstore errors into this package's sentinels.
func mapLogError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrCorruptMessage), errors.Is(err, ErrInvalidRecord), errors.Is(err, ErrStorage):
		return err
	case errors.Is(err, logstore.ErrStorage):
		// First: a failed fsync is fatal for the log whatever else the
		// error wraps (KAFKA_STORAGE_ERROR).
		return fmt.Errorf("%w: %w", ErrStorage, err)
	case errors.Is(err, logstore.ErrCorrupt):
		return fmt.Errorf("%w: %v", ErrCorruptMessage, err)
	case errors.Is(err, logstore.ErrInvalidRecord):
		return fmt.Errorf("%w: %v", ErrInvalidRecord, err)
	case errors.Is(err, logstore.ErrRecordListTooLarge):
		return fmt.Errorf("%w: %v", ErrRecordListTooLarge, err)
	case errors.Is(err, logstore.ErrOffsetOutOfRange):
		return fmt.Errorf("%w: %v", ErrOffsetOutOfRange, err)
	default:
		// The cause stays in the chain, so that isIOFailure tells a
		// closed log from a failed one.
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
}
