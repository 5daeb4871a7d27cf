package partition

import (
	"errors"
	"fmt"

	"github.com/kafkazk/broker/logstore"
)

// errStale means the replica no longer follows in the leader epoch a
// fetcher acted for: a newer state arrived and the result is dropped.
var errStale = errors.New("partition: follower state changed")

// followingLocked reports whether r still follows in leaderEpoch. Caller
// holds r.mu.
func (r *Replica) followingLocked(leaderEpoch int32) bool {
	return !r.closed && r.leader != r.brokerID && r.leaderEpoch == leaderEpoch
}

// fetchPos is what a fetcher round needs of a followed replica, read
// under one lock, so that an idle follower's round touches each of
// thousands of replicas once.
type fetchPos struct {
	// fetchOffset (its LEO) and logStart are what the fetcher sends; ok
	// is false when r no longer follows in the epoch asked about.
	fetchOffset, logStart int64
	ok                    bool
	// throttled: the replica, as a follower, is throttled; inSync: its
	// LEO is at or past the leader's HW of the last fetch response
	// (Kafka's PartitionFetchState isReplicaInSync, a lag of 0).
	throttled, inSync bool
}

// fetchState reads r's fetchPos for a fetcher following in leaderEpoch.
func (r *Replica) fetchState(leaderEpoch int32) fetchPos {
	r.mu.Lock()
	defer r.mu.Unlock()
	var p fetchPos
	if r.followerThrottled {
		p.throttled = true
		p.inSync = r.leaderHW >= 0 && r.log.LogEndOffset() >= r.leaderHW
	}
	if r.followingLocked(leaderEpoch) {
		p.fetchOffset, p.logStart, p.ok = r.log.LogEndOffset(), r.log.LogStartOffset(), true
	}
	return p
}

// latestLocalEpoch is the epoch a truncating follower asks its leader
// about; false when the log has no epoch information.
func (r *Replica) latestLocalEpoch() (int32, bool) {
	return r.log.LeaderEpochs().LatestEpoch()
}

// truncateLocked removes everything at and above endOffset, drops the
// epochs starting there (even an empty epoch of our own leadership, so the
// KIP-279 iteration always makes progress), clamps the HW and rebuilds the
// producer state if it referred to removed batches. Caller holds r.mu.
func (r *Replica) truncateLocked(endOffset int64) error {
	if err := r.storageErr; err != nil {
		return err
	}
	leo := r.log.LogEndOffset()
	if endOffset < leo {
		if err := r.log.TruncateTo(endOffset); err != nil {
			return r.logFailedErrLocked(fmt.Errorf("truncate %s to %d: %w", r.tp, endOffset, mapLogError(err)))
		}
		r.dropSnapshotsAbove(r.log.LogEndOffset())
		for cur := r.cleanTruncatedTo.Load(); endOffset < cur && !r.cleanTruncatedTo.CompareAndSwap(cur, endOffset); {
			cur = r.cleanTruncatedTo.Load()
		}
	}
	if err := r.log.LeaderEpochs().TruncateFromEnd(r.log.LogEndOffset()); err != nil {
		return r.logFailedErrLocked(fmt.Errorf("truncate leader epochs of %s at %d: %w", r.tp, endOffset, mapLogError(err)))
	}
	r.hw = min(r.hw, r.log.LogEndOffset())
	if r.log.LogEndOffset() < leo && r.producersReachLocked(r.log.LogEndOffset()) {
		// The transactions go with the producers: rebuilt from the
		// snapshot and log below the new end (the log dropped the
		// aborted-index entries of markers it removed).
		r.resetProducerStateLocked()
		if err := r.rebuildProducerState(r.log.LogEndOffset()); err != nil {
			return err
		}
	}
	return nil
}

// producersReachLocked reports whether any remembered producer batch,
// transaction start or marker is at or after offset. Caller holds r.mu.
func (r *Replica) producersReachLocked(offset int64) bool {
	for _, s := range r.producers {
		if s.lastMarkerOffset >= offset || s.txnFirstOffset >= offset {
			return true
		}
		for _, b := range s.batches {
			if b.lastOffset >= offset {
				return true
			}
		}
	}
	for _, t := range r.unreplicatedTxns {
		if t.lastOffset >= offset {
			return true
		}
	}
	return false
}

// truncateByEpoch applies a leader's OffsetsForLeaderEpoch answer to the
// query for asked, with KIP-279's iteration (AbstractFetcherThread
// getOffsetTruncationState). done is false when the follower lacks the
// epoch the leader answered with: it truncated to the end of its own
// largest epoch below that one and must ask again.
func (r *Replica) truncateByEpoch(leaderEpoch, asked int32, ans EpochAnswer) (done bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.followingLocked(leaderEpoch) {
		return false, errStale
	}
	leo := r.log.LogEndOffset()
	var target int64
	switch {
	case ans.EndOffset < 0:
		// The leader knows nothing of our epoch: old Kafka's behaviour.
		target, done = r.hw, true
		r.logger.Warn().Int32("asked_leader_epoch", asked).Int64("hw", r.hw).Int64("leo", leo).
			Msg("leader has no end offset for our epoch, truncating to the high watermark")
	case ans.LeaderEpoch < 0:
		target, done = min(ans.EndOffset, leo), true
	default:
		ownEpoch, ownEnd := r.log.LeaderEpochs().EndOffsetFor(ans.LeaderEpoch, leo)
		switch {
		case ownEnd < 0 || ownEpoch < 0:
			target, done = min(ans.EndOffset, leo), true
		case ownEpoch != ans.LeaderEpoch:
			target, done = min(ownEnd, leo), false
		default:
			target, done = min(ownEnd, ans.EndOffset, leo), true
		}
	}
	if err := r.truncateLocked(target); err != nil {
		return false, err
	}
	// Info only when records went: after a LeaderAndIsr of thousands of
	// followers, every one of them passes here once.
	ev := r.logger.Debug()
	if target < leo {
		ev = r.logger.Info()
	}
	ev.Int32("asked_leader_epoch", asked).Int32("answer_leader_epoch", ans.LeaderEpoch).
		Int64("answer_end_offset", ans.EndOffset).Int64("offset", target).Int64("old_leo", leo).
		Bool("complete", done).Msg("follower truncation by leader epoch")
	if target < leo {
		r.signalLocked()
	}
	return done, nil
}

// truncateToHW is truncation for a log with no epoch information
// (AbstractFetcherThread truncateToHighWatermark).
func (r *Replica) truncateToHW(leaderEpoch int32) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.followingLocked(leaderEpoch) {
		return errStale
	}
	leo := r.log.LogEndOffset()
	if err := r.truncateLocked(r.hw); err != nil {
		return err
	}
	if r.log.LogEndOffset() < leo {
		r.logger.Info().Int64("hw", r.hw).Int64("old_leo", leo).Msg("no leader epochs, truncated to the high watermark")
		r.signalLocked()
	}
	return nil
}

// appendFromLeader appends a fetch response's batches unchanged, then
// takes the leader's HW (clamped to our LEO) and log start offset (by
// emptying the log when the leader's start is past our LEO, else by
// moving ours up to it). The
// fetch offset must still be the LEO (pitfall 14: a late response after a
// truncation must not land). Changed() fires when the LEO or HW moves:
// with ws not nil, once the caller passes ws to Manager.Wake.
func (r *Replica) appendFromLeader(leaderEpoch int32, fetchOffset int64, res FetchPartitionResult, ws *Wakes) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.followingLocked(leaderEpoch) {
		return errStale
	}
	if leo := r.log.LogEndOffset(); leo != fetchOffset {
		return fmt.Errorf("%w: fetched at %d, log end offset now %d", errStale, fetchOffset, leo)
	}
	if err := r.storageErr; err != nil {
		return err
	}
	oldHW, oldLEO := r.hw, r.log.LogEndOffset()
	if err := r.appendReplicatedLocked(res.Records); err != nil {
		if r.log.LogEndOffset() != oldLEO {
			r.signalLocked()
		}
		return err
	}
	leo := r.log.LogEndOffset()
	if res.LogStartOffset > leo {
		// Retention on the leader passed everything we hold. logstore can
		// only raise the start of a log by emptying it.
		r.dropSnapshotsAbove(-1)
		if err := r.log.TruncateFullyAndStartAt(res.LogStartOffset); err != nil {
			return r.logFailedErrLocked(fmt.Errorf("restart %s at leader log start %d: %w", r.tp, res.LogStartOffset, mapLogError(err)))
		}
		r.resetProducerStateLocked()
		leo = r.log.LogEndOffset()
	} else if res.LogStartOffset > r.log.LogStartOffset() {
		// DeleteRecords or retention on the leader moved its start:
		// follow it (ReplicaFetcherThread maybeIncrementLogStartOffset),
		// so the leader's low watermark can pass it.
		if _, err := r.log.IncrementLogStartOffset(res.LogStartOffset); err != nil {
			return r.logFailedErrLocked(fmt.Errorf("move log start of %s to the leader's %d: %w", r.tp, res.LogStartOffset, mapLogError(err)))
		}
	}
	// Kafka's follower takes the leader's HW as it is, clamped into
	// [log start, LEO]; only a leader's HW is monotonic.
	r.hw = max(min(res.HighWatermark, leo), r.log.LogStartOffset())
	r.leaderHW = res.HighWatermark
	if r.hw != oldHW || leo != oldLEO {
		if ws != nil {
			ws.w |= r.signalDeferredLocked(wakeAll)
		} else {
			r.signalLocked()
		}
	}
	return nil
}

// errEndOfPiece ends the search for the end of a piece of a follower
// append (appendReplicatedLocked).
var errEndOfPiece = errors.New("partition: end of piece")

// appendReplicatedLocked appends a fetch response's records and applies
// them to the producer state, a piece at a time: each piece but the last
// ends with a control batch, so that if a marker's state cannot be
// recorded (its aborted-index write failed, which fails the log and the
// replica) no batch after it is in the log, and the log and the state
// stay in step up to the failure. Caller holds r.mu.
func (r *Replica) appendReplicatedLocked(records []byte) error {
	for first := true; len(records) > 0; first = false {
		end, n := len(records), 0
		pos := 0
		_ = forEachBatch(records, func(h logstore.BatchHeader, raw []byte) error {
			pos += len(raw)
			n++
			if h.IsControl() {
				end = pos
				return errEndOfPiece
			}
			return nil
		})
		if n == 0 && !first {
			return nil // only a partial batch is left, as a fetch may end
		}
		piece := records[:end]
		records = records[end:]
		at := r.log.LogEndOffset()
		info, err := r.log.AppendAsFollower(piece)
		if errors.Is(err, logstore.ErrOffsetMismatch) {
			// A leader batch starts below our LEO: our log ends inside
			// one of its batches. Truncation must run again. (A batch
			// above our LEO is a gap the leader's cleaner left, and is
			// taken: Kafka rejects only offsets below the LEO.)
			return fmt.Errorf("append from leader to %s at %d: %w", r.tp, at, err)
		}
		if err != nil {
			return r.logFailedErrLocked(fmt.Errorf("append from leader to %s at %d: %w", r.tp, at, mapLogError(err)))
		}
		if err := r.recordReplicatedLocked(piece, info.Batches); err != nil {
			r.logFailedLocked(err)
			return err
		}
	}
	return nil
}

// resetOutOfRange handles OFFSET_OUT_OF_RANGE on a follower (§4.4): if the
// leader's LEO is below our fetch offset (after an unclean election) we
// truncate to it; if our fetch offset is below the leader's log start we
// empty the log and start at the leader's log start.
func (r *Replica) resetOutOfRange(leaderEpoch int32, fetchOffset, leaderLEO, leaderLogStart int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.followingLocked(leaderEpoch) || r.log.LogEndOffset() != fetchOffset {
		return errStale
	}
	if err := r.storageErr; err != nil {
		return err
	}
	switch {
	case leaderLEO >= 0 && leaderLEO < fetchOffset:
		r.logger.Warn().Int64("leo", fetchOffset).Int64("leader_leo", leaderLEO).
			Msg("fetch offset above the leader's log end offset, truncating to it")
		if err := r.truncateLocked(leaderLEO); err != nil {
			return err
		}
	case leaderLogStart > fetchOffset:
		r.logger.Warn().Int64("leo", fetchOffset).Int64("leader_log_start_offset", leaderLogStart).
			Msg("fetch offset below the leader's log start offset, restarting the log there")
		r.dropSnapshotsAbove(-1)
		if err := r.log.TruncateFullyAndStartAt(leaderLogStart); err != nil {
			return r.logFailedErrLocked(fmt.Errorf("restart %s at %d: %w", r.tp, leaderLogStart, mapLogError(err)))
		}
		r.resetProducerStateLocked()
		r.hw = leaderLogStart
	default:
		return fmt.Errorf("%w: fetch offset %d, leader log end offset %d, log start offset %d",
			ErrOffsetOutOfRange, fetchOffset, leaderLEO, leaderLogStart)
	}
	r.signalLocked()
	return nil
}

// recordReplicatedLocked applies the batches a follower appended (batches,
// as logstore wrote them) to the producer state, reading each control
// batch's marker from the replicated bytes in records. Caller holds r.mu.
func (r *Replica) recordReplicatedLocked(records []byte, batches []logstore.BatchHeader) error {
	var raws map[int64][]byte
	for _, h := range batches {
		if h.IsControl() && raws == nil {
			raws = map[int64][]byte{}
			_ = forEachBatch(records, func(bh logstore.BatchHeader, raw []byte) error {
				if bh.IsControl() {
					raws[bh.BaseOffset] = raw
				}
				return nil
			})
		}
	}
	for _, h := range batches {
		if !h.IsControl() {
			r.recordProducerLocked(h)
			continue
		}
		raw, ok := raws[h.BaseOffset]
		if !ok {
			return fmt.Errorf("%w: replicated control batch at %d of %s not found in the fetched records", ErrCorruptMessage, h.BaseOffset, r.tp)
		}
		if err := r.recordControlLocked(h, raw); err != nil {
			return err
		}
	}
	return nil
}
