package group

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

// Topic is the internal topic holding committed offsets and group metadata.
const Topic = coordlog.OffsetsTopic

// Log is how the coordinator reads and writes the partitions of Topic it
// leads. partition.Manager implements Append, WaitCommitted and Read;
// cmd/broker adds LogEndOffset from the manager's status.
type Log interface {
	// Append appends records (whole v2 batches) as leader of tp; with acks
	// -1 it first checks min.insync.replicas.
	Append(tp cluster.TopicPartition, records []byte, acks int16) (partition.AppendResult, error)
	// AppendWith is Append with options: the transactional offset
	// commits go through it with partition.OriginCoordinator (no sequence
	// checks), acks -1 and the request's verification guard (KIP-890).
	AppendWith(tp cluster.TopicPartition, records []byte, opts partition.AppendOptions) (partition.AppendResult, error)
	// WaitCommitted blocks until tp's high watermark passes lastOffset,
	// appended in leaderEpoch (AppendResult's); it fails if that
	// leadership is lost.
	WaitCommitted(ctx context.Context, tp cluster.TopicPartition, lastOffset int64, leaderEpoch int32) error
	// Read returns whole batches from req.FetchOffset, up to the high
	// watermark for ReplicaID -1.
	Read(tp cluster.TopicPartition, req partition.ReadRequest) (partition.ReadResult, error)
	// LogEndOffset is tp's log end offset on this broker.
	LogEndOffset(tp cluster.TopicPartition) (int64, error)
}

// Config configures a Coordinator. Zero durations take Kafka's defaults.
type Config struct {
	BrokerID int32
	// NumPartitions is offsets.topic.num.partitions.
	NumPartitions int32
	// InitialRebalanceDelay is group.initial.rebalance.delay.ms (3 s); a
	// negative value means none.
	InitialRebalanceDelay time.Duration
	// MinSessionTimeout, MaxSessionTimeout are
	// group.min.session.timeout.ms (6 s) and group.max.session.timeout.ms
	// (30 min).
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// OffsetsRetention is offsets.retention.minutes (7 days).
	OffsetsRetention time.Duration
	// OffsetsRetentionCheckInterval is offsets.retention.check.interval.ms
	// (10 min).
	OffsetsRetentionCheckInterval time.Duration
	// CompressionCodec is offsets.topic.compression.codec: Kafka's codec
	// id (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd) of every batch the
	// coordinator writes. Loading reads any codec.
	CompressionCodec int8
	// CommitTimeout is offsets.commit.timeout.ms (5 s): how long a write
	// to the offsets topic waits for its replicas.
	CommitTimeout time.Duration
	// TickInterval is how often deadlines (sessions, rebalances) are
	// checked by the background loop (100 ms).
	TickInterval time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	Log    Log
	Logger zerolog.Logger
}

func (c Config) withDefaults() Config {
	if c.NumPartitions <= 0 {
		c.NumPartitions = 50
	}
	if c.InitialRebalanceDelay == 0 {
		c.InitialRebalanceDelay = 3 * time.Second
	} else if c.InitialRebalanceDelay < 0 {
		c.InitialRebalanceDelay = 0
	}
	if c.MinSessionTimeout == 0 {
		c.MinSessionTimeout = 6 * time.Second
	}
	if c.MaxSessionTimeout == 0 {
		c.MaxSessionTimeout = 30 * time.Minute
	}
	if c.OffsetsRetention == 0 {
		c.OffsetsRetention = 7 * 24 * time.Hour
	}
	if c.OffsetsRetentionCheckInterval == 0 {
		c.OffsetsRetentionCheckInterval = 10 * time.Minute
	}
	if c.CommitTimeout == 0 {
		c.CommitTimeout = 5 * time.Second
	}
	if c.TickInterval == 0 {
		c.TickInterval = 100 * time.Millisecond
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// offsetMetadataMaxBytes is Kafka's offset.metadata.max.bytes default.
const offsetMetadataMaxBytes = 4096

// partState is what the coordinator knows of one partition of Topic.
type partState struct {
	leaderEpoch int32
	loaded      bool // false while loading
	// token changes on every become-leader and resignation, so a load or
	// a write finishing late can tell it is stale.
	token uint64
	// txnGroups is, per producer id, the groups of the partition that may
	// hold transactional offsets of that producer awaiting its marker
	// (Kafka's openGroupsForProducer). A group's entry goes when it no
	// longer holds offsets of the producer (completed, failed, tombstoned,
	// group removed); an entry may be stale, never missing.
	txnGroups map[int64]map[string]struct{}
	// deferred are the transaction completions CompleteTxn got while the
	// partition was loading, applied in order once the load installs (at
	// most maxDeferredCompletions, the oldest dropped beyond).
	deferred []txnCompletion
}

// Coordinator is the group coordinator for the groups whose partition of
// Topic this broker leads. Safe for concurrent use.
type Coordinator struct {
	cfg Config
	log zerolog.Logger

	ctx    context.Context
	cancel context.CancelFunc

	// mu guards everything below, every group and every member. It is
	// never held across a wait for replication or a channel send that can
	// block (waiter channels have room for their one result).
	mu sync.Mutex
	// routines starts the coordinator's goroutines (loads, the
	// background loop, writes nobody waits on) until Close.
	routines  coordlog.Goroutines
	parts     map[int32]*partState
	groups    map[string]*group
	nextToken uint64
	lastClean time.Time
}

// New returns a coordinator that owns no partition until OnBecomeLeader.
func New(cfg Config) *Coordinator {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Coordinator{
		cfg:    cfg,
		log:    cfg.Logger.With().Str("component", "group").Logger(),
		ctx:    ctx,
		cancel: cancel,
		parts:  make(map[int32]*partState),
		groups: make(map[string]*group),
	}
}

// Start runs the background loop that expires sessions, completes
// rebalances at their deadline and expires offsets.
func (c *Coordinator) Start() {
	c.routines.Go(&c.mu, func() {
		t := time.NewTicker(c.cfg.TickInterval)
		defer t.Stop()
		for {
			select {
			case <-c.ctx.Done():
				return
			case <-t.C:
				c.Tick()
			}
		}
	})
}

// Close stops the background work and loads, answers every waiting
// request with ErrNotCoordinator, and returns when all goroutines ended.
// It is safe to call twice.
func (c *Coordinator) Close() error {
	c.routines.Close(&c.mu, func() {
		c.cancel()
		for p := range c.parts {
			c.unloadLocked(p)
		}
	})
	return nil
}

// PartitionFor is the partition of Topic holding groupID:
// abs(Java's String.hashCode) mod offsets.topic.num.partitions, as Kafka's
// Utils.abs (which maps MinInt32 to 0) computes it.
func (c *Coordinator) PartitionFor(groupID string) int32 {
	return PartitionFor(groupID, c.cfg.NumPartitions)
}

// PartitionFor computes a group's partition for n partitions of Topic
// (coordlog.PartitionFor, shared with txn; 0 for n <= 0).
func PartitionFor(groupID string, n int32) int32 {
	return coordlog.PartitionFor(groupID, n)
}

func (c *Coordinator) tp(p int32) cluster.TopicPartition {
	return cluster.TopicPartition{Topic: Topic, Partition: p}
}

// checkLocked returns the state of groupID's partition if this broker
// coordinates it and has loaded it. Caller holds c.mu.
func (c *Coordinator) checkLocked(groupID string) (*partState, error) {
	ps := c.parts[c.PartitionFor(groupID)]
	switch {
	case c.routines.ClosedLocked() || ps == nil:
		return nil, ErrNotCoordinator
	case !ps.loaded:
		return nil, ErrCoordinatorLoadInProgress
	}
	return ps, nil
}

// OnBecomeLeader is called when this broker becomes leader of partition p
// of Topic in leaderEpoch: it loads the partition's groups and offsets in
// the background, answering COORDINATOR_LOAD_IN_PROGRESS meanwhile. A
// repeated call for a partition already led (same or newer epoch without a
// resignation in between) only records the epoch.
func (c *Coordinator) OnBecomeLeader(p int32, leaderEpoch int32) {
	c.mu.Lock()
	if c.routines.ClosedLocked() {
		c.mu.Unlock()
		return
	}
	if ps := c.parts[p]; ps != nil {
		if leaderEpoch > ps.leaderEpoch {
			ps.leaderEpoch = leaderEpoch
		}
		c.mu.Unlock()
		return
	}
	c.nextToken++
	ps := &partState{leaderEpoch: leaderEpoch, token: c.nextToken}
	c.parts[p] = ps
	token := ps.token
	c.mu.Unlock()
	c.log.Info().Int32("partition", p).Int32("leader_epoch", leaderEpoch).Msg("loading offsets partition")
	c.routines.Go(&c.mu, func() { c.load(p, token) })
}

// OnBecomeFollower is called when this broker stops leading partition p
// of Topic (it became a follower, or the replica was stopped): its groups
// are unloaded and their waiting requests answered NOT_COORDINATOR.
func (c *Coordinator) OnBecomeFollower(p int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.parts[p] == nil {
		return
	}
	n := c.unloadLocked(p)
	c.log.Info().Int32("partition", p).Int("groups", n).Msg("unloaded offsets partition")
}

// unloadLocked forgets partition p and its groups. Caller holds c.mu.
func (c *Coordinator) unloadLocked(p int32) int {
	delete(c.parts, p)
	n := 0
	for id, g := range c.groups {
		if g.partition != p {
			continue
		}
		g.state = stateDead
		g.failWaitersLocked(ErrNotCoordinator)
		delete(c.groups, id)
		n++
	}
	return n
}

// stillOwnedLocked reports whether partition p is led in the incarnation
// token. Caller holds c.mu.
func (c *Coordinator) stillOwnedLocked(p int32, token uint64) bool {
	ps := c.parts[p]
	return ps != nil && ps.token == token && !c.routines.ClosedLocked()
}

// load reads partition p from its log start up to the log end offset this
// broker had when it became leader (waiting for the high watermark to pass
// it, so that everything it reads is committed), builds the groups and
// offsets, and installs them.
func (c *Coordinator) load(p int32, token uint64) {
	start := c.cfg.Now()
	tp := c.tp(p)
	stale := func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return !c.stillOwnedLocked(p, token)
	}
	l := newLoader()
	end, ok := coordlog.Load{
		Log: c.cfg.Log, TP: tp, What: "offsets partition", Logger: c.log,
		Walk: walkOptions, Stale: stale, Sleep: c.sleep,
		Record: func(h coordlog.Header, at int64, key, value []byte) {
			if err := l.applyRecord(h, at, key, value); err != nil {
				c.log.Error().Err(err).Int32("partition", p).Msg("skipping record of offsets partition")
			}
		},
	}.Run()
	if !ok {
		return
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.stillOwnedLocked(p, token) {
		return
	}
	now := c.cfg.Now()
	groups := l.build(p, now)
	ps := c.parts[p]
	for id, g := range groups {
		c.groups[id] = g
		for pid := range g.txnOffsets {
			ps.trackTxn(pid, id)
		}
	}
	ps.loaded = true
	// Markers written and committed while loading: apply them now, in
	// order, each to the pending offsets below it. One appended before
	// end was also read by the load, and finds nothing left below it.
	deferred := ps.deferred
	ps.deferred = nil
	for _, d := range deferred {
		c.completeTxnLocked(p, ps, d.producerID, d.markerOffset, d.commit)
	}
	c.log.Info().Int32("partition", p).Int("groups", len(groups)).Int64("end_offset", end).
		Dur("took", time.Since(start)).Msg("loaded offsets partition")
}

// sleep waits d or until Close; false means closed.
func (c *Coordinator) sleep(d time.Duration) bool {
	return coordlog.Sleep(c.ctx, d)
}

// writeLocked appends records to partition p of Topic (acks=all) under
// c.mu and returns a function that waits, without the lock, for them to
// commit, and the offset the batch was appended at (-1 if the append
// failed: wait then returns its error). Caller holds c.mu.
func (c *Coordinator) writeLocked(p int32, records []kv) (wait func(ctx context.Context) error, appendedAt int64) {
	return c.appendLocked(p, records, nil)
}

// producerRef is the producer of a transactional offset commit, with
// the verification guard of its request.
type producerRef struct {
	id    int64
	epoch int16
	guard uint64
}

// appendLocked is writeLocked for a plain batch (txn nil, through
// Log.Append) or a transactional one of producer txn (through
// Log.AppendWith with partition.OriginCoordinator, as Kafka's
// appendForGroup). Caller holds c.mu.
func (c *Coordinator) appendLocked(p int32, records []kv, txn *producerRef) (wait func(ctx context.Context) error, appendedAt int64) {
	tp := c.tp(p)
	var batch []byte
	var err error
	if txn == nil {
		batch, err = encodeBatch(records, c.cfg.Now(), c.cfg.CompressionCodec)
	} else {
		batch, err = encodeTxnBatch(records, c.cfg.Now(), c.cfg.CompressionCodec, txn.id, txn.epoch)
	}
	if err != nil {
		err = fmt.Errorf("%w: %w", ErrCoordinatorNotAvailable, err)
		return func(context.Context) error { return err }, -1
	}
	var res partition.AppendResult
	if txn == nil {
		res, err = c.cfg.Log.Append(tp, batch, -1)
	} else {
		res, err = c.cfg.Log.AppendWith(tp, batch, partition.AppendOptions{Acks: -1, Origin: partition.OriginCoordinator,
			VerificationGuard: txn.guard})
	}
	if err != nil {
		err = storeError(err)
		return func(context.Context) error { return err }, -1
	}
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, c.cfg.CommitTimeout)
		defer cancel()
		return storeError(c.cfg.Log.WaitCommitted(ctx, tp, res.LastOffset, res.LeaderEpoch))
	}, res.BaseOffset
}

// writeAsyncLocked writes records and waits for them in the background,
// logging a failure: for writes nobody waits on (an empty group's new
// generation, tombstones), as Kafka's callbacks for them only log. Caller
// holds c.mu.
func (c *Coordinator) writeAsyncLocked(p int32, records []kv, what string) {
	if len(records) == 0 {
		return
	}
	wait, _ := c.writeLocked(p, records)
	c.routines.GoLocked(func() {
		if err := wait(c.ctx); err != nil && c.ctx.Err() == nil {
			c.log.Warn().Err(err).Int32("partition", p).Str("write", what).Msg("write to offsets topic failed")
		}
	})
}

// storeError maps a failed write to the offsets topic to what Kafka's
// GroupMetadataManager answers for it.
func storeError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, partition.ErrUnknownTopicOrPartition), errors.Is(err, partition.ErrNotEnoughReplicas),
		errors.Is(err, partition.ErrNotEnoughReplicasAfterAppend):
		return fmt.Errorf("%w: %w", ErrCoordinatorNotAvailable, err)
	case errors.Is(err, partition.ErrNotLeader), errors.Is(err, partition.ErrStorage),
		errors.Is(err, partition.ErrFencedLeaderEpoch):
		return fmt.Errorf("%w: %w", ErrNotCoordinator, err)
	case errors.Is(err, partition.ErrMessageTooLarge), errors.Is(err, partition.ErrRecordListTooLarge):
		return fmt.Errorf("%w: %w", ErrInvalidCommitOffsetSize, err)
	case errors.Is(err, partition.ErrRequestTimedOut), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %w", ErrRequestTimedOut, err)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("%w: %w", ErrNotCoordinator, err)
	}
	return err
}

// Tick completes what is due at now: member sessions that expired,
// rebalances whose deadline passed, pending (KIP-394) member ids never
// used, and, every OffsetsRetentionCheckInterval, expired offsets. The
// background loop calls it; tests call it with a fake clock.
func (c *Coordinator) Tick() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.routines.ClosedLocked() {
		return
	}
	now := c.cfg.Now()
	ids := make([]string, 0, len(c.groups))
	for id := range c.groups {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if g := c.groups[id]; g != nil {
			c.tickGroupLocked(g, now)
		}
	}
	if now.Sub(c.lastClean) >= c.cfg.OffsetsRetentionCheckInterval {
		c.lastClean = now
		c.expireOffsetsLocked(now)
	}
}
