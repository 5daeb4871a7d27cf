package group

import (
	"context"
	"sort"

	"github.com/kafkazk/broker/cluster"
)

// TxnCommitRequest is one TxnOffsetCommit: offsets committed as part of
// the producer's transaction, visible only once its COMMIT marker is
// written to the group's partition of Topic.
type TxnCommitRequest struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	Group           string
	// Generation is -1 when not checked (TxnOffsetCommit < v3, KIP-447).
	Generation int32
	// MemberID is "" when not checked.
	MemberID   string
	InstanceID *string
	Offsets    map[cluster.TopicPartition]CommitOffset
	// VerificationGuard is the guard of the group's partition of Topic
	// that protocol verified with the transaction coordinator (KIP-890,
	// partition.Manager.TxnVerificationGuard), passed to Log.AppendWith;
	// 0 when none was needed or verification is off.
	VerificationGuard uint64
}

// txnOffset is one offset of a transactional commit awaiting its
// transaction's marker, with the offset in Topic of its batch.
type txnOffset struct {
	Offset
	appendedAt int64
}

// txnCompletion is one CompleteTxn deferred while its partition loads.
type txnCompletion struct {
	producerID   int64
	markerOffset int64
	commit       bool
}

// maxDeferredCompletions bounds partState.deferred: far more markers
// than a load's duration normally sees. Beyond it the oldest is dropped
// (its offsets stay pending until the partition's next load reads the
// marker), logged as an error.
const maxDeferredCompletions = 100000

// trackTxn records that groupID may hold transactional offsets of
// producerID. Caller holds Coordinator.mu.
func (ps *partState) trackTxn(producerID int64, groupID string) {
	if ps.txnGroups == nil {
		ps.txnGroups = map[int64]map[string]struct{}{}
	}
	m := ps.txnGroups[producerID]
	if m == nil {
		m = map[string]struct{}{}
		ps.txnGroups[producerID] = m
	}
	m[groupID] = struct{}{}
}

// untrackTxnLocked forgets, in partition p's txnGroups, groupID for each
// of producerIDs of which the group of that id no longer holds pending
// offsets (none, if the group is gone). Caller holds Coordinator.mu.
func (c *Coordinator) untrackTxnLocked(p int32, groupID string, producerIDs []int64) {
	ps := c.parts[p]
	if ps == nil {
		return
	}
	cur := c.groups[groupID]
	if cur != nil && cur.partition != p {
		cur = nil
	}
	for _, pid := range producerIDs {
		ids := ps.txnGroups[pid]
		if ids == nil || (cur != nil && len(cur.txnOffsets[pid]) > 0) {
			continue
		}
		delete(ids, groupID)
		if len(ids) == 0 {
			delete(ps.txnGroups, pid)
		}
	}
}

// addTxnOffset records o as producerID's pending offset of tp, replacing
// an earlier one of the same transaction. Caller holds Coordinator.mu.
func (g *group) addTxnOffset(producerID int64, tp cluster.TopicPartition, o txnOffset) {
	m := g.txnOffsets[producerID]
	if m == nil {
		m = map[cluster.TopicPartition]txnOffset{}
		g.txnOffsets[producerID] = m
	}
	m[tp] = o
}

// dropTxnOffsets drops every producer's pending offset of tp, as a
// tombstone of tp's key does, and returns the producers left without
// pending offsets in g. Caller holds Coordinator.mu.
func (g *group) dropTxnOffsets(tp cluster.TopicPartition) (emptied []int64) {
	for pid, m := range g.txnOffsets {
		if _, ok := m[tp]; !ok {
			continue
		}
		delete(m, tp)
		if len(m) == 0 {
			delete(g.txnOffsets, pid)
			emptied = append(emptied, pid)
		}
	}
	return emptied
}

// txnOffsetsOf returns, per producer, the pending offsets of tp (nil if
// none). Caller holds Coordinator.mu.
func (g *group) txnOffsetsOf(tp cluster.TopicPartition) map[int64]txnOffset {
	var out map[int64]txnOffset
	for pid, m := range g.txnOffsets {
		if o, ok := m[tp]; ok {
			if out == nil {
				out = map[int64]txnOffset{}
			}
			out[pid] = o
		}
	}
	return out
}

// txnPartitions lists, sorted, the partitions with a pending
// transactional offset. Caller holds Coordinator.mu.
func (g *group) txnPartitions() []cluster.TopicPartition {
	seen := map[cluster.TopicPartition]bool{}
	var out []cluster.TopicPartition
	for _, m := range g.txnOffsets {
		for tp := range m {
			if !seen[tp] {
				seen[tp] = true
				out = append(out, tp)
			}
		}
	}
	sortTPs(out)
	return out
}

// hasUnstableCommit is Kafka's hasPendingOffsetCommitsForTopicPartition: a
// commit of tp waits for replication, or a transactional one for its
// marker. Caller holds Coordinator.mu.
func (g *group) hasUnstableCommit(tp cluster.TopicPartition) bool {
	if g.pendingCommits[tp] > 0 {
		return true
	}
	for _, m := range g.txnOffsets {
		if _, ok := m[tp]; ok {
			return true
		}
	}
	return false
}

// CommitTxnOffsets is Kafka's handleTxnCommitOffsets (TxnOffsetCommit).
// A group that does not exist is created Empty, as Kafka does. From v3
// (KIP-447) the request may name the member: a request with a generation,
// a member id or an instance id is checked as Kafka's
// validateCurrentMember and generation check (ErrFencedInstanceID for an
// instance id held by another member id, ErrUnknownMemberID for an unknown
// instance or member id, ErrIllegalGeneration); a request without them is
// accepted whatever the group's state (older clients do not send them).
// The group's state is not otherwise checked and no session is extended.
//
// The offsets go in one transactional batch (the producer's id and
// epoch, base sequence -1, the record formats of CommitOffsets) appended
// with Log.AppendWith (partition.OriginCoordinator, acks -1). From the
// append they are pending for the producer: invisible to FetchOffsets, an
// UNSTABLE_OFFSET_COMMIT for a FetchOffsets with requireStable, and kept
// by expiry, until CompleteTxn commits or aborts them. The call returns
// once the batch is replicated (at most offsets.commit.timeout.ms); a
// write that fails is answered with its mapped error (as CommitOffsets')
// for every partition and its offsets are forgotten.
//
// A non-nil error applies to every partition; otherwise the map holds each
// partition's result (nil: written, pending until the marker;
// ErrOffsetMetadataTooLarge for a metadata string over 4096 bytes).
func (c *Coordinator) CommitTxnOffsets(ctx context.Context, req TxnCommitRequest) (map[cluster.TopicPartition]error, error) {
	c.mu.Lock()
	g, token, wait, appendedAt, written, out, err := c.commitTxnLocked(req)
	c.mu.Unlock()
	if err != nil || wait == nil {
		return out, err
	}
	werr := wait(c.ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	for tp := range written {
		if out[tp] == nil {
			out[tp] = werr
		}
	}
	if werr == nil {
		return out, nil
	}
	c.log.Debug().Err(werr).Str("group", g.id).Int64("producer_id", req.ProducerID).Msg("transactional offset commit failed")
	if !c.stillOwnedLocked(g.partition, token) || c.groups[g.id] != g {
		return out, nil
	}
	// Kafka's failPendingTxnOffsetCommit: the offsets of this write go
	// (not a later write's of the same partition and producer).
	for tp := range written {
		if o, ok := g.txnOffsets[req.ProducerID][tp]; ok && o.appendedAt == appendedAt {
			delete(g.txnOffsets[req.ProducerID], tp)
		}
	}
	if len(g.txnOffsets[req.ProducerID]) == 0 {
		delete(g.txnOffsets, req.ProducerID)
		c.untrackTxnLocked(g.partition, g.id, []int64{req.ProducerID})
	}
	return out, nil
}

func (c *Coordinator) commitTxnLocked(req TxnCommitRequest) (g *group, token uint64, wait func(context.Context) error, appendedAt int64,
	written map[cluster.TopicPartition]Offset, out map[cluster.TopicPartition]error, err error) {
	// TxnOffsetCommit needs a non-empty group id (Kafka's isValidGroupId).
	if err := c.validateGroupLocked(req.Group); err != nil {
		return nil, 0, nil, -1, nil, nil, err
	}
	if req.ProducerID < 0 {
		return nil, 0, nil, -1, nil, nil, ErrInvalidProducerIDMapping
	}
	ps := c.parts[c.PartitionFor(req.Group)]
	now := c.cfg.Now()
	g = c.groups[req.Group]
	if g == nil {
		g = newGroup(req.Group, c.PartitionFor(req.Group), now)
		c.groups[req.Group] = g
	}
	if err := g.validateTxnCommit(req); err != nil {
		return nil, 0, nil, -1, nil, nil, err
	}
	records, written, out := offsetRecords(g.id, req.Offsets, -1, now)
	if len(records) == 0 {
		return g, ps.token, nil, -1, written, out, nil
	}
	wait, appendedAt = c.appendLocked(g.partition, records, &producerRef{id: req.ProducerID, epoch: req.ProducerEpoch, guard: req.VerificationGuard})
	if appendedAt < 0 {
		// Nothing reached the log: nothing is pending.
		return g, ps.token, wait, appendedAt, written, out, nil
	}
	// Kafka's prepareTxnOffsetCommit, with the batch's position known: a
	// tombstone of one of these partitions appended from now on drops the
	// pending offset, as it does when loading this log.
	for tp, o := range written {
		g.addTxnOffset(req.ProducerID, tp, txnOffset{Offset: o, appendedAt: appendedAt})
	}
	ps.trackTxn(req.ProducerID, g.id)
	return g, ps.token, wait, appendedAt, written, out, nil
}

// validateTxnCommit is Kafka's validateOffsetCommit for a transactional
// commit. Caller holds Coordinator.mu.
func (g *group) validateTxnCommit(req TxnCommitRequest) error {
	switch {
	case g.state == stateDead:
		return ErrCoordinatorNotAvailable
	case req.Generation < 0 && g.state == stateEmpty:
		// The admin client or a producer not using group management.
		return nil
	case req.Generation >= 0 || req.MemberID != "" || req.InstanceID != nil:
		if req.InstanceID != nil {
			cur, ok := g.static[*req.InstanceID]
			switch {
			case ok && cur != req.MemberID:
				return ErrFencedInstanceID
			case !ok:
				return ErrUnknownMemberID
			}
		}
		if g.members[req.MemberID] == nil {
			return ErrUnknownMemberID
		}
		if req.Generation != g.generation {
			return ErrIllegalGeneration
		}
	}
	// Without member and generation (TxnOffsetCommit < v3) any state is
	// accepted.
	return nil
}

// CompleteTxn is called by protocol after a marker of producerID,
// appended at markerOffset, was written and committed on partition p of
// Topic led here (Kafka's handleTxnCompletion): commit makes the
// producer's pending offsets of p's groups appended below markerOffset
// the committed ones, except where the cached offset of the partition
// comes from a record appended after the transactional one (Kafka's
// offset-order rule: the later record in the log wins, as a reload
// finds); abort drops them. Pending offsets appended after the marker
// belong to a later transaction of the producer and stay pending, so a
// completion arriving late (its WriteTxnMarkers answered after the
// coordinator's retry succeeded and the next transaction began) does
// what a reload of the log does. While p is loading the completion is
// kept and applied, in order and by the same rule, once the load is
// installed; a partition not led here is left alone (its next leader's
// load reads the marker).
func (c *Coordinator) CompleteTxn(p int32, producerID int64, markerOffset int64, commit bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps := c.parts[p]
	switch {
	case c.routines.ClosedLocked() || ps == nil:
		c.log.Info().Int32("partition", p).Int64("producer_id", producerID).Int64("marker_offset", markerOffset).Bool("commit", commit).
			Msg("transaction marker completed for an offsets partition not led here; its leader's load applies it")
		return
	case !ps.loaded:
		if len(ps.deferred) >= maxDeferredCompletions {
			old := ps.deferred[0]
			ps.deferred = ps.deferred[1:]
			c.log.Error().Int32("partition", p).Int64("producer_id", old.producerID).Int64("marker_offset", old.markerOffset).
				Bool("commit", old.commit).Int("max", maxDeferredCompletions).
				Msg("too many transaction completions while loading; dropped the oldest, its offsets stay pending until the next load")
		}
		ps.deferred = append(ps.deferred, txnCompletion{producerID: producerID, markerOffset: markerOffset, commit: commit})
		return
	}
	c.completeTxnLocked(p, ps, producerID, markerOffset, commit)
}

// completeTxnLocked is CompleteTxn for a loaded partition. Caller holds
// c.mu.
func (c *Coordinator) completeTxnLocked(p int32, ps *partState, producerID int64, markerOffset int64, commit bool) {
	tracked := ps.txnGroups[producerID]
	ids := make([]string, 0, len(tracked))
	for id := range tracked {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	applied, skipped, dropped, kept := 0, 0, 0, 0
	for _, id := range ids {
		g := c.groups[id]
		if g == nil || g.partition != p {
			delete(tracked, id)
			continue
		}
		offs := g.txnOffsets[producerID]
		for tp, o := range offs {
			if o.appendedAt >= markerOffset {
				kept++ // a later transaction's, ended by a later marker
				continue
			}
			delete(offs, tp)
			if !commit {
				dropped++
				continue
			}
			if at, ok := g.appendedAt[tp]; ok && at >= o.appendedAt {
				skipped++
				continue
			}
			g.offsets[tp] = o.Offset
			g.appendedAt[tp] = o.appendedAt
			applied++
		}
		if len(offs) == 0 {
			delete(g.txnOffsets, producerID)
			delete(tracked, id)
		}
	}
	if len(tracked) == 0 {
		delete(ps.txnGroups, producerID)
	}
	c.log.Debug().Int32("partition", p).Int64("producer_id", producerID).Int64("marker_offset", markerOffset).Bool("commit", commit).
		Int("applied", applied).Int("skipped_older", skipped).Int("dropped", dropped).Int("kept_later", kept).Msg("transactional offsets completed")
}
