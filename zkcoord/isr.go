package zkcoord

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
)

// Leader-side ISR writes (Kafka 2.0–2.6, before AlterIsr): a partition
// leader writes its ISR changes to the state znode itself, conditional on
// the zkVersion it holds, and then tells the controller through a
// sequential /isr_change_notification/isr_change_ node.

// *Session is the broker's partition.StateWriter.
var _ partition.StateWriter = (*Session)(nil)

// WriteLeaderAndIsr writes st as tp's state znode, conditional on
// st.ZkVersion, with no controller-epoch check: the leader writes the
// controller epoch of the LeaderAndIsr that made it leader (ReplUtils
// updateLeaderAndIsr). It returns the new zkVersion.
//
// A write whose request or reply was lost with the connection has an
// unknown outcome, not a failed one: ZooKeeper may have applied it. As
// Kafka's retryRequestsUntilConnected, it waits for the session to be back
// and writes again, conditional on the same version; a BADVERSION then
// (or at the first try) makes it read the znode back, and if the stored
// leader, leader epoch, ISR and controller epoch are what it tried to
// write, an earlier attempt landed and that counts as success with the
// stored zkVersion (checkLeaderAndIsrZkData); otherwise the error is a
// *partition.StateConflictError carrying the stored state and its
// zkVersion (it wraps partition.ErrStateConflict): a leader whose own
// earlier write of its leader epoch landed unseen adopts it, any other
// leader is stale and must wait for the controller. A missing znode
// (topic deleted) is a plain conflict.
//
// After the session expired (a session other than the one the first
// attempt went out in; a write begun while go-zookeeper had no session
// yet counts from the first session it gets) it does not write again, it
// only reads back: the write landed (success) or the znode moved on
// (conflict), or it is unchanged and the error wraps zk.ErrSessionExpired
// (not written). A state without a zkVersion (below 0) is refused with
// partition.ErrStateConflict, never written unconditionally. The retries
// end with ctx, whose error then means the outcome is unknown, and with
// the Session (ErrClosed).
func (s *Session) WriteLeaderAndIsr(ctx context.Context, tp cluster.TopicPartition, st cluster.LeaderAndIsr) (int32, error) {
	p := partitionStatePath(tp.Topic, tp.Partition)
	if st.ZkVersion < 0 {
		// zkVersion -1 would make the setData unconditional and overwrite
		// whatever the controller wrote since.
		return -1, fmt.Errorf("write %s: zk_version %d is no version to write on: %w", p, st.ZkVersion, partition.ErrStateConflict)
	}
	if err := ctx.Err(); err != nil {
		return -1, err
	}
	// warn starts a warning with the write's fields, built only when one
	// is logged: the write itself is on every ISR change's path.
	warn := func() *zerolog.Event {
		return s.log.Warn().Str("topic", tp.Topic).Int32("partition", tp.Partition).Str("zk_path", p).
			Int32("zk_version", st.ZkVersion).Ints32("isr", st.Isr)
	}
	data := encodePartitionState(st)
	// sid is the session the first attempt went out in. It is 0 right
	// after an expiry, until go-zookeeper has a new session: then the
	// first session awaitSession returns is the one to compare with, and
	// only a later change is an expiry.
	sid := s.zk.c.SessionID()
	var (
		readBack bool  // a write may have landed: read the znode back
		expired  bool  // the session expired since the first attempt
		lost     error // the last connection error, when one is being retried
	)
	for {
		if lost != nil {
			now, err := s.awaitSession(ctx)
			if err != nil {
				return -1, fmt.Errorf("write %s at zk_version %d: outcome unknown after %v: %w", p, st.ZkVersion, lost, err)
			}
			switch {
			case sid == 0:
				sid = now
			case now != sid && !expired:
				expired, readBack = true, true
				warn().Int64("session_id", now).Int64("old_session_id", sid).
					Msg("ISR write lost its reply and the session expired; reading the state back")
			}
			lost = nil
		}
		if !readBack {
			stat, err := s.zk.Set(p, data, st.ZkVersion)
			switch {
			case err == nil:
				return stat.Version, nil
			case errors.Is(err, zk.ErrNoNode):
				return -1, fmt.Errorf("write %s: %w: the znode is gone", p, partition.ErrStateConflict)
			case errors.Is(err, zk.ErrBadVersion):
				readBack = true
			case errors.Is(err, zk.ErrClosing):
				return -1, fmt.Errorf("write %s: %w", p, ErrClosed)
			case outcomeUnknown(err):
				// Retryable: the request or its reply was lost with the
				// connection, so the write may or may not have landed.
				lost = err
				if errors.Is(err, zk.ErrSessionExpired) {
					expired, readBack = true, true
				}
				warn().Err(err).Msg("ISR write lost its connection; retrying once reconnected")
			default:
				return -1, fmt.Errorf("write %s at zk_version %d: %w", p, st.ZkVersion, err)
			}
			continue
		}
		cur, err := s.readLeaderAndIsr(p)
		switch {
		case err == nil:
		case errors.Is(err, zk.ErrNoNode):
			return -1, fmt.Errorf("write %s: %w: the znode is gone", p, partition.ErrStateConflict)
		case errors.Is(err, zk.ErrClosing):
			return -1, fmt.Errorf("write %s: %w", p, ErrClosed)
		case outcomeUnknown(err):
			lost = err // retryable as above: a read that lost its connection
			continue
		default:
			return -1, fmt.Errorf("write %s: read back: %w", p, err)
		}
		switch {
		case cur.Leader == st.Leader && cur.LeaderEpoch == st.LeaderEpoch && cur.ControllerEpoch == st.ControllerEpoch &&
			slices.Equal(cur.Isr, st.Isr):
			return cur.ZkVersion, nil
		case expired && cur.ZkVersion == st.ZkVersion:
			return -1, fmt.Errorf("write %s at zk_version %d: not written before the session expired: %w",
				p, st.ZkVersion, zk.ErrSessionExpired)
		}
		return -1, fmt.Errorf("write %s at zk_version %d: %w", p, st.ZkVersion, &partition.StateConflictError{Stored: cur})
	}
}

// readLeaderAndIsr reads and decodes a partition state znode.
func (s *Session) readLeaderAndIsr(p string) (cluster.LeaderAndIsr, error) {
	data, stat, err := s.zk.Get(p)
	if err != nil {
		return cluster.LeaderAndIsr{}, err
	}
	cur, err := decodePartitionState(data, stat.Version)
	if err != nil {
		return cluster.LeaderAndIsr{}, fmt.Errorf("decode %s: %w", p, err)
	}
	return cur, nil
}

// reconnectPoll is how often awaitSession looks at the connection state;
// it is also the least wait before a retry after a lost connection.
const reconnectPoll = 50 * time.Millisecond

// awaitSession waits until the client has a session again and returns its
// id; it ends with ctx or the Session. go-zookeeper announces state changes
// only to its event callback, which belongs to the session goroutine, so
// this looks at the state every reconnectPoll.
func (s *Session) awaitSession(ctx context.Context) (int64, error) {
	t := time.NewTicker(reconnectPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-s.done:
			return 0, ErrClosed
		case <-t.C:
		}
		if s.zk.c.State() == zk.StateHasSession {
			return s.zk.c.SessionID(), nil
		}
	}
}

// outcomeUnknown reports whether err from a ZooKeeper request means the
// connection failed around it, so the request may or may not have been
// applied: go-zookeeper fails the requests in flight when the connection
// drops (ErrConnectionClosed) or the session turns out expired
// (ErrSessionExpired), and the unsent ones when no server answers
// (ErrNoServer); a failed socket write surfaces as a net.Error.
func outcomeUnknown(err error) bool {
	var ne net.Error
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrSessionExpired) ||
		errors.Is(err, zk.ErrNoServer) || errors.Is(err, zk.ErrSessionMoved) || errors.As(err, &ne)
}

// ISR change propagation timing. Kafka checks every 2500 ms and writes
// when no change came for 5000 ms (or 60 s passed since the last write);
// we batch over a shorter window so other brokers' metadata converges
// faster, at the cost of a few more notification znodes under churn.
const (
	// isrChangeTick is how often pending changes are considered.
	isrChangeTick = 100 * time.Millisecond
	// isrChangeBlackout: write once no change came for this long.
	isrChangeBlackout = 500 * time.Millisecond
	// isrChangeMaxDelay: write at the latest this long after the first
	// pending change, even while changes keep coming.
	isrChangeMaxDelay = 5 * time.Second
)

// isrPropagation batches NotifyIsrChange calls.
type isrPropagation struct {
	mu          sync.Mutex // a leaf
	pending     map[cluster.TopicPartition]bool
	firstChange time.Time
	lastChange  time.Time
}

// NotifyIsrChange records that tp's ISR changed. The batch is written as
// one /isr_change_notification/isr_change_<seq> node once no change came
// for 500 ms (at most 5 s after the first), and the controller then sends
// UpdateMetadata for those partitions. It never blocks on ZooKeeper.
func (s *Session) NotifyIsrChange(tp cluster.TopicPartition) {
	now := time.Now()
	s.isr.mu.Lock()
	defer s.isr.mu.Unlock()
	if s.isr.pending == nil {
		s.isr.pending = map[cluster.TopicPartition]bool{}
	}
	if len(s.isr.pending) == 0 {
		s.isr.firstChange = now
	}
	s.isr.pending[tp] = true
	s.isr.lastChange = now
}

// propagateIsrChanges is the goroutine that writes the batches (RM
// maybePropagateIsrChanges). A failed write keeps the batch for the next tick.
func (s *Session) propagateIsrChanges() {
	tick := time.NewTicker(isrChangeTick)
	defer tick.Stop()
	for {
		select {
		case <-s.done:
			return
		case now := <-tick.C:
			s.isr.mu.Lock()
			due := len(s.isr.pending) > 0 &&
				(now.Sub(s.isr.lastChange) >= isrChangeBlackout || now.Sub(s.isr.firstChange) >= isrChangeMaxDelay)
			var tps []cluster.TopicPartition
			if due {
				for tp := range s.isr.pending {
					tps = append(tps, tp)
				}
				clear(s.isr.pending)
			}
			s.isr.mu.Unlock()
			if !due {
				continue
			}
			slices.SortFunc(tps, compareTP)
			if _, err := s.zk.Create(isrChangeNotificationSeqPrefix, encodeIsrChangeNotification(tps), zk.FlagSequence); err != nil {
				s.log.Warn().Err(err).Int("partitions", len(tps)).Msg("write isr change notification failed; will retry")
				s.isr.mu.Lock()
				if len(s.isr.pending) == 0 {
					s.isr.firstChange = now
				}
				for _, tp := range tps {
					s.isr.pending[tp] = true
				}
				s.isr.mu.Unlock()
			}
		}
	}
}

// ControlledShutdown moves leadership away from broker brokerID before it
// stops (Kafka's ControlledShutdown request, handled by the controller):
// for each replicated partition it leads with another live ISR member, the
// leader becomes the first such member in assignment order (leader epoch
// + 1, the broker leaves the ISR); for each partition it follows, it
// leaves the ISR and gets StopReplica (without delete). It returns the
// partitions it still leads (no other live ISR member); partitions with a
// single replica are never moved and never returned, as in Kafka. Later
// elections treat the broker as ineligible until it dies or registers
// again.
//
// It runs on the controller loop. It returns cluster.ErrNotController on
// a broker that is not the controller (or stops being it meanwhile),
// cluster.ErrStaleBrokerEpoch when brokerEpoch is not the broker's current
// registration, and cluster.ErrBrokerNotAvailable for an unregistered id.
func (s *Session) ControlledShutdown(ctx context.Context, brokerID int32, brokerEpoch int64) (remaining []cluster.TopicPartition, err error) {
	s.mu.Lock()
	c := s.ctrl
	s.mu.Unlock()
	if c == nil {
		return nil, fmt.Errorf("controlled shutdown of broker %d: %w", brokerID, ErrNotController)
	}
	type result struct {
		remaining []cluster.TopicPartition
		err       error
	}
	resc := make(chan result, 1)
	call := func() {
		r, err := c.controlledShutdown(brokerID, brokerEpoch)
		if errors.Is(err, ErrNotController) {
			c.checkFenced(err)
		}
		resc <- result{r, err}
	}
	notController := fmt.Errorf("controlled shutdown of broker %d: %w", brokerID, ErrNotController)
	select {
	case c.calls <- call:
	case <-c.quit:
		return nil, notController
	case <-c.exited:
		return nil, notController
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case r := <-resc:
		return r.remaining, r.err
	case <-c.exited:
		select {
		case r := <-resc:
			return r.remaining, r.err
		default:
			return nil, notController
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
