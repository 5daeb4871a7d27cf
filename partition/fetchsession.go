package partition

import (
	"fmt"

	"github.com/kafkazk/broker/cluster"
)

// PeekResult is what a Read of a partition would answer now, without its
// records: the offsets a fetch response carries and whether there are
// records to read.
type PeekResult struct {
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
	// Readable is true when the fetch offset is below the last offset the
	// fetcher may read (the LEO for a follower, the HW for a consumer, the
	// LSO for a read_committed one), so a Read would return records (or
	// none, for a leader-throttled follower over the quota).
	Readable bool
}

// PeekFetch answers, with one lock of tp's replica and no log read, what
// Read(tp, req) would: its offsets and whether it would return records,
// or its error (ErrNotLeader, ErrFencedLeaderEpoch, ErrUnknownLeaderEpoch,
// ErrOffsetOutOfRange, ErrUnknownTopicOrPartition). It records nothing: a
// follower's fetch state moves only with Read. An incremental fetch
// session (KIP-227) peeks at its partitions while it long-polls, and
// reads only those that changed.
func (m *Manager) PeekFetch(tp cluster.TopicPartition, req ReadRequest) (PeekResult, error) {
	r, err := m.get(tp)
	if err != nil {
		return PeekResult{}, err
	}
	return r.peekFetch(req)
}

// peekFetch: see Manager.PeekFetch.
func (r *Replica) peekFetch(req ReadRequest) (PeekResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.isLeaderLocked() {
		return PeekResult{}, ErrNotLeader
	}
	if err := r.checkLeaderEpochLocked(req.CurrentLeaderEpoch); err != nil {
		return PeekResult{}, err
	}
	res := PeekResult{HighWatermark: r.hw, LastStableOffset: r.lsoLocked(), LogStartOffset: r.log.LogStartOffset()}
	leo := r.log.LogEndOffset()
	if req.FetchOffset < res.LogStartOffset || req.FetchOffset > leo {
		return res, fmt.Errorf("%w: fetch offset %d outside [%d, %d]", ErrOffsetOutOfRange, req.FetchOffset, res.LogStartOffset, leo)
	}
	bound := res.HighWatermark
	switch {
	case req.ReplicaID >= 0:
		bound = leo
	case req.IsolationLevel == 1:
		bound = res.LastStableOffset
	}
	res.Readable = req.FetchOffset < bound
	return res, nil
}
