package partition

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/logstore"
)

// fetchPhase is where a followed partition stands in its fetcher.
type fetchPhase int8

const (
	// phaseTruncating: the follower must first find where its log
	// diverges from the leader's (OffsetsForLeaderEpoch) and truncate.
	phaseTruncating fetchPhase = iota
	// phaseFetching: the follower fetches from its LEO.
	phaseFetching
	// phaseFailed: the leader fenced our epoch or the log failed; the
	// partition waits for a new partition state.
	phaseFailed
)

// fetchPartition is one partition a fetcher replicates.
type fetchPartition struct {
	tp          cluster.TopicPartition
	r           *Replica
	leaderEpoch int32
	phase       fetchPhase
	delayUntil  time.Time // no requests for the partition before this
}

// fetcher replicates every partition this broker follows on one leader
// broker, with one Fetch for all of them per round (Kafka's
// ReplicaFetcherThread with num.replica.fetchers=1).
type fetcher struct {
	m      *Manager
	leader int32
	logger zerolog.Logger

	mu    sync.Mutex
	parts map[cluster.TopicPartition]*fetchPartition
	// order is parts' entries sorted by topic-partition, rebuilt (when
	// nil) after a partition joins or leaves: a round walks it rather
	// than sort, or look each partition up, every time.
	order []*fetchPartition

	wake    chan struct{} // capacity 1: a partition was added
	stop    chan struct{} // closed when the fetcher is stopped
	ctx     context.Context
	cancel  context.CancelFunc
	running bool // a goroutine runs the loop; guarded by Manager.fetchMu
}

// partSnap is a fetchPartition as seen at the start of a round.
type partSnap struct {
	tp          cluster.TopicPartition
	r           *Replica
	leaderEpoch int32
}

func newFetcher(m *Manager, leader int32) *fetcher {
	ctx, cancel := context.WithCancel(m.ctx)
	return &fetcher{
		m: m, leader: leader,
		logger: m.log.With().Int32("leader", leader).Str("component", "fetcher").Logger(),
		parts:  map[cluster.TopicPartition]*fetchPartition{},
		wake:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
		ctx:    ctx, cancel: cancel,
	}
}

// run is the fetcher goroutine: rounds back to back while there is work,
// else waits for a new partition or the backoff. Every wait has f.stop.
func (f *fetcher) run() {
	for {
		select {
		case <-f.stop:
			return
		default:
		}
		if busy := f.runOnce(f.ctx); busy {
			continue
		}
		t := time.NewTimer(f.m.cfg.ReplicaFetchBackoff)
		select {
		case <-f.stop:
			t.Stop()
			return
		case <-f.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// halt stops the loop and cancels its requests. Caller holds Manager.fetchMu.
func (f *fetcher) halt() {
	select {
	case <-f.stop:
	default:
		close(f.stop)
	}
	f.cancel()
}

// ready snapshots the partitions whose delay has passed, by phase, in
// topic-partition order.
func (f *fetcher) ready(now time.Time) (truncating, fetching []partSnap) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.order == nil {
		f.order = make([]*fetchPartition, 0, len(f.parts))
		for _, p := range f.parts {
			f.order = append(f.order, p)
		}
		slices.SortFunc(f.order, func(a, b *fetchPartition) int {
			if a.tp.Topic != b.tp.Topic {
				if a.tp.Topic < b.tp.Topic {
					return -1
				}
				return 1
			}
			return int(a.tp.Partition - b.tp.Partition)
		})
	}
	for _, p := range f.order {
		if p.delayUntil.After(now) {
			continue
		}
		s := partSnap{tp: p.tp, r: p.r, leaderEpoch: p.leaderEpoch}
		switch p.phase {
		case phaseTruncating:
			truncating = append(truncating, s)
		case phaseFetching:
			fetching = append(fetching, s)
		}
	}
	return truncating, fetching
}

// update changes a partition's phase and delay if it is still followed in
// the same epoch (a newer state replaces the entry and wins).
func (f *fetcher) update(s partSnap, phase fetchPhase, delay time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.parts[s.tp]
	if p == nil || p.leaderEpoch != s.leaderEpoch {
		return
	}
	p.phase = phase
	if delay > 0 {
		p.delayUntil = f.m.cfg.Now().Add(delay)
	}
}

// runOnce does one round: truncation of Truncating partitions, then one
// Fetch for every partition ready to fetch. It reports whether it sent a
// Fetch that succeeded as a whole (the loop goes straight on), as opposed
// to idling or failing (the loop backs off).
func (f *fetcher) runOnce(ctx context.Context) bool {
	if f.m.cfg.LeaderClient == nil {
		return false
	}
	truncating, fetching := f.ready(f.m.cfg.Now())
	if len(truncating) > 0 {
		if !f.truncate(ctx, truncating) {
			return false
		}
		// Truncated partitions move on to fetching: look again.
		_, fetching = f.ready(f.m.cfg.Now())
	}
	if len(fetching) == 0 {
		return false
	}
	return f.fetch(ctx, fetching)
}

// truncate runs one OffsetsForLeaderEpoch exchange for the partitions in
// the Truncating state (KIP-101/279). It reports whether the request as a
// whole succeeded.
func (f *fetcher) truncate(ctx context.Context, parts []partSnap) bool {
	backoff := f.m.cfg.ReplicaFetchBackoff
	var queries []EpochQuery
	asked := map[cluster.TopicPartition]partSnap{}
	askedEpoch := map[cluster.TopicPartition]int32{}
	for _, s := range parts {
		epoch, ok := s.r.latestLocalEpoch()
		if !ok {
			// No epoch information at all: Kafka truncates to the HW.
			err := s.r.truncateToHW(s.leaderEpoch)
			f.afterTruncate(s, true, err)
			continue
		}
		queries = append(queries, EpochQuery{TopicPartition: s.tp, CurrentLeaderEpoch: s.leaderEpoch, LeaderEpoch: epoch})
		asked[s.tp] = s
		askedEpoch[s.tp] = epoch
	}
	if len(queries) == 0 {
		return true
	}
	answers, err := f.m.cfg.LeaderClient.OffsetsForLeaderEpoch(ctx, f.leader, queries)
	if err != nil {
		if ctx.Err() == nil {
			f.logger.Warn().Err(err).Int("partitions", len(queries)).Msg("offsets for leader epoch failed")
		}
		return false
	}
	for _, ans := range answers {
		s, ok := asked[ans.TopicPartition]
		if !ok {
			continue
		}
		delete(asked, ans.TopicPartition)
		if ans.Err != nil {
			f.partitionError(s, ans.Err)
			continue
		}
		done, err := s.r.truncateByEpoch(s.leaderEpoch, askedEpoch[s.tp], ans)
		f.afterTruncate(s, done, err)
	}
	for _, s := range asked {
		// The leader did not answer for it; try again after the backoff.
		f.update(s, phaseTruncating, backoff)
	}
	return true
}

// afterTruncate moves a partition on after a truncation step.
func (f *fetcher) afterTruncate(s partSnap, done bool, err error) {
	switch {
	case errors.Is(err, errStale):
	case err != nil:
		s.r.logger.Error().Err(err).Msg("follower truncation failed; waiting for a new partition state")
		f.update(s, phaseFailed, 0)
	case done:
		f.update(s, phaseFetching, 0)
	}
}

// fetch sends one Fetch for parts and applies the answers. It reports
// whether the request as a whole succeeded.
func (f *fetcher) fetch(ctx context.Context, parts []partSnap) bool {
	cfg := &f.m.cfg
	req := FetchRequest{ReplicaID: cfg.BrokerID, MaxWait: cfg.ReplicaFetchWaitMax,
		MinBytes: cfg.ReplicaFetchMinBytes, MaxBytes: cfg.ReplicaFetchResponseMaxBytes}
	// sent[i] was fetched at req.Partitions[i].FetchOffset.
	var sent []partSnap
	// throttled: the follower-throttled partitions sent; overQuota: the
	// follower quota, checked once per round when needed (-1: not yet).
	var throttled map[cluster.TopicPartition]bool
	overQuota := -1
	for _, s := range parts {
		pos := s.r.fetchState(s.leaderEpoch)
		if th, inSync := pos.throttled, pos.inSync; th {
			// Kafka's shouldFollowerThrottle: a throttled replica that
			// is not in sync waits while the quota is exceeded; the
			// others are fetched as usual.
			if overQuota < 0 {
				overQuota = 0
				if f.m.followerQuota.exceeded(cfg.Now()) {
					overQuota = 1
				}
			}
			if !inSync && overQuota == 1 {
				continue
			}
			if throttled == nil {
				throttled = map[cluster.TopicPartition]bool{}
			}
			throttled[s.tp] = true
		}
		off, start := pos.fetchOffset, pos.logStart
		if !pos.ok {
			continue
		}
		req.Partitions = append(req.Partitions, FetchPartition{TopicPartition: s.tp, FetchOffset: off,
			CurrentLeaderEpoch: s.leaderEpoch, LogStartOffset: start, MaxBytes: cfg.ReplicaFetchMaxBytes})
		sent = append(sent, s)
	}
	if len(sent) == 0 {
		return false
	}
	resp, err := cfg.LeaderClient.Fetch(ctx, f.leader, req)
	if err != nil {
		if ctx.Err() == nil {
			f.logger.Warn().Err(err).Int("partitions", len(sent)).Msg("replica fetch failed")
		}
		return false
	}
	if resp.Release != nil {
		// Appends copy the records to the log; nothing keeps them.
		defer resp.Release()
	}
	// The appends' wake-ups of long-polling fetches go out once, after
	// the last; the next Fetch goes out right after (the loop), carrying
	// the new fetch offsets that let the leader advance its HW.
	var wakes Wakes
	defer f.m.Wake(&wakes)
	for i, s := range sent {
		res, ok := resp.Partitions[s.tp]
		if !ok {
			// Left out of an incremental fetch session's response
			// (KIP-227): no records, no error, and the HW and log start
			// offset the leader last answered still hold.
			continue
		}
		off := req.Partitions[i].FetchOffset
		switch {
		case res.Err == nil:
			err := s.r.appendFromLeader(s.leaderEpoch, off, res, &wakes)
			if err == nil && throttled[s.tp] {
				f.m.followerQuota.record(cfg.Now(), int64(len(res.Records)))
			}
			if rm, ok := cfg.Metrics.(ReassignmentMetrics); ok && err == nil && len(res.Records) > 0 && s.r.isAdding(cfg.BrokerID) {
				rm.ReassignmentBytes(int64(len(res.Records)), true)
			}
			if err != nil && !errors.Is(err, errStale) {
				switch {
				case errors.Is(err, logstore.ErrOffsetMismatch):
					s.r.logger.Warn().Err(err).Int64("offset", off).Msg("leader batches do not line up with our log, truncating again")
					f.update(s, phaseTruncating, cfg.ReplicaFetchBackoff)
				case errors.Is(err, ErrStorage):
					s.r.logger.Error().Err(err).Msg("follower append failed; waiting for a new partition state")
					f.update(s, phaseFailed, 0)
				default:
					// Corrupt or invalid batches: retry the same offset later.
					s.r.logger.Warn().Err(err).Int64("offset", off).Msg("follower append failed")
					f.update(s, phaseFetching, cfg.ReplicaFetchBackoff)
				}
			}
		case errors.Is(res.Err, ErrOffsetOutOfRange):
			f.outOfRange(ctx, s, off, res)
		default:
			f.partitionError(s, res.Err)
		}
	}
	return true
}

// partitionError handles a per-partition error from the leader.
func (f *fetcher) partitionError(s partSnap, err error) {
	backoff := f.m.cfg.ReplicaFetchBackoff
	switch {
	case errors.Is(err, ErrFencedLeaderEpoch):
		// The leader is past our epoch: our state is stale, so wait for
		// the controller's next one rather than retry.
		s.r.logger.Warn().Err(err).Int32("leader_epoch", s.leaderEpoch).Msg("fenced by the leader; waiting for a new partition state")
		f.update(s, phaseFailed, 0)
	case errors.Is(err, ErrUnknownLeaderEpoch), errors.Is(err, ErrNotLeader), errors.Is(err, ErrUnknownTopicOrPartition):
		// The leader has not seen the new state yet, or moved on and our
		// new state is on its way: retryable after the backoff.
		s.r.logger.Debug().Err(err).Int32("leader_epoch", s.leaderEpoch).Msg("leader not ready, backing off")
		f.delay(s, backoff)
	default:
		s.r.logger.Warn().Err(err).Int32("leader_epoch", s.leaderEpoch).Msg("replica fetch error, backing off")
		f.delay(s, backoff)
	}
}

// delay keeps a partition's phase and postpones it.
func (f *fetcher) delay(s partSnap, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p := f.parts[s.tp]; p != nil && p.leaderEpoch == s.leaderEpoch {
		p.delayUntil = f.m.cfg.Now().Add(d)
	}
}

// outOfRange resolves OFFSET_OUT_OF_RANGE as Kafka's fetcher does
// (AbstractFetcherThread fetchOffsetAndTruncate, §4.4). The leader's LEO
// comes from OffsetsForLeaderEpoch for its current epoch (which answers
// the LEO); when it is below our fetch offset (an unclean election) we
// truncate to it. Otherwise our fetch offset is below the leader's log
// start, which comes from ListOffsets EARLIEST when the LeaderClient is an
// EarliestOffsetLister (the errored Fetch answer carries -1 on the wire),
// and we restart the log there.
func (f *fetcher) outOfRange(ctx context.Context, s partSnap, fetchOffset int64, res FetchPartitionResult) {
	answers, err := f.m.cfg.LeaderClient.OffsetsForLeaderEpoch(ctx, f.leader, []EpochQuery{{
		TopicPartition: s.tp, CurrentLeaderEpoch: s.leaderEpoch, LeaderEpoch: s.leaderEpoch}})
	leaderLEO := int64(-1)
	switch {
	case err != nil:
		s.r.logger.Warn().Err(err).Msg("asking the leader for its log end offset")
		f.delay(s, f.m.cfg.ReplicaFetchBackoff)
		return
	case len(answers) == 1 && answers[0].Err != nil:
		f.partitionError(s, answers[0].Err)
		return
	case len(answers) == 1 && answers[0].LeaderEpoch == s.leaderEpoch:
		leaderLEO = answers[0].EndOffset
	}
	leaderLogStart := res.LogStartOffset
	if lister, ok := f.m.cfg.LeaderClient.(EarliestOffsetLister); ok && (leaderLEO < 0 || leaderLEO >= fetchOffset) {
		leaderLogStart, err = lister.ListEarliestOffset(ctx, f.leader, s.tp, s.leaderEpoch)
		if err != nil {
			if ctx.Err() == nil {
				f.partitionError(s, fmt.Errorf("asking the leader for its log start offset: %w", err))
			}
			return
		}
	}
	if err := s.r.resetOutOfRange(s.leaderEpoch, fetchOffset, leaderLEO, leaderLogStart); err != nil && !errors.Is(err, errStale) {
		s.r.logger.Warn().Err(err).Msg("fetch offset out of range")
		f.delay(s, f.m.cfg.ReplicaFetchBackoff)
	}
}

// followPartition moves r to the fetcher of leader in the Truncating
// state, leaving any other fetcher; a negative leader only stops fetching.
func (m *Manager) followPartition(r *Replica, leader, leaderEpoch int32) {
	m.fetchMu.Lock()
	defer m.fetchMu.Unlock()
	m.unfollowLocked(r.tp)
	if leader < 0 || m.fetchClosed || r.isClosed() {
		return // a replica closed meanwhile (logdir.go) is fetched no more
	}
	if m.cfg.LeaderClient == nil {
		r.logger.Warn().Int32("leader", leader).Msg("no leader client configured; not replicating")
		return
	}
	f := m.fetchers[leader]
	if f == nil {
		f = newFetcher(m, leader)
		m.fetchers[leader] = f
	}
	f.mu.Lock()
	if p := f.parts[r.tp]; p != nil {
		// In place: f.order holds the entry.
		*p = fetchPartition{tp: r.tp, r: r, leaderEpoch: leaderEpoch, phase: phaseTruncating}
	} else {
		f.order = nil
		f.parts[r.tp] = &fetchPartition{tp: r.tp, r: r, leaderEpoch: leaderEpoch, phase: phaseTruncating}
	}
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
	if m.started && !f.running {
		f.running = true
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			f.run()
		}()
	}
}

// unfollow removes tp from its fetcher, stopping a fetcher left empty.
func (m *Manager) unfollow(tp cluster.TopicPartition) {
	m.fetchMu.Lock()
	defer m.fetchMu.Unlock()
	m.unfollowLocked(tp)
}

// unfollowLocked: see unfollow. Caller holds m.fetchMu.
func (m *Manager) unfollowLocked(tp cluster.TopicPartition) {
	for id, f := range m.fetchers {
		f.mu.Lock()
		_, ok := f.parts[tp]
		if ok {
			delete(f.parts, tp)
			f.order = nil
		}
		empty := len(f.parts) == 0
		f.mu.Unlock()
		if ok && empty {
			f.halt()
			delete(m.fetchers, id)
		}
	}
}

// startFetchersLocked starts the goroutines of fetchers created before
// Start. Caller holds m.fetchMu.
func (m *Manager) startFetchersLocked() {
	for _, f := range m.fetchers {
		if !f.running {
			f.running = true
			m.wg.Add(1)
			go func() {
				defer m.wg.Done()
				f.run()
			}()
		}
	}
}

// stopFetchers halts every fetcher for good. Caller then waits on m.wg.
func (m *Manager) stopFetchers() {
	m.fetchMu.Lock()
	defer m.fetchMu.Unlock()
	m.fetchClosed = true
	for id, f := range m.fetchers {
		f.halt()
		delete(m.fetchers, id)
	}
}

// replicateOnce runs one round of every fetcher in the calling goroutine,
// in leader order. Deterministic tests drive replication with it on a
// Manager that was never started, so no fetcher goroutine runs.
func (m *Manager) replicateOnce() {
	m.fetchMu.Lock()
	fs := make([]*fetcher, 0, len(m.fetchers))
	for _, f := range m.fetchers {
		fs = append(fs, f)
	}
	m.fetchMu.Unlock()
	slices.SortFunc(fs, func(a, b *fetcher) int { return int(a.leader - b.leader) })
	for _, f := range fs {
		f.runOnce(f.ctx)
	}
}
