package group

import (
	"encoding/binary"
	"fmt"
	"sort"
	"time"

	"github.com/kafkazk/broker/cluster"
)

// consumerProtocolType is ConsumerProtocol.PROTOCOL_TYPE: the groups whose
// member metadata is a ConsumerProtocol subscription.
const consumerProtocolType = "consumer"

// subscriptionTopics parses the topics of a ConsumerProtocol subscription.
// Only the v0 prefix (version, topics) is read, which every version starts
// with, as Kafka's computeSubscribedTopics does, so that future versions
// parse too.
func subscriptionTopics(meta []byte) ([]string, error) {
	if len(meta) < 6 {
		return nil, fmt.Errorf("subscription of %d bytes", len(meta))
	}
	n := int32(binary.BigEndian.Uint32(meta[2:6]))
	b := meta[6:]
	if n < 0 || int(n) > len(b)/2 {
		return nil, fmt.Errorf("subscription with %d topics in %d bytes", n, len(b))
	}
	topics := make([]string, 0, n)
	for i := int32(0); i < n; i++ {
		if len(b) < 2 {
			return nil, fmt.Errorf("subscription topic %d truncated", i)
		}
		l := int(int16(binary.BigEndian.Uint16(b)))
		if l < 0 || len(b) < 2+l {
			return nil, fmt.Errorf("subscription topic %d of length %d truncated", i, l)
		}
		topics = append(topics, string(b[2:2+l]))
		b = b[2+l:]
	}
	return topics, nil
}

// computeSubscribedTopics is Kafka's GroupMetadata.computeSubscribedTopics:
// for a "consumer" group, none (an empty set) without members and the
// union of the members' subscriptions with members and a protocol; nil
// when the coordinator cannot know them (another protocol type, no
// protocol, or metadata that does not parse). The group keeps it in
// g.subscribed for its generation. Caller holds Coordinator.mu.
func (g *group) computeSubscribedTopics() map[string]bool {
	if g.protocolType != consumerProtocolType {
		return nil
	}
	if len(g.members) == 0 {
		return map[string]bool{}
	}
	if g.protocol == "" {
		return nil
	}
	out := map[string]bool{}
	for _, m := range g.members {
		topics, err := subscriptionTopics(m.metadataFor(g.protocol))
		if err != nil {
			return nil
		}
		for _, t := range topics {
			out[t] = true
		}
	}
	return out
}

// isSubscribedToTopic is Kafka's GroupMetadata.isSubscribedToTopic: true
// when the current generation's members subscribe to topic, and true too
// when their subscriptions are unknown, to be safe. Caller holds
// Coordinator.mu.
func (g *group) isSubscribedToTopic(topic string) bool {
	return g.subscribed == nil || g.subscribed[topic]
}

// expiredOffsets is Kafka's GroupMetadata.removeExpiredOffsets (2.1+,
// KIP-211) without the removal: the offsets of g due to expire at now.
//   - An Empty group with a protocol type: retention after it became
//     empty (its current state timestamp), for every offset.
//   - A Stable "consumer" group whose subscriptions are known: retention
//     after the commit, for topics no member subscribes to.
//   - A group without protocol type (offsets stored by simple consumers):
//     retention after each commit.
//   - Any other group keeps its offsets.
//
// Within those, an offset committed with an explicit retention
// (OffsetCommit v2-v4) expires at its expire timestamp instead, and an
// offset with a commit still waiting for replication, or a transactional
// commit waiting for its marker, is kept (Kafka's OffsetMetadataManager:
// its tombstone would drop the pending offset). Caller holds
// Coordinator.mu.
func (g *group) expiredOffsets(now time.Time, retention time.Duration) []cluster.TopicPartition {
	var base func(Offset) int64
	var subscribed map[string]bool
	switch {
	case g.protocolType != "" && g.state == stateEmpty:
		emptySince := g.stateTime.UnixMilli()
		base = func(Offset) int64 { return emptySince }
	case g.protocolType == consumerProtocolType && g.state == stateStable:
		if g.subscribed == nil {
			return nil
		}
		subscribed = g.subscribed
		base = func(o Offset) int64 { return o.CommitTimestamp }
	case g.protocolType == "":
		base = func(o Offset) int64 { return o.CommitTimestamp }
	default:
		return nil
	}
	nowMs, retentionMs := now.UnixMilli(), retention.Milliseconds()
	var out []cluster.TopicPartition
	for tp, o := range g.offsets {
		if subscribed[tp.Topic] || g.hasUnstableCommit(tp) {
			continue
		}
		if o.ExpireTimestamp >= 0 {
			if nowMs >= o.ExpireTimestamp {
				out = append(out, tp)
			}
		} else if nowMs-base(o) >= retentionMs {
			out = append(out, tp)
		}
	}
	sortTPs(out)
	return out
}

// hasOffsets is Kafka's GroupMetadata.hasOffsets: committed offsets,
// commits in flight or transactional offsets awaiting their marker.
// Caller holds Coordinator.mu.
func (g *group) hasOffsets() bool {
	return len(g.offsets) > 0 || len(g.pendingCommits) > 0 || len(g.txnOffsets) > 0
}

// removeGroupLocked is the end of Kafka's cleanupGroupMetadata for a group
// that became Dead: it leaves the cache, and its metadata key gets a
// tombstone if it ever had metadata written (generation > 0; a group used
// only to store offsets never had). Caller holds c.mu.
func (c *Coordinator) removeGroupLocked(g *group, now time.Time) []kv {
	g.transition(stateDead, now)
	if c.groups[g.id] == g {
		delete(c.groups, g.id)
	}
	if g.generation > 0 {
		return []kv{{key: groupKey(g.id)}}
	}
	return nil
}

// expireOffsetsLocked is Kafka's cleanupGroupMetadata run by its
// "delete-expired-group-metadata" task: every loaded group loses the
// offsets expiredOffsets names, with a tombstone for each; an Empty group
// then left without offsets is removed, with a tombstone for its
// metadata. The tombstones of a partition go in one write that nobody
// waits for (Kafka appends them with acks 0): if one is lost, the next
// coordinator of the partition loads the offsets and expires them again.
// Caller holds c.mu.
func (c *Coordinator) expireOffsetsLocked(now time.Time) {
	ids := make([]string, 0, len(c.groups))
	for id, g := range c.groups {
		if ps := c.parts[g.partition]; ps != nil && ps.loaded {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	byPartition := map[int32][]kv{}
	var partitions []int32
	removedOffsets, removedGroups := 0, 0
	for _, id := range ids {
		g := c.groups[id]
		expired := g.expiredOffsets(now, c.cfg.OffsetsRetention)
		records := c.tombstonesLocked(g, expired)
		removedOffsets += len(expired)
		if g.state == stateEmpty && !g.hasOffsets() {
			records = append(records, c.removeGroupLocked(g, now)...)
			removedGroups++
			c.log.Info().Str("group", id).Int32("generation", g.generation).Msg("group transitioned to Dead: empty and no offsets left")
		}
		if len(records) == 0 {
			continue
		}
		if _, ok := byPartition[g.partition]; !ok {
			partitions = append(partitions, g.partition)
		}
		byPartition[g.partition] = append(byPartition[g.partition], records...)
	}
	for _, p := range partitions {
		c.writeAsyncLocked(p, byPartition[p], "expired offsets and groups")
	}
	if removedOffsets > 0 || removedGroups > 0 {
		c.log.Info().Int("offsets", removedOffsets).Int("groups", removedGroups).Msg("removed expired offsets and dead groups")
	}
}
