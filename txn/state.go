package txn

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/kafkazk/broker/cluster"
)

// txnState is Kafka's TransactionState, with its ids as stored in the
// value's state byte.
type txnState int8

const (
	stateEmpty             txnState = 0
	stateOngoing           txnState = 1
	statePrepareCommit     txnState = 2
	statePrepareAbort      txnState = 3
	stateCompleteCommit    txnState = 4
	stateCompleteAbort     txnState = 5
	stateDead              txnState = 6
	statePrepareEpochFence txnState = 7
)

var stateNames = [...]string{
	"Empty", "Ongoing", "PrepareCommit", "PrepareAbort",
	"CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence",
}

func (s txnState) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("TransactionState(%d)", int8(s))
}

// stateFromName is Kafka's TransactionState.fromName.
func stateFromName(name string) (txnState, bool) {
	for i, n := range stateNames {
		if n == name {
			return txnState(i), true
		}
	}
	return 0, false
}

// validPrevious is Kafka's validPreviousStates of each state (transaction
// version 0, as ZooKeeper-mode 3.x runs).
var validPrevious = map[txnState][]txnState{
	stateEmpty:             {stateEmpty, stateCompleteCommit, stateCompleteAbort},
	stateOngoing:           {stateOngoing, stateEmpty, stateCompleteCommit, stateCompleteAbort},
	statePrepareCommit:     {stateOngoing},
	statePrepareAbort:      {stateOngoing, statePrepareEpochFence},
	stateCompleteCommit:    {statePrepareCommit},
	stateCompleteAbort:     {statePrepareAbort},
	stateDead:              {stateEmpty, stateCompleteAbort, stateCompleteCommit},
	statePrepareEpochFence: {stateOngoing},
}

func legalTransition(from, to txnState) bool {
	for _, s := range validPrevious[to] {
		if s == from {
			return true
		}
	}
	return false
}

// expirationAllowed: the states in which a transactional id may expire.
func (s txnState) expirationAllowed() bool {
	return s == stateEmpty || s == stateCompleteCommit || s == stateCompleteAbort
}

// epochExhausted is Kafka's isEpochExhausted: the epoch cannot be bumped
// for another transaction (one more bump is kept for fencing).
func epochExhausted(e int16) bool { return e >= math.MaxInt16-1 }

// errIllegalTransition is a broken state machine invariant: a transition
// Kafka's TransactionMetadata would refuse with IllegalStateException.
// protocol answers it UNKNOWN_SERVER_ERROR.
var errIllegalTransition = errors.New("txn: illegal transaction state transition")

// transit is a target state of a transactional id (Kafka's
// TxnTransitMetadata): written to the log first and applied to the
// txnMeta only once replicated.
type transit struct {
	producerID        int64
	prevProducerID    int64
	producerEpoch     int16
	lastProducerEpoch int16
	timeoutMs         int32
	state             txnState
	partitions        []cluster.TopicPartition // sorted
	startTs, updateTs int64
}

// txnMeta is the cached state of one transactional id (Kafka's
// TransactionMetadata). Guarded by Coordinator.mu.
type txnMeta struct {
	id                string
	producerID        int64
	prevProducerID    int64
	producerEpoch     int16
	lastProducerEpoch int16
	timeoutMs         int32
	state             txnState
	partitions        map[cluster.TopicPartition]struct{}
	startTs, updateTs int64

	// pending is the state a transition being written goes to; while set,
	// other requests answer CONCURRENT_TRANSACTIONS.
	pending    txnState
	hasPending bool
	// failedEpochFence: an epoch fence was attempted (the in-memory epoch
	// bumped) but its write failed, so the next fence must not bump again.
	failedEpochFence bool
	// settled, while requests wait for the pending transition to end
	// (awaitSettledLocked), is closed by the next clearPending.
	settled chan struct{}
}

func newMeta(id string, producerID int64, timeoutMs int32, nowMs int64) *txnMeta {
	return &txnMeta{
		id: id, producerID: producerID, prevProducerID: -1,
		producerEpoch: -1, lastProducerEpoch: -1, timeoutMs: timeoutMs,
		state: stateEmpty, partitions: make(map[cluster.TopicPartition]struct{}),
		startTs: -1, updateTs: nowMs,
	}
}

func (m *txnMeta) sortedPartitions() []cluster.TopicPartition {
	return sortTPs(keys(m.partitions))
}

func keys(s map[cluster.TopicPartition]struct{}) []cluster.TopicPartition {
	out := make([]cluster.TopicPartition, 0, len(s))
	for tp := range s {
		out = append(out, tp)
	}
	return out
}

func sortTPs(tps []cluster.TopicPartition) []cluster.TopicPartition {
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
	return tps
}

// clearPending ends the pending transition (written or not) and wakes
// the requests waiting for it.
func (m *txnMeta) clearPending() {
	m.hasPending = false
	if m.settled != nil {
		close(m.settled)
		m.settled = nil
	}
}

// settledCh is closed by the next clearPending.
func (m *txnMeta) settledCh() <-chan struct{} {
	if m.settled == nil {
		m.settled = make(chan struct{})
	}
	return m.settled
}

// prepareTransition checks that to is legal from the current state and no
// transition is pending, and marks it pending (Kafka's
// prepareTransitionTo).
func (m *txnMeta) prepareTransition(to txnState, producerID int64, epoch, lastEpoch int16, timeoutMs int32,
	partitions []cluster.TopicPartition, startTs, updateTs int64) (transit, error) {
	if m.hasPending {
		return transit{}, fmt.Errorf("%w: %q to %s while %s is pending", errIllegalTransition, m.id, to, m.pending)
	}
	if producerID < 0 {
		return transit{}, fmt.Errorf("%w: %q to %s with producer id %d", errIllegalTransition, m.id, to, producerID)
	}
	if to != stateDead && epoch < 0 {
		return transit{}, fmt.Errorf("%w: %q to %s with producer epoch %d", errIllegalTransition, m.id, to, epoch)
	}
	if !legalTransition(m.state, to) {
		return transit{}, fmt.Errorf("%w: %q from %s to %s", errIllegalTransition, m.id, m.state, to)
	}
	m.pending, m.hasPending = to, true
	return transit{
		producerID: producerID, prevProducerID: m.producerID,
		producerEpoch: epoch, lastProducerEpoch: lastEpoch, timeoutMs: timeoutMs,
		state: to, partitions: sortTPs(partitions), startTs: startTs, updateTs: updateTs,
	}, nil
}

// prepareFenceEpoch prepares PrepareEpochFence with the epoch bumped,
// unless an earlier fence bumped it without persisting (then the bumped
// epoch is reused). Only a bump can overflow: a failed fence from epoch
// 32766 left the epoch at 32767, and the retry must reuse it, else the
// transaction could never be aborted.
func (m *txnMeta) prepareFenceEpoch() (transit, error) {
	if !m.failedEpochFence && m.producerEpoch == math.MaxInt16 {
		return transit{}, fmt.Errorf("%w: cannot fence %q at epoch %d", errIllegalTransition, m.id, m.producerEpoch)
	}
	bumped := m.producerEpoch + 1
	if m.failedEpochFence {
		bumped = m.producerEpoch
	}
	return m.prepareTransition(statePrepareEpochFence, m.producerID, bumped, -1, m.timeoutMs,
		m.sortedPartitions(), m.startTs, m.updateTs)
}

// prepareIncrementEpoch prepares Empty with the epoch bumped for an
// InitProducerId; expected is the KIP-360 epoch the producer has (nil: a
// new producer instance).
func (m *txnMeta) prepareIncrementEpoch(timeoutMs int32, expected *int16, nowMs int64) (transit, error) {
	next, last := m.producerEpoch+1, int16(-1)
	if expected != nil {
		switch {
		case m.producerEpoch == -1 || *expected == m.producerEpoch:
			// The producer continues after an error and nobody else
			// initialized: bump, remembering the epoch it had.
			next, last = m.producerEpoch+1, m.producerEpoch
		case *expected == m.lastProducerEpoch:
			// A retry of a bump that succeeded: answer the same epoch.
			next, last = m.producerEpoch, m.lastProducerEpoch
		default:
			return transit{}, fmt.Errorf("%w: %q expected epoch %d, current %d, last %d",
				ErrProducerFenced, m.id, *expected, m.producerEpoch, m.lastProducerEpoch)
		}
	}
	if next != m.producerEpoch && epochExhausted(m.producerEpoch) {
		// The caller rotates the producer id when it may; a producer that
		// expects another epoch of an exhausted id is an older instance.
		if expected != nil {
			return transit{}, fmt.Errorf("%w: %q expected epoch %d of exhausted producer id %d",
				ErrProducerFenced, m.id, *expected, m.producerID)
		}
		return transit{}, fmt.Errorf("%w: no producer epoch left for %q (producer id %d)", errIllegalTransition, m.id, m.producerID)
	}
	return m.prepareTransition(stateEmpty, m.producerID, next, last, timeoutMs, nil, -1, nowMs)
}

// prepareProducerIDRotation prepares Empty under a new producer id, epoch 0,
// when the epoch of the current one is exhausted.
func (m *txnMeta) prepareProducerIDRotation(newProducerID int64, timeoutMs int32, nowMs int64, recordLastEpoch bool) (transit, error) {
	if m.state == stateOngoing || m.state == statePrepareAbort || m.state == statePrepareCommit {
		return transit{}, fmt.Errorf("%w: rotating the producer id of %q in %s", errIllegalTransition, m.id, m.state)
	}
	last := int16(-1)
	if recordLastEpoch {
		last = m.producerEpoch
	}
	return m.prepareTransition(stateEmpty, newProducerID, 0, last, timeoutMs, nil, -1, nowMs)
}

func (m *txnMeta) prepareAddPartitions(add []cluster.TopicPartition, nowMs int64) (transit, error) {
	start := m.startTs
	switch m.state {
	case stateEmpty, stateCompleteAbort, stateCompleteCommit:
		start = nowMs
	}
	all := make(map[cluster.TopicPartition]struct{}, len(m.partitions)+len(add))
	for tp := range m.partitions {
		all[tp] = struct{}{}
	}
	for _, tp := range add {
		all[tp] = struct{}{}
	}
	return m.prepareTransition(stateOngoing, m.producerID, m.producerEpoch, m.lastProducerEpoch, m.timeoutMs,
		keys(all), start, nowMs)
}

func (m *txnMeta) prepareAbortOrCommit(to txnState, nowMs int64) (transit, error) {
	return m.prepareTransition(to, m.producerID, m.producerEpoch, m.lastProducerEpoch, m.timeoutMs,
		m.sortedPartitions(), m.startTs, nowMs)
}

// prepareComplete prepares CompleteCommit/CompleteAbort after the markers
// of a PrepareCommit/PrepareAbort; its partition set is empty.
func (m *txnMeta) prepareComplete(nowMs int64) (transit, error) {
	to := stateCompleteAbort
	if m.state == statePrepareCommit {
		to = stateCompleteCommit
	}
	m.failedEpochFence = false
	return m.prepareTransition(to, m.producerID, m.producerEpoch, m.producerEpoch, m.timeoutMs, nil, m.startTs, nowMs)
}

func (m *txnMeta) prepareDead() (transit, error) {
	return m.prepareTransition(stateDead, m.producerID, m.producerEpoch, m.lastProducerEpoch, m.timeoutMs, nil, m.startTs, m.updateTs)
}

// completeTransition applies a transition whose record was replicated
// (Kafka's completeTransitionTo), checking it is the pending one and
// consistent with the current state.
func (m *txnMeta) completeTransition(t transit) error {
	if !m.hasPending || m.pending != t.state {
		return fmt.Errorf("%w: completing %q to %s, pending %v/%s", errIllegalTransition, m.id, t.state, m.hasPending, m.pending)
	}
	fail := func(why string) error {
		m.clearPending()
		return fmt.Errorf("%w: %q from %s to %s: %s", errIllegalTransition, m.id, m.state, t.state, why)
	}
	sameProducer := t.producerID == m.producerID && t.producerEpoch == m.producerEpoch
	switch t.state {
	case stateEmpty:
		bump := t.producerEpoch == m.producerEpoch+1 || (t.producerEpoch == 0 && t.producerID != m.producerID)
		if (t.producerEpoch != m.producerEpoch && !bump) || len(t.partitions) != 0 || t.startTs != -1 {
			return fail("bad epoch bump")
		}
		m.timeoutMs = t.timeoutMs
		m.producerEpoch = t.producerEpoch
		m.lastProducerEpoch = t.lastProducerEpoch
		m.producerID = t.producerID
		m.prevProducerID = t.prevProducerID
	case stateOngoing:
		if !sameProducer || t.timeoutMs != m.timeoutMs {
			return fail("producer or timeout changed")
		}
		next := make(map[cluster.TopicPartition]struct{}, len(t.partitions))
		for _, tp := range t.partitions {
			next[tp] = struct{}{}
		}
		for tp := range m.partitions {
			if _, ok := next[tp]; !ok {
				return fail("partitions removed")
			}
		}
		m.startTs = t.startTs
		m.partitions = next
	case statePrepareCommit, statePrepareAbort:
		if !sameProducer || t.timeoutMs != m.timeoutMs || t.startTs != m.startTs || len(t.partitions) != len(m.partitions) {
			return fail("producer, timeout, start or partitions changed")
		}
		for _, tp := range t.partitions {
			if _, ok := m.partitions[tp]; !ok {
				return fail("partitions changed")
			}
		}
	case stateCompleteCommit, stateCompleteAbort:
		if !sameProducer || len(t.partitions) != 0 || t.startTs != m.startTs {
			return fail("producer or start changed")
		}
		m.partitions = make(map[cluster.TopicPartition]struct{})
	case stateDead:
		if len(t.partitions) != 0 || m.producerEpoch != t.producerEpoch {
			return fail("producer changed")
		}
	default:
		return fail("not a persisted state")
	}
	m.state = t.state
	m.updateTs = t.updateTs
	m.clearPending()
	return nil
}
