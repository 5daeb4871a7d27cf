package group

import (
	"context"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/internal/coordlog"
)

// CommitOffset is one partition of an OffsetCommit.
type CommitOffset struct {
	Offset      int64
	LeaderEpoch int32 // -1 if unknown
	Metadata    string
}

// CommitRequest is one OffsetCommit. Generation -1 with an empty member id
// is a "simple" commit, for groups that do not use group management.
type CommitRequest struct {
	Group      string
	Generation int32
	MemberID   string
	InstanceID *string
	// Retention is OffsetCommit v2-v4's retention time, or -1 (KIP-211:
	// offsets then live until the group has been empty for
	// offsets.retention.minutes).
	Retention time.Duration
	Offsets   map[cluster.TopicPartition]CommitOffset
}

// CommitOffsets validates the commit against the group (generation,
// member, state), writes one record per partition to the group's offsets
// partition and, once replicated (acks=all), makes them visible to
// FetchOffsets. A non-nil error applies to every partition; otherwise the
// map holds each partition's result (nil: committed).
func (c *Coordinator) CommitOffsets(ctx context.Context, req CommitRequest) (map[cluster.TopicPartition]error, error) {
	c.mu.Lock()
	g, token, wait, appendedAt, written, out, err := c.commitLocked(req)
	c.mu.Unlock()
	if err != nil || wait == nil {
		return out, err
	}
	// Waiting with the coordinator's context rather than the request's:
	// once appended, the commit's outcome should reach the cache even if
	// the client went away.
	werr := wait(c.ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	for tp := range written {
		if g.pendingCommits[tp]--; g.pendingCommits[tp] <= 0 {
			delete(g.pendingCommits, tp)
		}
	}
	for tp := range req.Offsets {
		if out[tp] == nil {
			out[tp] = werr
		}
	}
	if werr != nil || !c.stillOwnedLocked(g.partition, token) || c.groups[g.id] != g {
		return out, nil
	}
	// The cache holds what the log holds: a commit of the same partition
	// appended after this one and completed first stays (Kafka's
	// onOffsetCommitAppend keeps the larger appendedBatchOffset), and so
	// does an OffsetDelete tombstone appended after it (DeleteOffsets
	// leaves its position in appendedAt).
	for tp, o := range written {
		if at, ok := g.appendedAt[tp]; ok && at > appendedAt {
			continue
		}
		g.offsets[tp] = o
		g.appendedAt[tp] = appendedAt
	}
	return out, nil
}

func committed(o CommitOffset, retention time.Duration, now time.Time) Offset {
	off := Offset{Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata, CommitTimestamp: now.UnixMilli(), ExpireTimestamp: -1}
	if retention >= 0 {
		off.ExpireTimestamp = now.Add(retention).UnixMilli()
	}
	return off
}

func (c *Coordinator) commitLocked(req CommitRequest) (g *group, token uint64, wait func(context.Context) error, appendedAt int64,
	written map[cluster.TopicPartition]Offset, out map[cluster.TopicPartition]error, err error) {
	ps, err := c.checkLocked(req.Group)
	if err != nil {
		return nil, 0, nil, -1, nil, nil, err
	}
	now := c.cfg.Now()
	g = c.groups[req.Group]
	if g == nil {
		if req.Generation >= 0 {
			// A member of a generation of a group that is gone.
			return nil, 0, nil, -1, nil, nil, ErrIllegalGeneration
		}
		g = newGroup(req.Group, c.PartitionFor(req.Group), now)
		c.groups[req.Group] = g
	}
	switch {
	case g.isFenced(req.MemberID, req.InstanceID):
		return nil, 0, nil, -1, nil, nil, ErrFencedInstanceID
	case req.Generation < 0 && g.state == stateEmpty:
		// Only storing offsets: no member or generation to check.
	case g.members[req.MemberID] == nil:
		return nil, 0, nil, -1, nil, nil, ErrUnknownMemberID
	case req.Generation != g.generation:
		return nil, 0, nil, -1, nil, nil, ErrIllegalGeneration
	case g.state == stateCompletingRebalance:
		return nil, 0, nil, -1, nil, nil, ErrRebalanceInProgress
	default:
		m := g.members[req.MemberID]
		m.heartbeatDeadline = now.Add(m.sessionTimeout)
	}
	records, written, out := offsetRecords(g.id, req.Offsets, req.Retention, now)
	if len(records) == 0 {
		return g, ps.token, nil, -1, written, out, nil
	}
	for tp := range written {
		g.pendingCommits[tp]++
	}
	wait, appendedAt = c.writeLocked(g.partition, records)
	return g, ps.token, wait, appendedAt, written, out, nil
}

// offsetRecords are the records of a commit of offsets to groupID, in
// partition order, with what each partition is answered (nil, or
// ErrOffsetMetadataTooLarge for a partition not written) and the offsets
// written.
func offsetRecords(groupID string, offsets map[cluster.TopicPartition]CommitOffset, retention time.Duration,
	now time.Time) (records []kv, written map[cluster.TopicPartition]Offset, out map[cluster.TopicPartition]error) {
	out = make(map[cluster.TopicPartition]error, len(offsets))
	written = make(map[cluster.TopicPartition]Offset, len(offsets))
	tps := make([]cluster.TopicPartition, 0, len(offsets))
	for tp := range offsets {
		tps = append(tps, tp)
	}
	sortTPs(tps)
	for _, tp := range tps {
		o := offsets[tp]
		if len(o.Metadata) > offsetMetadataMaxBytes {
			out[tp] = ErrOffsetMetadataTooLarge
			continue
		}
		out[tp] = nil
		written[tp] = committed(o, retention, now)
		records = append(records, kv{offsetKey(groupID, tp.Topic, tp.Partition), offsetValue(written[tp])})
	}
	return records, written, out
}

func sortTPs(tps []cluster.TopicPartition) {
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
}

// FetchOffsets returns the group's committed offsets for tps, or all of
// them when tps is nil. Partitions without a commit are absent from the
// map; an unknown group has none. With requireStable (OffsetFetch v7+,
// KIP-447), as Kafka's getOffsets, a partition with a commit not yet
// stable -- a transactional commit waiting for its transaction's marker,
// or any commit still waiting for replication -- is answered with offset
// -1 and Err ErrUnstableOffsetCommit instead, so that the consumer retries
// rather than start from an offset its transaction is about to replace.
func (c *Coordinator) FetchOffsets(groupID string, tps []cluster.TopicPartition, requireStable bool) (map[cluster.TopicPartition]Offset, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.checkLocked(groupID); err != nil {
		return nil, err
	}
	out := map[cluster.TopicPartition]Offset{}
	g := c.groups[groupID]
	if g == nil {
		return out, nil
	}
	if tps == nil {
		tps = g.allOffsets()
	}
	for _, tp := range tps {
		if requireStable && g.hasUnstableCommit(tp) {
			out[tp] = Offset{Offset: -1, LeaderEpoch: -1, CommitTimestamp: -1, ExpireTimestamp: -1, Err: ErrUnstableOffsetCommit}
			continue
		}
		if o, ok := g.offsets[tp]; ok {
			out[tp] = o
		}
	}
	return out, nil
}

// GroupListing is one group of ListGroups.
type GroupListing struct {
	Group        string
	ProtocolType string
	State        string
}

// ListGroups lists the groups this broker coordinates, sorted by id, with
// ErrCoordinatorLoadInProgress (and the groups loaded so far) while a
// partition is loading.
func (c *Coordinator) ListGroups() ([]GroupListing, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var err error
	for _, ps := range c.parts {
		if !ps.loaded {
			err = ErrCoordinatorLoadInProgress
		}
	}
	out := make([]GroupListing, 0, len(c.groups))
	for _, g := range c.groups {
		out = append(out, GroupListing{Group: g.id, ProtocolType: g.protocolType, State: g.state.String()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out, err
}

// MemberDescription is one member in DescribeGroups.
type MemberDescription struct {
	MemberID   string
	InstanceID *string
	ClientID   string
	ClientHost string
	Metadata   []byte // only when Stable
	Assignment []byte // only when Stable
}

// GroupDescription answers DescribeGroups for one group; an unknown group
// is described as Dead with no members, as Kafka does.
type GroupDescription struct {
	Group        string
	State        string
	ProtocolType string
	Protocol     string // only when Stable
	Members      []MemberDescription
}

// DescribeGroup describes one group.
func (c *Coordinator) DescribeGroup(groupID string) (GroupDescription, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.checkLocked(groupID); err != nil {
		return GroupDescription{Group: groupID}, err
	}
	g := c.groups[groupID]
	if g == nil {
		return GroupDescription{Group: groupID, State: stateDead.String()}, nil
	}
	d := GroupDescription{Group: g.id, State: g.state.String(), ProtocolType: g.protocolType}
	stable := g.state == stateStable
	if stable {
		d.Protocol = g.protocol
	}
	for _, id := range g.memberOrder() {
		m := g.members[id]
		md := MemberDescription{MemberID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost,
			Metadata: []byte{}, Assignment: []byte{}}
		if stable {
			md.Metadata, md.Assignment = m.metadataFor(g.protocol), m.assignment
		}
		d.Members = append(d.Members, md)
	}
	return d, nil
}

// DeleteGroups deletes empty groups: their offsets, their pending
// transactional offsets and their metadata get tombstones in the offsets
// topic. The result has an entry per group (nil: deleted).
func (c *Coordinator) DeleteGroups(ctx context.Context, ids []string) map[string]error {
	out := make(map[string]error, len(ids))
	type waitFor struct {
		id   string
		wait func(context.Context) error
	}
	var waits []waitFor
	c.mu.Lock()
	now := c.cfg.Now()
	for _, id := range ids {
		if _, err := c.checkLocked(id); err != nil {
			out[id] = err
			continue
		}
		g := c.groups[id]
		switch {
		case g == nil || g.state == stateDead:
			out[id] = ErrGroupIDNotFound
			continue
		case g.state != stateEmpty || len(g.members) > 0:
			out[id] = ErrNonEmptyGroup
			continue
		}
		// Kafka's deleteGroups and cleanupGroupMetadata: a tombstone for
		// every offset key and, if metadata was ever written, the group
		// key, so that compaction drops them all. An Empty group with
		// transactional offsets awaiting their marker is deleted too, as
		// Kafka does: as its OffsetMetadataManager.deleteAllOffsets, the
		// partitions with only a pending offset get a tombstone as well,
		// which drops it here and when the log is loaded, so a later
		// COMMIT does not bring the deleted group back.
		saved := g.saveOffsets()
		stateTime := g.stateTime
		records := c.tombstonesLocked(g, dedupeTPs(append(g.allOffsets(), g.txnPartitions()...)))
		records = append(records, c.removeGroupLocked(g, now)...)
		wait, appendedAt := c.writeLocked(g.partition, records)
		if appendedAt < 0 {
			// Nothing reached the log: the cache keeps what the log has,
			// the group and its pending transactional offsets included,
			// as deleteOffsetsLocked does.
			c.restoreOffsetsLocked(g, saved)
			g.state, g.stateTime = stateEmpty, stateTime
			c.groups[g.id] = g
			out[id] = wait(context.Background())
			continue
		}
		out[id] = nil
		waits = append(waits, waitFor{id, wait})
		c.log.Info().Str("group", id).Msg("group deleted")
	}
	c.mu.Unlock()
	for _, w := range waits {
		if err := w.wait(ctx); err != nil {
			out[w.id] = err
		}
	}
	return out
}

// allOffsets lists the partitions g has offsets for, sorted.
func (g *group) allOffsets() []cluster.TopicPartition {
	tps := make([]cluster.TopicPartition, 0, len(g.offsets))
	for tp := range g.offsets {
		tps = append(tps, tp)
	}
	sortTPs(tps)
	return tps
}

// tombstonesLocked returns a tombstone for each of g's offsets in tps
// (none for an empty tps) and removes them from g, with every pending
// transactional offset of those partitions (as loading the tombstone
// does). Caller holds c.mu.
func (c *Coordinator) tombstonesLocked(g *group, tps []cluster.TopicPartition) []kv {
	var out []kv
	var emptied []int64
	for _, tp := range tps {
		out = append(out, kv{key: offsetKey(g.id, tp.Topic, tp.Partition)})
		delete(g.offsets, tp)
		delete(g.appendedAt, tp)
		emptied = append(emptied, g.dropTxnOffsets(tp)...)
	}
	if len(emptied) > 0 {
		c.untrackTxnLocked(g.partition, g.id, emptied)
	}
	return out
}

// savedOffsets is a copy of a group's offsets, their log positions and
// its pending transactional offsets, to restore when a write that removed
// them from the cache did not reach the log.
type savedOffsets struct {
	offsets    map[cluster.TopicPartition]Offset
	appendedAt map[cluster.TopicPartition]int64
	txn        map[int64]map[cluster.TopicPartition]txnOffset
}

// saveOffsets copies g's offsets. Caller holds Coordinator.mu.
func (g *group) saveOffsets() savedOffsets {
	sv := savedOffsets{offsets: make(map[cluster.TopicPartition]Offset, len(g.offsets)),
		appendedAt: make(map[cluster.TopicPartition]int64, len(g.appendedAt)),
		txn:        make(map[int64]map[cluster.TopicPartition]txnOffset, len(g.txnOffsets))}
	for tp, o := range g.offsets {
		sv.offsets[tp] = o
	}
	for tp, at := range g.appendedAt {
		sv.appendedAt[tp] = at
	}
	for pid, m := range g.txnOffsets {
		cp := make(map[cluster.TopicPartition]txnOffset, len(m))
		for tp, o := range m {
			cp[tp] = o
		}
		sv.txn[pid] = cp
	}
	return sv
}

// restoreOffsetsLocked puts back what saveOffsets copied, tracking the
// pending transactional offsets again. Caller holds c.mu.
func (c *Coordinator) restoreOffsetsLocked(g *group, sv savedOffsets) {
	g.offsets, g.appendedAt, g.txnOffsets = sv.offsets, sv.appendedAt, sv.txn
	if ps := c.parts[g.partition]; ps != nil {
		for pid := range g.txnOffsets {
			ps.trackTxn(pid, g.id)
		}
	}
}

// loader rebuilds groups and offsets from one partition's records, the
// later record for a key winning and a tombstone removing it, as Kafka's
// loadGroupsAndOffsets: a transactional offset commit is pending for its
// producer until that producer's marker, which applies (COMMIT) or drops
// (any other type) them; a COMMIT applies an offset only over one whose
// record is older. A tombstone of an offset key also drops every pending
// transactional offset of the key, as Kafka's OffsetMetadataManager.replay
// does and as the live coordinator does when it writes one (DeleteOffsets,
// DeleteGroups), so a deleted offset does not come back at a later COMMIT.
type loader struct {
	offsets map[string]map[cluster.TopicPartition]loadedOffset
	groups  map[string]*kmsg.GroupMetadataValue
	// pending are the transactional offsets whose marker was not read
	// yet, per producer id.
	pending map[int64]map[groupTP]loadedOffset
}

// groupTP is one partition of one group.
type groupTP struct {
	group string
	tp    cluster.TopicPartition
}

// loadedOffset is a commit read back, with the offset of its record.
type loadedOffset struct {
	Offset
	appendedAt int64
}

func newLoader() *loader {
	return &loader{offsets: map[string]map[cluster.TopicPartition]loadedOffset{}, groups: map[string]*kmsg.GroupMetadataValue{},
		pending: map[int64]map[groupTP]loadedOffset{}}
}

// applyRecord applies the record at offset at of the partition, from a
// batch with header h.
func (l *loader) applyRecord(h coordlog.Header, at int64, key, value []byte) error {
	if h.Control {
		typ, err := controlType(key)
		if err != nil {
			return err
		}
		l.applyMarker(h.ProducerID, typ == controlCommit)
		return nil
	}
	if !h.Transactional {
		return l.apply(at, key, value)
	}
	d, err := decodeRecord(key, value)
	if err != nil {
		return err
	}
	if !d.isOffset {
		// Kafka's transactional commits hold offsets only; group metadata
		// in such a batch is applied as any other.
		return l.apply(at, key, value)
	}
	gtp := groupTP{d.group, cluster.TopicPartition{Topic: d.topic, Partition: d.partition}}
	if d.offset == nil {
		l.removeOffset(gtp)
		return nil
	}
	m := l.pending[h.ProducerID]
	if m == nil {
		m = map[groupTP]loadedOffset{}
		l.pending[h.ProducerID] = m
	}
	m[gtp] = loadedOffset{Offset: *d.offset, appendedAt: at}
	return nil
}

// applyMarker ends producerID's transaction: commit applies its pending
// offsets over older ones, abort drops them.
func (l *loader) applyMarker(producerID int64, commit bool) {
	pending := l.pending[producerID]
	delete(l.pending, producerID)
	if !commit {
		return
	}
	for gtp, o := range pending {
		m := l.offsets[gtp.group]
		if m == nil {
			m = map[cluster.TopicPartition]loadedOffset{}
			l.offsets[gtp.group] = m
		}
		if cur, ok := m[gtp.tp]; ok && cur.appendedAt >= o.appendedAt {
			continue // a later plain commit of the partition stays
		}
		m[gtp.tp] = o
	}
}

// removeOffset applies a tombstone of gtp's offset key: the committed
// offset and every pending transactional one go.
func (l *loader) removeOffset(gtp groupTP) {
	if m := l.offsets[gtp.group]; m != nil {
		delete(m, gtp.tp)
		if len(m) == 0 {
			delete(l.offsets, gtp.group)
		}
	}
	for pid, m := range l.pending {
		delete(m, gtp)
		if len(m) == 0 {
			delete(l.pending, pid)
		}
	}
}

// apply applies the record at offset at of the partition.
func (l *loader) apply(at int64, key, value []byte) error {
	d, err := decodeRecord(key, value)
	if err != nil {
		return err
	}
	if d.isOffset {
		tp := cluster.TopicPartition{Topic: d.topic, Partition: d.partition}
		if d.offset == nil {
			l.removeOffset(groupTP{d.group, tp})
			return nil
		}
		m := l.offsets[d.group]
		if m == nil {
			m = map[cluster.TopicPartition]loadedOffset{}
			l.offsets[d.group] = m
		}
		m[tp] = loadedOffset{Offset: *d.offset, appendedAt: at}
		return nil
	}
	if d.metadata == nil {
		delete(l.groups, d.group)
		return nil
	}
	l.groups[d.group] = d.metadata
	return nil
}

// build makes the groups of partition p: a group with members is Stable in
// its stored generation (sessions start now), one without is Empty; offsets
// without group metadata make a storage-only group.
func (l *loader) build(p int32, now time.Time) map[string]*group {
	out := map[string]*group{}
	for id, v := range l.groups {
		g := newGroup(id, p, now)
		g.protocolType, g.generation = v.ProtocolType, v.Generation
		if v.Protocol != nil {
			g.protocol = *v.Protocol
		}
		if v.Leader != nil {
			g.leader = *v.Leader
		}
		if v.CurrentStateTimestamp > 0 {
			g.stateTime = time.UnixMilli(v.CurrentStateTimestamp)
		}
		for _, vm := range v.Members {
			m := &member{
				id: vm.MemberID, instanceID: vm.InstanceID, clientID: vm.ClientID, clientHost: vm.ClientHost,
				protocols:        []Protocol{{Name: g.protocol, Metadata: vm.Subscription}},
				sessionTimeout:   time.Duration(vm.SessionTimeoutMillis) * time.Millisecond,
				rebalanceTimeout: time.Duration(vm.RebalanceTimeoutMillis) * time.Millisecond,
				assignment:       vm.Assignment,
			}
			if m.rebalanceTimeout < 0 {
				m.rebalanceTimeout = m.sessionTimeout
			}
			m.heartbeatDeadline = now.Add(m.sessionTimeout)
			g.members[m.id] = m
			if m.instanceID != nil {
				g.static[*m.instanceID] = m.id
			}
		}
		if len(g.members) > 0 {
			g.state = stateStable
			g.stateTime = now
			if g.members[g.leader] == nil {
				g.leader = g.memberOrder()[0]
			}
		}
		g.subscribed = g.computeSubscribedTopics()
		out[id] = g
	}
	for id, offs := range l.offsets {
		g := out[id]
		if g == nil {
			g = newGroup(id, p, now)
			out[id] = g
		}
		for tp, o := range offs {
			g.offsets[tp] = o.Offset
			g.appendedAt[tp] = o.appendedAt
		}
	}
	// Transactional offsets still open at the end of the load stay
	// pending until CompleteTxn, in their group (a storage-only one if it
	// has no metadata, as Kafka's pendingEmptyGroupOffsets).
	for pid, m := range l.pending {
		for gtp, o := range m {
			g := out[gtp.group]
			if g == nil {
				g = newGroup(gtp.group, p, now)
				out[gtp.group] = g
			}
			g.addTxnOffset(pid, gtp.tp, txnOffset{Offset: o.Offset, appendedAt: o.appendedAt})
		}
	}
	return out
}
