package group

import (
	"context"

	"github.com/kafkazk/broker/cluster"
)

// DeleteOffsets is Kafka's GroupCoordinator.handleDeleteOffsets
// (OffsetDelete, KIP-496): it deletes groupID's committed offsets of tps.
//
// A non-nil error is the group's and leaves the map nil:
// ErrInvalidGroupID for an empty id, ErrNotCoordinator or
// ErrCoordinatorLoadInProgress as for the other group APIs,
// ErrGroupIDNotFound for a group that does not exist, ErrNonEmptyGroup for
// a group with members that is not a "consumer" group (the coordinator
// cannot tell what it consumes). Otherwise the map has an entry per
// partition of tps: ErrGroupSubscribedToTopic for a partition of a topic
// the members of a rebalancing or Stable "consumer" group subscribe to
// (every topic while their subscriptions are unknown), nil for one whose
// offset was deleted or that had none. An Empty group may delete any.
//
// Each deleted offset gets a tombstone in the group's partition of
// __consumer_offsets, as offset expiry writes (Kafka's
// cleanupGroupMetadata), and an Empty group left without offsets is
// removed, with a tombstone for its metadata. Unlike Kafka, which appends
// them with acks 0, the call waits for the tombstones to be replicated
// (acks=all, at most offsets.commit.timeout.ms), so that a coordinator
// that takes over after a success does not load the offsets again; a
// failed or timed-out write is the group's error.
func (c *Coordinator) DeleteOffsets(ctx context.Context, groupID string, tps []cluster.TopicPartition) (map[cluster.TopicPartition]error, error) {
	c.mu.Lock()
	out, wait, err := c.deleteOffsetsLocked(groupID, tps)
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if wait != nil {
		if err := wait(ctx); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (c *Coordinator) deleteOffsetsLocked(groupID string, tps []cluster.TopicPartition) (map[cluster.TopicPartition]error, func(context.Context) error, error) {
	if err := c.validateGroupLocked(groupID); err != nil {
		return nil, nil, err
	}
	g := c.groups[groupID]
	if g == nil || g.state == stateDead {
		return nil, nil, ErrGroupIDNotFound
	}
	out := make(map[cluster.TopicPartition]error, len(tps))
	var eligible []cluster.TopicPartition
	switch {
	case g.state == stateEmpty:
		eligible = tps
	case g.protocolType == consumerProtocolType:
		for _, tp := range tps {
			if g.isSubscribedToTopic(tp.Topic) {
				out[tp] = ErrGroupSubscribedToTopic
			} else {
				eligible = append(eligible, tp)
			}
		}
	default:
		return nil, nil, ErrNonEmptyGroup
	}
	if len(eligible) == 0 {
		return out, nil, nil
	}
	// A partition counts as present with an offset in the cache, a
	// commit appended and not yet replicated (its first one, say), or a
	// transactional offset awaiting its marker: that commit is in the log
	// before the tombstone, which must follow it (Kafka's removeOffsets
	// drops pending commits, transactional ones too, and its
	// OffsetMetadataManager writes the tombstone for a pending
	// transactional offset alone, so a reload drops it as well).
	var present []cluster.TopicPartition
	for _, tp := range eligible {
		out[tp] = nil
		if _, ok := g.offsets[tp]; ok || g.hasUnstableCommit(tp) {
			present = append(present, tp)
		}
	}
	present = dedupeTPs(present)
	type saved struct {
		o                Offset
		at               int64
		hasOffset, hasAt bool
		txn              map[int64]txnOffset
	}
	removed := make(map[cluster.TopicPartition]saved, len(present))
	for _, tp := range present {
		var sv saved
		sv.o, sv.hasOffset = g.offsets[tp]
		sv.at, sv.hasAt = g.appendedAt[tp]
		sv.txn = g.txnOffsetsOf(tp)
		removed[tp] = sv
	}
	stateTime := g.stateTime
	records := c.tombstonesLocked(g, present)
	now := c.cfg.Now()
	dropped := g.state == stateEmpty && !g.hasOffsets()
	var generation int32
	if dropped {
		generation = g.generation
		records = append(records, c.removeGroupLocked(g, now)...)
	}
	if len(records) == 0 {
		return out, nil, nil
	}
	wait, appendedAt := c.writeLocked(g.partition, records)
	if appendedAt < 0 {
		// Nothing reached the log: the cache keeps what the log has.
		for tp, sv := range removed {
			if sv.hasOffset {
				g.offsets[tp] = sv.o
			}
			if sv.hasAt {
				g.appendedAt[tp] = sv.at
			}
			for pid, o := range sv.txn {
				g.addTxnOffset(pid, tp, o)
				if ps := c.parts[g.partition]; ps != nil {
					ps.trackTxn(pid, g.id)
				}
			}
		}
		if dropped {
			g.state, g.stateTime = stateEmpty, stateTime
			c.groups[g.id] = g
		}
		return nil, nil, wait(context.Background())
	}
	// A commit of one of these partitions appended before the tombstones
	// and replicated after them, the first one included, must not bring
	// its offset back into the cache (Kafka's removeOffsets drops the
	// pending commit): it compares its own position with this one.
	for _, tp := range present {
		if g.pendingCommits[tp] > 0 {
			g.appendedAt[tp] = appendedAt
		}
	}
	ev := c.log.Info().Str("group", g.id).Int("offsets", len(present)).Int("partitions", len(eligible))
	if dropped {
		ev = ev.Int32("generation", generation).Bool("group_removed", true)
	}
	ev.Msg("deleted offsets")
	return out, wait, nil
}

// dedupeTPs sorts tps and drops repeats.
func dedupeTPs(tps []cluster.TopicPartition) []cluster.TopicPartition {
	sortTPs(tps)
	out := tps[:0]
	for i, tp := range tps {
		if i == 0 || tp != tps[i-1] {
			out = append(out, tp)
		}
	}
	return out
}
