package partition

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/kafkazk/broker/logstore"
)

// txnMeta is one transaction of a replica (Kafka's TxnMetadata): ongoing
// while lastOffset is -1, else completed by the marker at lastOffset.
type txnMeta struct {
	producerID  int64
	firstOffset int64
	lastOffset  int64
}

// guardEntry is a verification guard a leader handed out for a producer
// with no ongoing transaction (KIP-890 part 1, Kafka's
// VerificationStateEntry).
type guardEntry struct {
	value   uint64
	created time.Time
}

// guardExpiry is how long an unused verification guard is kept, Kafka's
// producer.id.expiration.ms default: a producer whose verification never
// led to an append does not hold memory for ever.
const guardExpiry = 24 * time.Hour

// lastGuard numbers the verification guards of the whole process, as
// Kafka's VerificationGuard does: a guard is never handed out twice, so a
// verification that raced a marker (the ABA case) cannot match a later
// guard of the same producer.
var lastGuard atomic.Uint64

// insertTxn adds t to txns, kept ordered by first offset.
func insertTxn(txns []txnMeta, t txnMeta) []txnMeta {
	i := len(txns)
	for i > 0 && txns[i-1].firstOffset > t.firstOffset {
		i--
	}
	return slices.Insert(txns, i, t)
}

// removeTxn takes the transaction of producerID starting at firstOffset
// off txns.
func removeTxn(txns []txnMeta, producerID, firstOffset int64) []txnMeta {
	return slices.DeleteFunc(txns, func(t txnMeta) bool {
		return t.producerID == producerID && t.firstOffset == firstOffset
	})
}

// lsoLocked is the last stable offset: the HW, or the first offset of an
// unstable transaction below it (no lower than the log start). A
// transaction is unstable while ongoing, and also once completed by a
// marker that the HW has not yet passed (Kafka's unreplicated
// transactions), since the marker could still be lost to a truncation.
// Caller holds r.mu.
func (r *Replica) lsoLocked() int64 {
	r.pruneUnreplicatedLocked()
	lso := r.hw
	if len(r.ongoingTxns) > 0 {
		lso = min(lso, r.ongoingTxns[0].firstOffset)
	}
	if len(r.unreplicatedTxns) > 0 {
		lso = min(lso, r.unreplicatedTxns[0].firstOffset)
	}
	return max(lso, min(r.log.LogStartOffset(), r.hw))
}

// pruneUnreplicatedLocked drops the completed transactions whose marker
// the HW has passed (Kafka's onHighWatermarkUpdated). Caller holds r.mu.
func (r *Replica) pruneUnreplicatedLocked() {
	if len(r.unreplicatedTxns) == 0 {
		return
	}
	r.unreplicatedTxns = slices.DeleteFunc(r.unreplicatedTxns, func(t txnMeta) bool { return t.lastOffset < r.hw })
}

// resetProducerStateLocked forgets every producer and transaction, for a
// rebuild or a log emptied. Verification guards stay: they are cleared by
// the markers and transactional batches that make them stale, as Kafka's.
// Caller holds r.mu (or owns r exclusively).
func (r *Replica) resetProducerStateLocked() {
	r.producers = map[int64]*producerState{}
	r.ongoingTxns = nil
	r.unreplicatedTxns = nil
}

// rebuildOngoingLocked derives the ongoing transactions from the
// producers' state, after a snapshot is loaded. Caller holds r.mu (or
// owns r exclusively).
func (r *Replica) rebuildOngoingLocked() {
	r.ongoingTxns = nil
	for id, s := range r.producers {
		if s.txnFirstOffset >= 0 {
			r.ongoingTxns = insertTxn(r.ongoingTxns, txnMeta{producerID: id, firstOffset: s.txnFirstOffset, lastOffset: -1})
		}
	}
}

// recordProducerLocked remembers an appended data batch of an idempotent
// or transactional producer: its sequence range, its timestamp, and the
// start of a transaction when it is the first transactional batch since
// the producer's last marker. A transactional batch clears the producer's
// verification guard (its transaction is now known here). Caller holds
// r.mu (or owns r exclusively).
func (r *Replica) recordProducerLocked(h logstore.BatchHeader) {
	if h.ProducerID < 0 || h.IsControl() {
		return
	}
	s := r.producers[h.ProducerID]
	if s == nil {
		s = newProducerState(h.ProducerEpoch)
		r.producers[h.ProducerID] = s
	}
	lastSeq := int32(-1)
	if h.BaseSequence >= 0 {
		lastSeq = nextSeq(h.BaseSequence, h.LastOffsetDelta)
	}
	s.record(h.ProducerEpoch, producerBatch{
		firstSeq: h.BaseSequence, lastSeq: lastSeq,
		firstOffset: h.BaseOffset, lastOffset: h.LastOffset(),
	})
	s.lastTimestamp = h.MaxTimestamp
	if !h.IsTransactional() {
		if s.txnFirstOffset >= 0 {
			// Only replication or a rebuild gets here (a leader refuses
			// the batch first): Kafka's follower fails the same way, we
			// keep the log as the leader wrote it.
			r.logger.Warn().Int64("producer_id", h.ProducerID).Int64("offset", h.BaseOffset).
				Int64("txn_first_offset", s.txnFirstOffset).Msg("non-transactional batch inside an ongoing transaction")
		}
		return
	}
	delete(r.guards, h.ProducerID)
	if s.txnFirstOffset < 0 {
		s.txnFirstOffset = h.BaseOffset
		r.ongoingTxns = insertTxn(r.ongoingTxns, txnMeta{producerID: h.ProducerID, firstOffset: h.BaseOffset, lastOffset: -1})
	}
}

// recordControlLocked applies an appended control batch (raw, as stored)
// to the producer state: a replicated or replayed marker. An empty control
// batch (its transaction cleaned away) changes nothing. Caller holds r.mu
// (or owns r exclusively).
func (r *Replica) recordControlLocked(h logstore.BatchHeader, raw []byte) error {
	if h.ProducerID < 0 || h.NumRecords == 0 {
		return nil
	}
	typ, coordinatorEpoch, err := logstore.ParseControlBatch(raw)
	if err != nil {
		// Not an end-transaction marker (Kafka ignores unknown control
		// types as it reads them): the log keeps it, the state is as if
		// it were absent.
		r.logger.Warn().Err(err).Int64("offset", h.BaseOffset).Msg("unreadable control batch ignored by producer state")
		return nil
	}
	return r.applyMarkerLocked(h, typ, coordinatorEpoch)
}

// applyMarkerLocked ends the producer's ongoing transaction with the marker
// batch h (appended at h.BaseOffset): an ABORT adds the transaction to the
// log's aborted index with the LSO it leaves (Kafka's
// ProducerStateManager.lastStableOffset of the completed transaction), and
// the transaction stays unstable until the HW passes the marker. The
// producer takes the marker's producer and coordinator epochs and its
// verification guard is cleared. A marker of a producer with no ongoing
// transaction changes only those. If the index write fails the transaction
// stays ongoing (the LSO does not pass it, as in Kafka) and the error is
// returned. Caller holds r.mu (or owns r exclusively).
func (r *Replica) applyMarkerLocked(h logstore.BatchHeader, typ logstore.ControlType, coordinatorEpoch int32) error {
	s := r.producers[h.ProducerID]
	if s == nil {
		s = newProducerState(h.ProducerEpoch)
		r.producers[h.ProducerID] = s
	}
	if s.txnFirstOffset >= 0 {
		if typ == logstore.ControlAbort {
			t := logstore.AbortedTxn{ProducerID: h.ProducerID, FirstOffset: s.txnFirstOffset, LastOffset: h.BaseOffset,
				LastStableOffset: r.completedLSOLocked(h.ProducerID, h.BaseOffset)}
			if err := r.log.AppendAbortedTxn(t); err != nil {
				// The marker is in the log and its entry is not: whatever
				// the cause, the replica can no longer agree with its log
				// (logstore has failed the log for any I/O error).
				err = mapLogError(err)
				if !errors.Is(err, ErrStorage) {
					err = fmt.Errorf("%w: %w", ErrStorage, err)
				}
				return fmt.Errorf("index aborted transaction of producer %d at %d in %s: %w", h.ProducerID, h.BaseOffset, r.tp, err)
			}
		}
		r.ongoingTxns = removeTxn(r.ongoingTxns, h.ProducerID, s.txnFirstOffset)
		r.unreplicatedTxns = insertTxn(r.unreplicatedTxns, txnMeta{producerID: h.ProducerID, firstOffset: s.txnFirstOffset, lastOffset: h.BaseOffset})
	}
	s.setEpoch(h.ProducerEpoch)
	s.coordinatorEpoch = coordinatorEpoch
	s.txnFirstOffset = -1
	s.lastTimestamp = h.MaxTimestamp
	s.lastMarkerOffset = h.BaseOffset
	delete(r.guards, h.ProducerID)
	r.pruneUnreplicatedLocked()
	return nil
}

// completedLSOLocked is the LSO once producerID's transaction ends at
// markerOffset: the first offset of the oldest other ongoing transaction,
// else the offset after the marker. Caller holds r.mu.
func (r *Replica) completedLSOLocked(producerID, markerOffset int64) int64 {
	for _, t := range r.ongoingTxns {
		if t.producerID != producerID {
			return t.firstOffset
		}
	}
	return markerOffset + 1
}

// checkVerifiedLocked is KIP-890's rule for a transactional batch h,
// checked before its sequence (Kafka's analyzeAndValidateProducerState):
// with verification on, a transactional batch of a producer with no
// ongoing transaction needs the verification guard the leader stored for
// it, and ErrInvalidTxnState otherwise (none asked for, or cleared by a
// marker since). It applies to the group coordinator's transactional
// offset commits (OriginCoordinator) as to clients' batches, as in Kafka:
// a TxnOffsetCommit verified before a marker must not open a transaction
// after it. Caller holds r.mu.
func (r *Replica) checkVerifiedLocked(h logstore.BatchHeader, opts AppendOptions) error {
	if !h.IsTransactional() || !r.txnVerification {
		return nil
	}
	if s := r.producers[h.ProducerID]; s != nil && s.txnFirstOffset >= 0 {
		return nil
	}
	if g, ok := r.guards[h.ProducerID]; ok && opts.VerificationGuard != 0 && g.value == opts.VerificationGuard {
		return nil
	}
	return fmt.Errorf("%w: transactional batch of producer %d is not part of a verified transaction on %s",
		ErrInvalidTxnState, h.ProducerID, r.tp)
}

// checkInTxnLocked refuses with ErrInvalidTxnState a non-transactional
// batch of a producer inside a transaction (Kafka's
// ProducerAppendInfo.appendDataBatch), after its epoch and sequence were
// checked. Caller holds r.mu.
func (r *Replica) checkInTxnLocked(h logstore.BatchHeader) error {
	if s := r.producers[h.ProducerID]; s != nil && s.txnFirstOffset >= 0 && !h.IsTransactional() {
		return fmt.Errorf("%w: non-transactional batch of producer %d during its transaction from %d on %s",
			ErrInvalidTxnState, h.ProducerID, s.txnFirstOffset, r.tp)
	}
	return nil
}

// verificationGuard is TxnVerificationGuard on the replica: (0, false)
// when verification is off (no guard is needed or kept) or producerID has
// an ongoing transaction here, else the producer's guard, created if it
// has none (Kafka's maybeStartTransactionVerification
// keeps a guard already handed out, so the concurrent first requests of a
// transaction all verify against the same one).
func (r *Replica) verificationGuard(producerID int64, now time.Time) (uint64, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.isLeaderLocked() {
		return 0, false, ErrNotLeader
	}
	if !r.txnVerification {
		return 0, false, nil
	}
	if s := r.producers[producerID]; s != nil && s.txnFirstOffset >= 0 {
		return 0, false, nil
	}
	if g, ok := r.guards[producerID]; ok && now.Sub(g.created) < guardExpiry {
		return g.value, true, nil
	}
	for id, g := range r.guards {
		if now.Sub(g.created) >= guardExpiry {
			delete(r.guards, id)
		}
	}
	g := guardEntry{value: lastGuard.Add(1), created: now}
	r.guards[producerID] = g
	return g.value, true, nil
}

// writeMarker appends a transaction marker as leader (WriteTxnMarkers):
// min.insync.replicas is checked as for acks -1, then the producer epoch
// (ErrInvalidProducerEpoch below the producer's) and the coordinator epoch
// (ErrTransactionCoordinatorFenced below the last seen for the producer).
func (r *Replica) writeMarker(mk TxnMarker, now time.Time) (AppendResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.isLeaderLocked() {
		return AppendResult{}, ErrNotLeader
	}
	if err := r.storageErr; err != nil {
		return AppendResult{}, err
	}
	if int64(len(r.isr)) < r.cfg.MinInsyncReplicas {
		return AppendResult{}, fmt.Errorf("%w: isr %v < min.insync.replicas %d", ErrNotEnoughReplicas, r.isr, r.cfg.MinInsyncReplicas)
	}
	if mk.ProducerID < 0 {
		return AppendResult{}, fmt.Errorf("%w: marker for producer id %d", ErrInvalidRecord, mk.ProducerID)
	}
	if s := r.producers[mk.ProducerID]; s != nil {
		if mk.ProducerEpoch < s.epoch {
			return AppendResult{}, fmt.Errorf("%w: marker epoch %d < %d of producer %d on %s",
				ErrInvalidProducerEpoch, mk.ProducerEpoch, s.epoch, mk.ProducerID, r.tp)
		}
		if mk.CoordinatorEpoch < s.coordinatorEpoch {
			return AppendResult{}, fmt.Errorf("%w: coordinator epoch %d < %d for producer %d on %s",
				ErrTransactionCoordinatorFenced, mk.CoordinatorEpoch, s.coordinatorEpoch, mk.ProducerID, r.tp)
		}
	}
	typ := logstore.ControlAbort
	if mk.Commit {
		typ = logstore.ControlCommit
	}
	batch := logstore.BuildControlBatch(mk.ProducerID, mk.ProducerEpoch, mk.CoordinatorEpoch, typ, now.UnixMilli())
	info, err := r.log.AppendControlAsLeader(batch, r.leaderEpoch)
	if err != nil {
		err = fmt.Errorf("append marker to %s: %w", r.tp, mapLogError(err))
		r.logFailedLocked(err)
		return AppendResult{}, err
	}
	if len(info.Batches) != 1 {
		panic(fmt.Sprintf("partition: marker append to %s wrote %d batches", r.tp, len(info.Batches)))
	}
	if err := r.applyMarkerLocked(info.Batches[0], typ, mk.CoordinatorEpoch); err != nil {
		r.logFailedLocked(err)
		return AppendResult{}, err
	}
	w := wakeFollowers
	if r.maybeIncrementHWLocked(now) { // an ISR of one
		w = wakeAll
	}
	r.signalToLocked(w)
	return AppendResult{BaseOffset: info.FirstOffset, LastOffset: info.LastOffset,
		LogAppendTime: -1, LogStartOffset: r.log.LogStartOffset(), LeaderEpoch: r.leaderEpoch}, nil
}

// describeProducers lists the producers of a partition led here (Kafka's
// DescribeProducers: the active producers), by producer id.
func (r *Replica) describeProducers() ([]ProducerInfo, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.isLeaderLocked() {
		return nil, ErrNotLeader
	}
	out := make([]ProducerInfo, 0, len(r.producers))
	for id, s := range r.producers {
		out = append(out, ProducerInfo{ProducerID: id, ProducerEpoch: s.epoch, LastSequence: s.lastSequence(),
			LastTimestamp: s.lastTimestamp, CoordinatorEpoch: s.coordinatorEpoch, CurrentTxnStartOffset: s.txnFirstOffset})
	}
	slices.SortFunc(out, func(a, b ProducerInfo) int { return cmp.Compare(a.ProducerID, b.ProducerID) })
	return out, nil
}

// ongoingTxnsLocked lists the ongoing transactions by first offset.
// Caller holds r.mu.
func (r *Replica) ongoingTxnsLocked() []OngoingTxn {
	if len(r.ongoingTxns) == 0 {
		return nil
	}
	out := make([]OngoingTxn, 0, len(r.ongoingTxns))
	for _, t := range r.ongoingTxns {
		o := OngoingTxn{ProducerID: t.producerID, FirstOffset: t.firstOffset, LastTimestamp: -1, ProducerEpoch: -1}
		if s := r.producers[t.producerID]; s != nil {
			o.ProducerEpoch, o.LastTimestamp = s.epoch, s.lastTimestamp
		}
		out = append(out, o)
	}
	return out
}

// abortedTransactions are the aborted transactions of the log overlapping
// [fetchOffset, upperOffset), for a read_committed read.
func (r *Replica) abortedTransactions(fetchOffset, upperOffset int64) ([]AbortedTransaction, error) {
	if upperOffset <= fetchOffset {
		return nil, nil
	}
	txns, err := r.log.CollectAbortedTxns(fetchOffset, upperOffset)
	if err != nil {
		return nil, fmt.Errorf("aborted transactions of %s in [%d, %d): %w", r.tp, fetchOffset, upperOffset, mapLogError(err))
	}
	if len(txns) == 0 {
		return nil, nil
	}
	out := make([]AbortedTransaction, len(txns))
	for i, t := range txns {
		out[i] = AbortedTransaction{ProducerID: t.ProducerID, FirstOffset: t.FirstOffset}
	}
	return out, nil
}
