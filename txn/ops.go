package txn

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
)

// allocate gets a fresh producer id. A failure is retriable for the client
// (Kafka's ZooKeeper block allocator fails with UNKNOWN_SERVER_ERROR, which
// a producer cannot retry; the block lives in ZooKeeper, which comes back).
func (c *Coordinator) allocate(ctx context.Context) (int64, error) {
	pid, _, err := c.cfg.ProducerIDs.InitProducerID(ctx)
	if err != nil {
		return -1, fmt.Errorf("%w: allocate producer id: %w", ErrCoordinatorNotAvailable, err)
	}
	if pid < 0 {
		return -1, fmt.Errorf("%w: allocator returned producer id %d", ErrCoordinatorNotAvailable, pid)
	}
	return pid, nil
}

func (c *Coordinator) nowMs() int64 { return c.cfg.Now().UnixMilli() }

// InitProducerID answers InitProducerId with a transactional id (Kafka's
// handleInitProducerId): a new id gets a fresh producer id at epoch 0; a
// known one in Empty, CompleteCommit or CompleteAbort gets its epoch bumped
// (a new producer id at epoch 0 once the epoch is exhausted); an Ongoing
// transaction of the previous instance is fenced (epoch bumped) and
// aborted, answering ErrConcurrentTransactions so the producer retries
// once the abort completed. req.ProducerID/Epoch (KIP-360) are checked:
// an older instance gets ErrProducerFenced, a retry of a bump that
// succeeded gets the same epoch again.
func (c *Coordinator) InitProducerID(ctx context.Context, req InitRequest) (producerID int64, producerEpoch int16, err error) {
	fail := func(err error) (int64, int16, error) { return -1, -1, err }
	id := req.TransactionalID
	if id == "" {
		return fail(fmt.Errorf("%w: empty transactional id", ErrInvalidRequest))
	}
	if req.TransactionTimeoutMs <= 0 || time.Duration(req.TransactionTimeoutMs)*time.Millisecond > c.cfg.MaxTimeout {
		return fail(fmt.Errorf("%w: %d ms (max %v)", ErrInvalidTransactionTimeout, req.TransactionTimeoutMs, c.cfg.MaxTimeout))
	}
	var expected *int16
	switch {
	case req.ProducerID == -1 && req.ProducerEpoch == -1:
	case req.ProducerID >= 0 && req.ProducerEpoch >= 0:
		e := req.ProducerEpoch
		expected = &e
	default:
		return fail(fmt.Errorf("%w: producer id %d with epoch %d", ErrInvalidRequest, req.ProducerID, req.ProducerEpoch))
	}
	spare := int64(-1) // a producer id allocated without the lock, not yet used
	for {
		c.mu.Lock()
		p, ps, err := c.partLocked(id)
		if err != nil {
			c.mu.Unlock()
			return fail(err)
		}
		m := ps.txns[id]
		if m == nil {
			if spare < 0 {
				c.mu.Unlock()
				if spare, err = c.allocate(ctx); err != nil {
					return fail(err)
				}
				continue
			}
			m = newMeta(id, spare, req.TransactionTimeoutMs, c.nowMs())
			spare = -1
			ps.txns[id] = m
		}
		if m.hasPending {
			err := fmt.Errorf("%w: %q is writing %s", ErrConcurrentTransactions, id, m.pending)
			c.mu.Unlock()
			return fail(err)
		}
		if expected != nil && !(m.producerEpoch == -1 || req.ProducerID == m.producerID ||
			(req.ProducerID == m.prevProducerID && epochExhausted(req.ProducerEpoch))) {
			err := fmt.Errorf("%w: %q has producer id %d, not %d", ErrProducerFenced, id, m.producerID, req.ProducerID)
			c.mu.Unlock()
			return fail(err)
		}
		switch m.state {
		case statePrepareCommit, statePrepareAbort:
			err := fmt.Errorf("%w: %q is in %s", ErrConcurrentTransactions, id, m.state)
			c.mu.Unlock()
			return fail(err)
		case stateEmpty, stateCompleteCommit, stateCompleteAbort:
			var t transit
			if epochExhausted(m.producerEpoch) && (expected == nil || *expected == m.producerEpoch) {
				if spare < 0 {
					c.mu.Unlock()
					if spare, err = c.allocate(ctx); err != nil {
						return fail(err)
					}
					continue
				}
				t, err = m.prepareProducerIDRotation(spare, req.TransactionTimeoutMs, c.nowMs(), expected != nil)
				spare = -1
			} else {
				t, err = m.prepareIncrementEpoch(req.TransactionTimeoutMs, expected, c.nowMs())
			}
			if err == nil {
				err = c.persistLocked(p, ps, m, t)
			}
			c.mu.Unlock()
			if err != nil {
				return fail(err)
			}
			c.log.Info().Str("transactional_id", id).Int64("producer_id", t.producerID).Int16("producer_epoch", t.producerEpoch).
				Int32("partition", p).Msg("initialized transactional id")
			return t.producerID, t.producerEpoch, nil
		case stateOngoing:
			// Fence the previous instance and abort its transaction; the
			// producer retries on CONCURRENT_TRANSACTIONS and then gets a
			// second bump (a new producer id if the fence exhausted it).
			ft, err := m.prepareFenceEpoch()
			if err == nil {
				err = c.endLocked(p, ps, m, ft.producerID, ft.producerEpoch, false, false)
			}
			c.mu.Unlock()
			if err != nil {
				return fail(err)
			}
			return fail(fmt.Errorf("%w: aborting the ongoing transaction of %q", ErrConcurrentTransactions, id))
		default:
			err := fmt.Errorf("%w: %q found in %s", errIllegalTransition, id, m.state)
			c.mu.Unlock()
			return fail(err)
		}
	}
}

// lookupLocked returns the loaded partition and state of id (nil if
// unknown). Caller holds c.mu.
func (c *Coordinator) lookupLocked(id string) (int32, *partState, *txnMeta, error) {
	if id == "" {
		return 0, nil, nil, fmt.Errorf("%w: empty transactional id", ErrInvalidRequest)
	}
	p, ps, err := c.partLocked(id)
	if err != nil {
		return p, nil, nil, err
	}
	return p, ps, ps.txns[id], nil
}

func perPartition(tps []cluster.TopicPartition, err error) map[cluster.TopicPartition]error {
	out := make(map[cluster.TopicPartition]error, len(tps))
	for _, tp := range tps {
		out[tp] = err
	}
	return out
}

// AddPartitions answers AddPartitionsToTxn (Kafka's
// handleAddPartitionsToTransaction): the partitions join the producer's
// transaction, which becomes Ongoing, once that is persisted. The error,
// if any, applies to every partition and is also in the map.
//
// While the producer's previous transaction completes (PrepareCommit or
// PrepareAbort: its markers and CompleteCommit/CompleteAbort are being
// written) or another transition of the id is being written, Kafka
// answers CONCURRENT_TRANSACTIONS at once and the producer retries after
// its backoff (20 ms in kgo and the Java producer). A producer that
// begins its next transaction right after EndTxn always gets there first,
// since EndTxn is answered at PrepareCommit: every back-to-back
// transaction would wait the client's backoff, however fast the markers
// are. So the request waits here, up to completionWait and the request's
// context, for that transition to end, and is then decided as the retry
// would be; ErrConcurrentTransactions after the wait as before. The
// outcome is the one a retry gets; only the time it is answered differs.
func (c *Coordinator) AddPartitions(ctx context.Context, transactionalID string, producerID int64, producerEpoch int16, tps []cluster.TopicPartition) (map[cluster.TopicPartition]error, error) {
	err := c.addPartitions(ctx, transactionalID, producerID, producerEpoch, tps)
	return perPartition(tps, err), err
}

// completionWait is how long AddPartitions waits for a pending transition
// to end before it answers ErrConcurrentTransactions: well above a
// completion's few milliseconds of marker and state replication, short
// enough that a completion stuck on an unavailable partition leader
// still answers a retriable error well within the request timeout. (Kafka
// 4.0 does the same for KIP-890 part 2's implicit add on produce,
// KAFKA-18654: it retries CONCURRENT_TRANSACTIONS on the broker, bounded
// by add.partitions.to.txn.retry.backoff.max.ms, rather than making the
// producer retry.)
const completionWait = 100 * time.Millisecond

func (c *Coordinator) addPartitions(ctx context.Context, id string, producerID int64, producerEpoch int16, tps []cluster.TopicPartition) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var timeout <-chan time.Time
	for {
		p, ps, m, err := c.lookupLocked(id)
		switch {
		case err != nil:
			return err
		case m == nil:
			return fmt.Errorf("%w: %q unknown", ErrInvalidProducerIDMapping, id)
		case m.producerID != producerID:
			return fmt.Errorf("%w: %q has producer id %d, not %d", ErrInvalidProducerIDMapping, id, m.producerID, producerID)
		case m.producerEpoch != producerEpoch:
			return fmt.Errorf("%w: %q is at epoch %d, not %d", ErrProducerFenced, id, m.producerEpoch, producerEpoch)
		case m.hasPending || m.state == statePrepareCommit || m.state == statePrepareAbort:
			if timeout == nil && c.completionWait > 0 {
				t := time.NewTimer(c.completionWait)
				defer t.Stop()
				timeout = t.C
			}
			if timeout != nil && c.awaitSettledLocked(ctx, ps, m, timeout) {
				continue
			}
			if m.hasPending {
				return fmt.Errorf("%w: %q is writing %s", ErrConcurrentTransactions, id, m.pending)
			}
			return fmt.Errorf("%w: %q is in %s", ErrConcurrentTransactions, id, m.state)
		}
		if m.state == stateOngoing {
			all := true
			for _, tp := range tps {
				if _, ok := m.partitions[tp]; !ok {
					all = false
					break
				}
			}
			if all {
				return nil
			}
		}
		t, err := m.prepareAddPartitions(tps, c.nowMs())
		if err != nil {
			return err
		}
		return c.persistLocked(p, ps, m, t)
	}
}

// awaitSettledLocked waits, without c.mu, until m's pending transition
// ends or ps is unloaded (true: decide again), or until ctx ends or
// timeout fires (false). Caller holds c.mu; it is held again on return.
func (c *Coordinator) awaitSettledLocked(ctx context.Context, ps *partState, m *txnMeta, timeout <-chan time.Time) bool {
	settled := m.settledCh()
	c.mu.Unlock()
	defer c.mu.Lock()
	select {
	case <-settled:
		return true
	case <-ps.ctx.Done():
		return true
	case <-ctx.Done():
		return false
	case <-timeout:
		return false
	}
}

// VerifyPartitions is AddPartitionsToTxn v4 VerifyOnly (KIP-890 part 1,
// Kafka's handleVerifyPartitionsInTransaction): nil for each partition in
// the producer's transaction, ErrInvalidTxnState for the others; an error
// returned applies to all (and is in the map too). It writes nothing.
func (c *Coordinator) VerifyPartitions(ctx context.Context, transactionalID string, producerID int64, producerEpoch int16, tps []cluster.TopicPartition) (map[cluster.TopicPartition]error, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, _, m, err := c.lookupLocked(transactionalID)
	switch {
	case err != nil:
	case m == nil:
		err = fmt.Errorf("%w: %q unknown", ErrInvalidProducerIDMapping, transactionalID)
	case m.producerID != producerID:
		err = fmt.Errorf("%w: %q has producer id %d, not %d", ErrInvalidProducerIDMapping, transactionalID, m.producerID, producerID)
	case m.producerEpoch != producerEpoch:
		err = fmt.Errorf("%w: %q is at epoch %d, not %d", ErrProducerFenced, transactionalID, m.producerEpoch, producerEpoch)
	case m.state == statePrepareCommit || m.state == statePrepareAbort:
		err = fmt.Errorf("%w: %q is in %s", ErrConcurrentTransactions, transactionalID, m.state)
	}
	if err != nil {
		return perPartition(tps, err), err
	}
	out := make(map[cluster.TopicPartition]error, len(tps))
	for _, tp := range tps {
		if _, ok := m.partitions[tp]; ok {
			out[tp] = nil
		} else {
			out[tp] = fmt.Errorf("%w: %s is not in the transaction of %q", ErrInvalidTxnState, tp, transactionalID)
		}
	}
	return out, nil
}

// AddOffsets answers AddOffsetsToTxn: the group's partition of
// __consumer_offsets (group.PartitionFor over OffsetsTopicPartitions)
// joins the transaction, as AddPartitions.
func (c *Coordinator) AddOffsets(ctx context.Context, transactionalID string, producerID int64, producerEpoch int16, groupID string) error {
	tp := cluster.TopicPartition{Topic: offsetsTopic, Partition: PartitionFor(groupID, c.cfg.OffsetsTopicPartitions)}
	return c.addPartitions(ctx, transactionalID, producerID, producerEpoch, []cluster.TopicPartition{tp})
}

// EndTxn answers EndTxn (Kafka's handleEndTransaction): PrepareCommit or
// PrepareAbort is persisted, then answered; the markers and the
// CompleteCommit/CompleteAbort follow in the background. A retry after
// completion answers nil for the same outcome and ErrInvalidTxnState for
// the other; during the markers, the same outcome answers
// ErrConcurrentTransactions.
func (c *Coordinator) EndTxn(ctx context.Context, transactionalID string, producerID int64, producerEpoch int16, commit bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ps, m, err := c.lookupLocked(transactionalID)
	if err != nil {
		return err
	}
	if m == nil {
		return fmt.Errorf("%w: %q unknown", ErrInvalidProducerIDMapping, transactionalID)
	}
	return c.endLocked(p, ps, m, producerID, producerEpoch, commit, true)
}

// endLocked is Kafka's endTransaction: from a client (EndTxn) the epoch
// must be the current one; from the coordinator (an epoch fence, pending
// PrepareEpochFence) it may be newer, and the abort then persists the
// bumped epoch. On success PrepareCommit/PrepareAbort is persisted and
// the markers are on their way. Caller holds c.mu (released while writing).
func (c *Coordinator) endLocked(p int32, ps *partState, m *txnMeta, producerID int64, producerEpoch int16, commit, fromClient bool) error {
	t, fence, done, err := c.prepareEndLocked(m, producerID, producerEpoch, commit, fromClient)
	if done {
		return err
	}
	wait := c.appendLocked(p, ps, []kv{{txnKey(m.id), txnValue(t)}})
	c.mu.Unlock()
	err = wait()
	c.mu.Lock()
	return c.endedLocked(p, ps, m, t, fence, err)
}

// prepareEndLocked checks an end of m's transaction and, for an Ongoing
// one, prepares its PrepareCommit/PrepareAbort (t, pending on m; fence
// tells an epoch fence's abort). done means there is nothing to write:
// err is the answer (nil for a retry of the completed outcome). Caller
// holds c.mu.
func (c *Coordinator) prepareEndLocked(m *txnMeta, producerID int64, producerEpoch int16, commit, fromClient bool) (t transit, fence, done bool, err error) {
	fencing := m.hasPending && m.pending == statePrepareEpochFence
	if fencing {
		defer func() {
			// A fence that did not get to its PrepareAbort leaves no
			// pending state behind.
			if m.hasPending && m.pending == statePrepareEpochFence {
				m.clearPending()
			}
		}()
	}
	id := m.id
	answer := func(err error) (transit, bool, bool, error) { return transit{}, false, true, err }
	switch {
	case m.producerID != producerID:
		return answer(fmt.Errorf("%w: %q has producer id %d, not %d", ErrInvalidProducerIDMapping, id, m.producerID, producerID))
	case (fromClient && producerEpoch != m.producerEpoch) || producerEpoch < m.producerEpoch:
		return answer(fmt.Errorf("%w: %q is at epoch %d, not %d", ErrProducerFenced, id, m.producerEpoch, producerEpoch))
	case m.hasPending && !fencing:
		return answer(fmt.Errorf("%w: %q is writing %s", ErrConcurrentTransactions, id, m.pending))
	}
	invalid := func() (transit, bool, bool, error) {
		return answer(fmt.Errorf("%w: %q is in %s, asked to %s", ErrInvalidTxnState, id, m.state, outcome(commit)))
	}
	switch m.state {
	case stateOngoing:
		to := statePrepareAbort
		if commit {
			to = statePrepareCommit
		}
		if !commit && fencing {
			// Persist the fence's bumped epoch with the abort. The bump
			// takes effect in memory now, fencing the old producer even if
			// the write fails (Kafka's hasFailedEpochFence then keeps the
			// next fence from bumping again).
			fence = true
			m.clearPending()
			m.producerEpoch = producerEpoch
			m.lastProducerEpoch = -1
		}
		t, err := m.prepareAbortOrCommit(to, c.nowMs())
		if err != nil {
			return answer(err)
		}
		return t, fence, false, nil
	case stateCompleteCommit:
		if commit {
			return answer(nil)
		}
		return invalid()
	case stateCompleteAbort:
		if !commit {
			return answer(nil)
		}
		return invalid()
	case statePrepareCommit:
		if commit {
			return answer(fmt.Errorf("%w: %q is completing its commit", ErrConcurrentTransactions, id))
		}
		return invalid()
	case statePrepareAbort:
		if !commit {
			return answer(fmt.Errorf("%w: %q is completing its abort", ErrConcurrentTransactions, id))
		}
		return invalid()
	case stateEmpty:
		return invalid()
	}
	return answer(fmt.Errorf("%w: %q found in %s", errIllegalTransition, id, m.state))
}

// endedLocked ends the write of t, m's PrepareCommit/PrepareAbort from
// prepareEndLocked, whose wait returned err: once replicated it is
// applied and the markers start; a failed fence's abort leaves the bumped
// epoch noted as a failed fence. Caller holds c.mu.
func (c *Coordinator) endedLocked(p int32, ps *partState, m *txnMeta, t transit, fence bool, err error) error {
	if err := c.appliedLocked(p, ps, m, t, err); err != nil {
		if fence && c.ownsLocked(p, ps) && ps.txns[m.id] == m {
			m.failedEpochFence = true
		}
		return err
	}
	ct, err := m.prepareComplete(c.nowMs())
	if err != nil {
		return err
	}
	c.log.Debug().Str("transactional_id", m.id).Int64("producer_id", m.producerID).Int16("producer_epoch", m.producerEpoch).
		Stringer("state", m.state).Msg("transaction prepared; writing markers")
	c.startMarkersLocked(p, ps, m, t.state == statePrepareCommit, ct)
	return nil
}

func outcome(commit bool) string {
	if commit {
		return "commit"
	}
	return "abort"
}

// Marker retry backoff: from markerBackoffMin doubling up to
// markerBackoffMax, per transaction.
const (
	markerBackoffMin = 100 * time.Millisecond
	markerBackoffMax = 5 * time.Second
)

// startMarkersLocked starts writing the markers of m's prepared
// transaction with the partition's coordinator epoch and then persisting
// ct (its CompleteCommit/CompleteAbort, pending on m). Caller holds c.mu.
func (c *Coordinator) startMarkersLocked(p int32, ps *partState, m *txnMeta, commit bool, ct transit) {
	mk := Markers{
		ProducerID: m.producerID, ProducerEpoch: m.producerEpoch, CoordinatorEpoch: ps.leaderEpoch,
		Commit: commit, Partitions: m.sortedPartitions(),
	}
	c.markers.add(1)
	if !c.routines.GoLocked(func() {
		defer c.markers.add(-1)
		c.sendMarkers(p, ps, m, mk, ct)
	}) {
		c.markers.add(-1)
	}
}

// deletedTopic reports a marker error that means the topic no longer
// exists: MarkerWriter returns cluster.ErrUnknownTopic only when the
// metadata has no such topic, and that partition's marker is dropped
// rather than retried (Kafka drops markers of partitions absent from its
// metadata cache). partition.ErrUnknownTopicOrPartition is not: a broker
// answering it may just not hold the replica yet (a leader move in
// flight), and dropping the marker would leave the transaction open on the
// partition, so it is retried like NOT_LEADER (Kafka retries
// UNKNOWN_TOPIC_OR_PARTITION too).
func deletedTopic(err error) bool {
	return errors.Is(err, cluster.ErrUnknownTopic)
}

// superseded reports a marker refusal that ends the fan-out, as Kafka's
// TransactionMarkerRequestCompletionHandler cancels a transaction's
// markers on either: the producer's epoch on the partition moved past
// this transaction's (ErrInvalidProducerEpoch), or a coordinator with a
// newer coordinator epoch wrote a marker for the producer there
// (ErrTransactionCoordinatorFenced: this coordinator was deposed, and the
// one that loaded the partition since completes the transaction).
// Retrying could never succeed.
func superseded(err error) bool {
	return errors.Is(err, partition.ErrInvalidProducerEpoch) || errors.Is(err, partition.ErrTransactionCoordinatorFenced)
}

// sendMarkers writes mk to every partition until each is written (or its
// topic deleted), retrying the rest with backoff, then persists ct,
// retrying that too until written. It stops when the partition is unloaded
// or m is no longer the cached state (another incarnation owns it).
func (c *Coordinator) sendMarkers(p int32, ps *partState, m *txnMeta, mk Markers, ct transit) {
	log := c.log.With().Str("transactional_id", m.id).Int64("producer_id", mk.ProducerID).
		Int16("producer_epoch", mk.ProducerEpoch).Int32("coordinator_epoch", mk.CoordinatorEpoch).Logger()
	current := func() bool {
		return c.ownsLocked(p, ps) && ps.txns[m.id] == m && m.hasPending && m.pending == ct.state
	}
	backoff := markerBackoffMin
	retry := func() bool {
		ok := c.sleep(ps.ctx, backoff)
		backoff = min(2*backoff, markerBackoffMax)
		return ok
	}
	remaining := mk.Partitions
	for len(remaining) > 0 {
		if ps.ctx.Err() != nil {
			return
		}
		send := mk
		send.Partitions = remaining
		res := c.cfg.Markers.WriteMarkers(ps.ctx, send)
		c.mu.Lock()
		if !current() {
			c.mu.Unlock()
			return
		}
		var again []cluster.TopicPartition
		for _, tp := range remaining {
			err := res[tp]
			switch {
			case err == nil:
				delete(m.partitions, tp)
			case deletedTopic(err):
				log.Info().Err(err).Str("topic", tp.Topic).Int32("partition", tp.Partition).
					Msg("dropping transaction marker of a deleted partition")
				delete(m.partitions, tp)
			case superseded(err):
				// Stop sending (a reload of the partition retries it).
				c.mu.Unlock()
				log.Error().Err(err).Str("topic", tp.Topic).Int32("partition", tp.Partition).
					Msg("transaction marker refused; cancelled sending this transaction's markers")
				return
			default:
				// Not leader, no replica here (yet), not enough
				// replicas, timeouts, unreachable brokers: the leader
				// may move or recover, so retry.
				again = append(again, tp)
			}
		}
		c.mu.Unlock()
		if len(again) > 0 {
			log.Debug().Int("partitions", len(again)).Dur("retry_in", backoff).Msg("retrying transaction markers")
			if !retry() {
				return
			}
		}
		remaining = again
	}
	for {
		c.mu.Lock()
		if !current() {
			c.mu.Unlock()
			return
		}
		wait := c.appendLocked(p, ps, []kv{{txnKey(m.id), txnValue(ct)}})
		c.mu.Unlock()
		err := wait()
		c.mu.Lock()
		if !current() {
			c.mu.Unlock()
			return
		}
		if err == nil {
			cerr := m.completeTransition(ct)
			c.mu.Unlock()
			if cerr != nil {
				log.Error().Err(cerr).Msg("completing transaction")
			}
			return
		}
		// Keep the pending completion and retry (Kafka retries
		// COORDINATOR_NOT_AVAILABLE; a lost leadership ends this loop
		// through the ownership check once the partition is unloaded).
		c.mu.Unlock()
		log.Warn().Err(err).Dur("retry_in", backoff).Msg("writing transaction completion; retrying")
		if !retry() {
			return
		}
	}
}

// abortTimedOut fences and aborts every Ongoing transaction (of partition
// only, or all if only < 0) older than its timeout (Kafka's
// abortTimedOutTransactions): the epoch bump makes the producer's next
// request fail ErrProducerFenced. The PrepareAbort records of all of them
// are appended first, then waited for together, so a pass takes one
// replication wait (at most WriteTimeout), not one per transaction; each
// abort still takes effect only once its own record is replicated.
func (c *Coordinator) abortTimedOut(only int32) {
	type cand struct {
		p   int32
		ps  *partState
		m   *txnMeta
		pid int64
	}
	nowMs := c.nowMs()
	var cands []cand
	c.mu.Lock()
	for p, ps := range c.parts {
		if (only >= 0 && p != only) || !ps.loaded {
			continue
		}
		for _, m := range ps.txns {
			if m.state == stateOngoing && !m.hasPending && m.startTs+int64(m.timeoutMs) < nowMs {
				cands = append(cands, cand{p, ps, m, m.producerID})
			}
		}
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].m.id < cands[j].m.id })
	type write struct {
		cand
		t     transit
		fence bool
		wait  func() error
		err   error
	}
	var writes []*write
	for _, k := range cands {
		m := k.m
		if !c.ownsLocked(k.p, k.ps) || k.ps.txns[m.id] != m || m.producerID != k.pid || m.hasPending || m.state != stateOngoing {
			continue
		}
		ft, err := m.prepareFenceEpoch()
		if err != nil {
			c.log.Warn().Err(err).Str("transactional_id", m.id).Msg("aborting timed-out transaction failed")
			continue
		}
		t, fence, done, err := c.prepareEndLocked(m, ft.producerID, ft.producerEpoch, false, false)
		if done {
			if err != nil {
				c.log.Warn().Err(err).Str("transactional_id", m.id).Msg("aborting timed-out transaction failed")
			}
			continue
		}
		writes = append(writes, &write{cand: k, t: t, fence: fence, wait: c.appendLocked(k.p, k.ps, []kv{{txnKey(m.id), txnValue(t)}})})
	}
	c.mu.Unlock()
	if len(writes) == 0 {
		return
	}
	var wg sync.WaitGroup
	for _, w := range writes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.err = w.wait()
		}()
	}
	wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range writes {
		if err := c.endedLocked(w.p, w.ps, w.m, w.t, w.fence, w.err); err != nil {
			c.log.Warn().Err(err).Str("transactional_id", w.m.id).Msg("aborting timed-out transaction failed")
			continue
		}
		c.log.Info().Str("transactional_id", w.m.id).Int64("producer_id", w.t.producerID).Int16("producer_epoch", w.t.producerEpoch).
			Msg("aborting timed-out transaction")
	}
}

// tombstoneBatchBytes bounds one batch of expiry tombstones, well below
// the default max.message.bytes (Kafka splits by the topic's limit).
const tombstoneBatchBytes = 256 << 10

// removeExpired writes a tombstone for every transactional id of a loaded
// partition that is not in a transaction and was last updated more than
// IDExpiration ago (Kafka's removeExpiredTransactionalIds), and drops it
// once the tombstone is replicated.
func (c *Coordinator) removeExpired() {
	nowMs := c.nowMs()
	horizon := nowMs - c.cfg.IDExpiration.Milliseconds()
	c.mu.Lock()
	defer c.mu.Unlock()
	ps := make([]int32, 0, len(c.parts))
	for p := range c.parts {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	for _, p := range ps {
		part := c.parts[p]
		if part == nil || !part.loaded {
			continue
		}
		ids := make([]string, 0, len(part.txns))
		for id, m := range part.txns {
			if !m.hasPending && m.state.expirationAllowed() && m.updateTs <= horizon {
				ids = append(ids, id)
			}
		}
		sort.Strings(ids)
		for len(ids) > 0 && c.ownsLocked(p, part) {
			var recs []kv
			var metas []*txnMeta
			var epochs []int16
			size := 0
			for len(ids) > 0 && size < tombstoneBatchBytes {
				m := part.txns[ids[0]]
				ids = ids[1:]
				// c.mu was released while the previous batch replicated:
				// the id may have been re-initialized or started a
				// transaction since it was chosen, so decide again (as
				// Kafka re-checks shouldExpire under the metadata lock).
				if m == nil || m.hasPending || !m.state.expirationAllowed() || m.updateTs > horizon {
					continue
				}
				if _, err := m.prepareDead(); err != nil {
					continue
				}
				k := txnKey(m.id)
				recs = append(recs, kv{key: k})
				metas = append(metas, m)
				epochs = append(epochs, m.producerEpoch)
				size += len(k) + 16
			}
			if len(recs) == 0 {
				continue
			}
			wait := c.appendLocked(p, part, recs)
			c.mu.Unlock()
			err := wait()
			c.mu.Lock()
			owned := c.ownsLocked(p, part)
			removed := 0
			for i, m := range metas {
				if !owned || part.txns[m.id] != m {
					continue
				}
				if err == nil && m.hasPending && m.pending == stateDead && m.producerEpoch == epochs[i] {
					delete(part.txns, m.id)
					removed++
				} else {
					m.clearPending()
				}
			}
			if err != nil {
				c.log.Warn().Err(err).Int32("partition", p).Int("transactional_ids", len(metas)).
					Msg("writing tombstones of expired transactional ids failed")
			} else {
				c.log.Info().Int32("partition", p).Int("transactional_ids", removed).Msg("removed expired transactional ids")
			}
		}
	}
}

// ListTransactions lists the transactional ids coordinated here (Kafka's
// listTransactionStates), sorted; empty filters match all, an unknown
// state name matches nothing, Dead ids are left out. While a partition
// loads it answers ErrCoordinatorLoadInProgress.
func (c *Coordinator) ListTransactions(states []string, producerIDs []int64) ([]Listing, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.routines.ClosedLocked() {
		return nil, ErrCoordinatorNotAvailable
	}
	for p, ps := range c.parts {
		if !ps.loaded {
			return nil, fmt.Errorf("%w: partition %d of %s", ErrCoordinatorLoadInProgress, p, Topic)
		}
	}
	wantState := make(map[txnState]bool)
	for _, s := range states {
		if st, ok := stateFromName(s); ok {
			wantState[st] = true
		}
	}
	wantPID := make(map[int64]bool)
	for _, pid := range producerIDs {
		wantPID[pid] = true
	}
	var out []Listing
	for _, ps := range c.parts {
		for id, m := range ps.txns {
			if m.state == stateDead || (len(producerIDs) > 0 && !wantPID[m.producerID]) || (len(states) > 0 && !wantState[m.state]) {
				continue
			}
			out = append(out, Listing{TransactionalID: id, ProducerID: m.producerID, State: m.state.String()})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TransactionalID < out[j].TransactionalID })
	return out, nil
}

// DescribeTransactions describes each id (Kafka's
// handleDescribeTransactions); Err is set for an id not coordinated here,
// still loading, or unknown (or being expired).
func (c *Coordinator) DescribeTransactions(ids []string) []Description {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Description, 0, len(ids))
	for _, id := range ids {
		d := Description{TransactionalID: id, StartTimestamp: -1, ProducerID: -1, ProducerEpoch: -1}
		_, _, m, err := c.lookupLocked(id)
		switch {
		case err != nil:
			d.Err = err
		case m == nil || m.state == stateDead:
			d.Err = fmt.Errorf("%w: %q", ErrTransactionalIDNotFound, id)
		default:
			d.State = m.state.String()
			d.TimeoutMs = m.timeoutMs
			d.StartTimestamp = m.startTs
			d.ProducerID = m.producerID
			d.ProducerEpoch = m.producerEpoch
			d.Partitions = m.sortedPartitions()
		}
		out = append(out, d)
	}
	return out
}
