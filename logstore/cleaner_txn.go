package logstore

import (
	"cmp"
	"slices"
)

// Transactional compaction, as Kafka's LogCleaner with its
// CleanedTransactionMetadata: the cleaner walks the log in offset order
// and learns from the transaction index which transactions were aborted.
// A transaction's batches are dropped when the index says it was aborted
// (and its ABORT marker lies below the pass's upper offset); a marker is
// kept while the cleaner still found data of its transaction before it in
// this pass, and otherwise only until the delete horizon.

// txnState is what the cleaner knows of one aborted transaction.
type txnState struct {
	txn AbortedTxn
	// hold: the marker is at or above the pass's upper offset (not yet
	// stable, or above the high watermark, where a truncation may still
	// remove it), so the transaction's batches are kept as they are.
	hold bool
	// observed: a batch of the transaction was read in this pass.
	observed bool
}

// txnTracker follows the transactions of the batches it is shown, in
// offset order (Kafka's CleanedTransactionMetadata).
type txnTracker struct {
	pending   []AbortedTxn // by first offset; next is pending[0]
	upper     int64        // markers at or above it hold their transaction
	aborted   map[int64]*txnState
	committed map[int64]bool // producers with a transactional batch since their last marker, not aborted
	// kept collects, in marker order, the entries the cleaned segment's
	// index keeps: those of ABORT markers kept with data still before
	// them, and those held.
	kept []AbortedTxn
}

// newTxnTracker tracks the aborted transactions txns (any order), of which
// those whose marker is at or above upper are held.
func newTxnTracker(txns []AbortedTxn, upper int64) *txnTracker {
	pending := slices.Clone(txns)
	slices.SortStableFunc(pending, func(a, b AbortedTxn) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
	return &txnTracker{pending: pending, upper: upper, aborted: map[int64]*txnState{}, committed: map[int64]bool{}}
}

// consumeUpTo starts tracking the aborted transactions that begin at or
// before offset.
func (tt *txnTracker) consumeUpTo(offset int64) {
	for len(tt.pending) > 0 && tt.pending[0].FirstOffset <= offset {
		t := tt.pending[0]
		tt.pending = tt.pending[1:]
		if _, ok := tt.aborted[t.ProducerID]; !ok {
			tt.aborted[t.ProducerID] = &txnState{txn: t, hold: t.LastOffset >= tt.upper}
		}
	}
}

// onBatch is shown a data batch. It returns the state of the aborted
// transaction the batch belongs to, nil if none (not transactional, or
// committed or still open).
func (tt *txnTracker) onBatch(h *BatchHeader) *txnState {
	tt.consumeUpTo(h.LastOffset())
	if !h.IsTransactional() {
		return nil
	}
	if st := tt.aborted[h.ProducerID]; st != nil {
		st.observed = true
		return st
	}
	tt.committed[h.ProducerID] = true
	return nil
}

// onControl is shown a control batch whose records section (uncompressed,
// as every control batch) is section. It reports whether the marker may
// be discarded (once past the delete horizon): an ABORT or COMMIT of a
// transaction of which this pass read no batch, or a control batch the
// cleaner emptied. It also records the index entry the cleaned segment
// keeps for an ABORT.
func (tt *txnTracker) onControl(h *BatchHeader, section []byte) bool {
	tt.consumeUpTo(h.LastOffset())
	key, _, ok := firstControlRecord(section)
	if !ok {
		return h.NumRecords == 0 // emptied by a cleaner: nothing to keep
	}
	typ, ok := markerType(key)
	if !ok {
		return false // not a marker we know: keep it
	}
	switch typ {
	case ControlAbort:
		st := tt.aborted[h.ProducerID]
		had := tt.committed[h.ProducerID]
		delete(tt.aborted, h.ProducerID)
		delete(tt.committed, h.ProducerID)
		if st != nil && (st.observed || st.hold) {
			tt.kept = append(tt.kept, st.txn)
			return false
		}
		// Data before an ABORT the index does not know of (Kafka would
		// drop the marker): keep the marker, the only sign left that
		// the data was aborted.
		return !had
	case ControlCommit:
		had := tt.committed[h.ProducerID]
		delete(tt.committed, h.ProducerID)
		return !had
	}
	return false
}

// takeKept returns the entries collected since the last call.
func (tt *txnTracker) takeKept() []AbortedTxn {
	k := tt.kept
	tt.kept = nil
	return k
}
