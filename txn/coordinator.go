package txn

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/internal/coordlog"
	"github.com/kafkazk/broker/partition"
)

func (c Config) withDefaults() Config {
	if c.NumPartitions <= 0 {
		c.NumPartitions = 50
	}
	if c.OffsetsTopicPartitions <= 0 {
		c.OffsetsTopicPartitions = 50
	}
	if c.MaxTimeout <= 0 {
		c.MaxTimeout = 15 * time.Minute
	}
	if c.IDExpiration <= 0 {
		c.IDExpiration = 7 * 24 * time.Hour
	}
	if c.AbortTimedOutInterval <= 0 {
		c.AbortTimedOutInterval = 10 * time.Second
	}
	if c.RemoveExpiredInterval <= 0 {
		c.RemoveExpiredInterval = time.Hour
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 5 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// partState is what the coordinator knows of one partition of Topic it
// leads.
type partState struct {
	// leaderEpoch is the coordinator epoch of the partition's transactions,
	// sent in every marker.
	leaderEpoch int32
	loaded      bool // false while loading
	// token changes on every become-leader, so a load, a write or a marker
	// fan-out finishing late can tell the partition was unloaded or
	// reloaded meanwhile.
	token uint64
	txns  map[string]*txnMeta
	// ctx is cancelled when the partition is unloaded: loads, state writes
	// waiting for replication and marker fan-outs of it stop.
	ctx    context.Context
	cancel context.CancelFunc
}

// Coordinator is the transaction coordinator for the transactional ids
// whose partition of Topic this broker leads. Safe for concurrent use.
type Coordinator struct {
	cfg Config
	log zerolog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	// markers counts running marker fan-outs (tests wait on it).
	markers *counter
	// sleep waits d or until ctx ends (false); tests replace it so that
	// retries need no real time.
	sleep func(ctx context.Context, d time.Duration) bool
	// onLoaded, if set (tests), is called when a load installed its
	// partition and started its completions and aborts.
	onLoaded func(p int32)
	// ticker makes the background loop's tickers; tests replace it.
	ticker func(d time.Duration) (<-chan time.Time, func())
	// completionWait bounds how long AddPartitions waits for a pending
	// transition or a prepared transaction's completion before answering
	// ErrConcurrentTransactions (completionWait; tests change it).
	completionWait time.Duration

	// mu guards everything below and every txnMeta. It is held across
	// Log.Append (so records of a transactional id are in the log in the
	// order of its transitions) but never across a wait for replication, a
	// producer id allocation or a marker write.
	mu sync.Mutex
	// routines starts the coordinator's goroutines (loads, the
	// background loop, marker fan-outs) until Close.
	routines   coordlog.Goroutines
	started    bool // Start was called
	parts      map[int32]*partState
	nextToken  uint64
	lastAbort  time.Time // when Tick's last timed-out abort was due, or New
	lastExpire time.Time // when Tick's last id expiry was due, or New
}

// New returns a coordinator that owns no partition until OnBecomeLeader.
func New(cfg Config) *Coordinator {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	now := cfg.Now()
	return &Coordinator{
		lastAbort:  now,
		lastExpire: now,
		cfg:        cfg,
		log:        cfg.Logger.With().Str("component", "txn").Logger(),
		ctx:        ctx,
		cancel:     cancel,
		sleep:      coordlog.Sleep,
		ticker:     newTicker,
		markers:    newCounter(),
		parts:      make(map[int32]*partState),

		completionWait: completionWait,
	}
}

// counter counts running goroutines of one kind. Unlike a
// sync.WaitGroup, wait may run while the count goes up from zero; it
// returns once the count is zero.
type counter struct {
	mu   sync.Mutex
	cond *sync.Cond
	n    int
}

func newCounter() *counter {
	k := &counter{}
	k.cond = sync.NewCond(&k.mu)
	return k
}

func (k *counter) add(d int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.n += d
	if k.n < 0 {
		panic("txn: counter below zero")
	}
	if k.n == 0 {
		k.cond.Broadcast()
	}
}

func (k *counter) wait() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for k.n > 0 {
		k.cond.Wait()
	}
}

// Start runs the background loop that aborts timed-out transactions on
// every tick of AbortTimedOutInterval and removes expired transactional
// ids on every tick of RemoveExpiredInterval (one ticker each, so neither
// pass is skipped when a tick is read late). Only the first call starts
// it.
func (c *Coordinator) Start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return
	}
	c.started = true
	c.routines.GoLocked(c.run)
}

// run is the background loop of Start.
func (c *Coordinator) run() {
	abort, stopAbort := c.ticker(c.cfg.AbortTimedOutInterval)
	defer stopAbort()
	expire, stopExpire := c.ticker(c.cfg.RemoveExpiredInterval)
	defer stopExpire()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-abort:
			c.abortTimedOut(-1)
		case <-expire:
			c.removeExpired()
		}
	}
}

func newTicker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// Close stops the background loop, loads and marker fan-outs, answers
// waiting requests ErrNotCoordinator, and returns when all goroutines
// ended. It is safe to call twice.
func (c *Coordinator) Close() error {
	c.routines.Close(&c.mu, func() {
		c.cancel()
		for p := range c.parts {
			c.unloadLocked(p)
		}
	})
	return nil
}

// PartitionFor is the partition of Topic holding transactionalID.
func (c *Coordinator) PartitionFor(transactionalID string) int32 {
	return PartitionFor(transactionalID, c.cfg.NumPartitions)
}

func (c *Coordinator) tp(p int32) cluster.TopicPartition {
	return cluster.TopicPartition{Topic: Topic, Partition: p}
}

// OnBecomeLeader is called when this broker became leader of partition p
// of Topic in leaderEpoch, which is the coordinator epoch of its
// transactions. It loads the partition in the background; meanwhile its
// transactional ids answer ErrCoordinatorLoadInProgress. A newer leader
// epoch of a partition already led reloads it (as Kafka's onElection), so
// markers carry the new coordinator epoch; the same or an older one is
// ignored.
func (c *Coordinator) OnBecomeLeader(p int32, leaderEpoch int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.routines.ClosedLocked() {
		return
	}
	if ps := c.parts[p]; ps != nil {
		if leaderEpoch <= ps.leaderEpoch {
			return
		}
		c.unloadLocked(p)
	}
	c.nextToken++
	ctx, cancel := context.WithCancel(c.ctx)
	ps := &partState{leaderEpoch: leaderEpoch, token: c.nextToken, txns: make(map[string]*txnMeta), ctx: ctx, cancel: cancel}
	c.parts[p] = ps
	c.log.Info().Int32("partition", p).Int32("leader_epoch", leaderEpoch).Msg("loading transaction state partition")
	c.routines.GoLocked(func() { c.load(p, ps) })
}

// OnBecomeFollower is called when this broker stops leading partition p of
// Topic: its transactional ids are dropped, their marker fan-outs stop and
// requests waiting for a state write answer ErrNotCoordinator.
func (c *Coordinator) OnBecomeFollower(p int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.parts[p] == nil {
		return
	}
	n := c.unloadLocked(p)
	c.log.Info().Int32("partition", p).Int("transactional_ids", n).Msg("unloaded transaction state partition")
}

// unloadLocked forgets partition p. Caller holds c.mu.
func (c *Coordinator) unloadLocked(p int32) int {
	ps := c.parts[p]
	if ps == nil {
		return 0
	}
	delete(c.parts, p)
	ps.cancel()
	return len(ps.txns)
}

// ownsLocked reports whether ps is still the loaded incarnation of p.
// Caller holds c.mu.
func (c *Coordinator) ownsLocked(p int32, ps *partState) bool {
	return !c.routines.ClosedLocked() && c.parts[p] == ps
}

// partLocked returns the loaded partition of transactionalID, or
// ErrNotCoordinator / ErrCoordinatorLoadInProgress. Caller holds c.mu.
func (c *Coordinator) partLocked(transactionalID string) (int32, *partState, error) {
	p := c.PartitionFor(transactionalID)
	ps := c.parts[p]
	switch {
	case c.routines.ClosedLocked() || ps == nil:
		return p, nil, fmt.Errorf("%w: partition %d of %s", ErrNotCoordinator, p, Topic)
	case !ps.loaded:
		return p, nil, fmt.Errorf("%w: partition %d of %s", ErrCoordinatorLoadInProgress, p, Topic)
	}
	return p, ps, nil
}

// load reads partition p from its log start up to the log end offset this
// broker had when it became leader, waiting for the high watermark to get
// there (so all it reads is committed), installs the transactional ids,
// then completes every prepared transaction (markers with the new
// coordinator epoch) and aborts Ongoing ones that timed out.
func (c *Coordinator) load(p int32, ps *partState) {
	start := time.Now()
	tp := c.tp(p)
	stale := func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return !c.ownsLocked(p, ps)
	}
	loaded := make(map[string]*txnMeta)
	end, ok := coordlog.Load{
		Log: c.cfg.Log, TP: tp, What: "transaction state partition", Logger: c.log,
		Walk: walkOptions, Stale: stale, Sleep: func(d time.Duration) bool { return c.sleep(ps.ctx, d) },
		Record: func(_ coordlog.Header, at int64, key, value []byte) {
			d, err := decodeRecord(key, value)
			if err != nil {
				c.log.Error().Err(err).Int32("partition", p).Int64("offset", at).Msg("skipping record of transaction state partition")
				return
			}
			switch {
			case d.meta == nil:
				delete(loaded, d.transactionalID)
			case d.meta.state == stateDead || d.meta.state == statePrepareEpochFence:
				// Never written by a coordinator (Dead is a tombstone, the
				// fence a pending state only).
				c.log.Error().Int32("partition", p).Int64("offset", at).Str("transactional_id", d.transactionalID).
					Stringer("state", d.meta.state).Msg("skipping transient state in transaction state partition")
			default:
				loaded[d.transactionalID] = d.meta
			}
		},
	}.Run()
	if !ok {
		return
	}

	c.mu.Lock()
	if !c.ownsLocked(p, ps) {
		c.mu.Unlock()
		return
	}
	ps.txns = loaded
	ps.loaded = true
	nowMs := c.cfg.Now().UnixMilli()
	ids := make([]string, 0, len(loaded))
	for id := range loaded {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	completing := 0
	for _, id := range ids {
		m := loaded[id]
		if m.state != statePrepareCommit && m.state != statePrepareAbort {
			continue
		}
		ct, err := m.prepareComplete(nowMs)
		if err != nil {
			c.log.Error().Err(err).Int32("partition", p).Str("transactional_id", id).Msg("cannot complete loaded transaction")
			continue
		}
		completing++
		c.startMarkersLocked(p, ps, m, m.state == statePrepareCommit, ct)
	}
	c.log.Info().Int32("partition", p).Int32("leader_epoch", ps.leaderEpoch).Int("transactional_ids", len(loaded)).
		Int("completing", completing).Int64("end_offset", end).Dur("took", time.Since(start)).
		Msg("loaded transaction state partition")
	c.mu.Unlock()
	c.abortTimedOut(p)
	if c.onLoaded != nil {
		c.onLoaded(p)
	}
}

// appendLocked appends records to partition p (acks -1) and returns a
// function that waits, without c.mu, for them to be replicated, bounded by
// WriteTimeout and the partition's leadership. Caller holds c.mu.
func (c *Coordinator) appendLocked(p int32, ps *partState, records []kv) (wait func() error) {
	tp := c.tp(p)
	res, err := c.cfg.Log.Append(tp, encodeBatch(records, c.cfg.Now().UnixMilli()), -1)
	if err != nil {
		err = fmt.Errorf("append to %s: %w", tp, storeError(err))
		return func() error { return err }
	}
	return func() error {
		ctx, cancel := context.WithTimeout(ps.ctx, c.cfg.WriteTimeout)
		defer cancel()
		if err := c.cfg.Log.WaitCommitted(ctx, tp, res.LastOffset, res.LeaderEpoch); err != nil {
			return fmt.Errorf("replicate %s at %d: %w", tp, res.LastOffset, storeError(err))
		}
		return nil
	}
}

// persistLocked writes t as the new state of m and waits for it without
// c.mu; once replicated it applies it to m (if m is still the cached state
// of the same incarnation), else it clears m's pending state. Caller holds
// c.mu (released during the wait and held again on return) and has
// prepared t, so m's pending state is t's. The coordinator never applies
// or answers success for a transition that was not replicated.
func (c *Coordinator) persistLocked(p int32, ps *partState, m *txnMeta, t transit) error {
	wait := c.appendLocked(p, ps, []kv{{txnKey(m.id), txnValue(t)}})
	c.mu.Unlock()
	err := wait()
	c.mu.Lock()
	return c.appliedLocked(p, ps, m, t, err)
}

// appliedLocked ends the write of t, prepared on m, whose wait returned
// err: applied to m if it was replicated and m is still the cached state
// of the same incarnation, else m's pending state cleared (if m is still
// cached). Caller holds c.mu.
func (c *Coordinator) appliedLocked(p int32, ps *partState, m *txnMeta, t transit, err error) error {
	current := c.ownsLocked(p, ps) && ps.txns[m.id] == m
	if err != nil {
		if current {
			m.clearPending()
		}
		return err
	}
	if !current {
		return fmt.Errorf("%w: partition %d of %s unloaded while writing %q", ErrNotCoordinator, p, Topic, m.id)
	}
	return m.completeTransition(t)
}

// storeError maps a failed write to the transaction log as Kafka's
// TransactionStateManager does: a timed-out write answers
// COORDINATOR_NOT_AVAILABLE so the client retries (it may still commit;
// the retry then finds the state it wrote or writes it again).
func storeError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, partition.ErrUnknownTopicOrPartition), errors.Is(err, partition.ErrNotEnoughReplicas),
		errors.Is(err, partition.ErrNotEnoughReplicasAfterAppend), errors.Is(err, partition.ErrRequestTimedOut),
		errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %w", ErrCoordinatorNotAvailable, err)
	case errors.Is(err, partition.ErrNotLeader), errors.Is(err, partition.ErrStorage),
		errors.Is(err, partition.ErrFencedLeaderEpoch), errors.Is(err, context.Canceled):
		return fmt.Errorf("%w: %w", ErrNotCoordinator, err)
	}
	// MESSAGE_TOO_LARGE and the rest: UNKNOWN_SERVER_ERROR, as Kafka.
	return err
}

// Tick runs what is due at Now: the abort of Ongoing transactions older
// than their timeout once an AbortTimedOutInterval passed since the last
// one was due, the removal of expired transactional ids once a
// RemoveExpiredInterval did. Tests call it with a fake clock (the
// background loop runs the passes on its tickers). A pass's due time
// advances by whole intervals, not to the time Tick read, so a Tick read
// a little late does not push the next pass back. It waits for the state
// writes it makes (not for markers).
func (c *Coordinator) Tick() {
	now := c.cfg.Now()
	c.mu.Lock()
	if c.routines.ClosedLocked() {
		c.mu.Unlock()
		return
	}
	abort := due(&c.lastAbort, c.cfg.AbortTimedOutInterval, now)
	expire := due(&c.lastExpire, c.cfg.RemoveExpiredInterval, now)
	c.mu.Unlock()
	if abort {
		c.abortTimedOut(-1)
	}
	if expire {
		c.removeExpired()
	}
}

// due reports whether a pass run every interval since *last is due at
// now, and if so moves *last on by the whole intervals elapsed (one pass
// however many were missed, keeping the schedule's phase).
func due(last *time.Time, interval time.Duration, now time.Time) bool {
	elapsed := now.Sub(*last)
	if elapsed < interval {
		return false
	}
	*last = last.Add(elapsed / interval * interval)
	return true
}
