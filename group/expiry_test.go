package group

// Tests of what keeps __consumer_offsets bounded once it is compacted:
// the tombstones DeleteGroups and offset expiry write (in Kafka's key
// format, so that compaction drops the keys), offsets.retention.minutes
// with Kafka 2.1+'s rules (KIP-211, GroupMetadata.removeExpiredOffsets),
// and loading a partition that holds tombstones or was compacted. The
// cases follow Kafka's GroupMetadataManagerTest in spirit: a fake log and
// a fake clock, Tick called by hand.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
)

// logRecord is one record of the fake log.
type logRecord struct {
	at         int64
	key, value []byte
}

// records returns every record of partition p of Topic, in log order.
func (f *fakeLog) records(t *testing.T, p int32) []logRecord {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []logRecord
	for _, b := range f.batches[cluster.TopicPartition{Topic: Topic, Partition: p}] {
		if _, err := parseBatches(b, func(at int64, k, v []byte) { out = append(out, logRecord{at, k, v}) }); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// tombstonesAfter lists the keys of the tombstones at or after offset from.
func tombstonesAfter(recs []logRecord, from int64) [][]byte {
	var out [][]byte
	for _, r := range recs {
		if r.at >= from && r.value == nil {
			out = append(out, r.key)
		}
	}
	return out
}

func hasKey(keys [][]byte, k []byte) bool {
	for _, x := range keys {
		if bytes.Equal(x, k) {
			return true
		}
	}
	return false
}

func (f *fakeLog) end(p int32) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leo[cluster.TopicPartition{Topic: Topic, Partition: p}]
}

// newRetentionCoordinator is newTestCoordinator with offsets.retention
// and the check interval set, and session timeouts up to a day.
func newRetentionCoordinator(t *testing.T, log *fakeLog, clock *fakeClock, retention, interval time.Duration) *Coordinator {
	t.Helper()
	cfg := testCoordinatorConfig(t, log, clock, -1)
	cfg.MaxSessionTimeout = 24 * time.Hour
	cfg.OffsetsRetention, cfg.OffsetsRetentionCheckInterval = retention, interval
	return startTestCoordinator(t, cfg)
}

// consumerJoin joins a one-member "consumer" group subscribed to topics
// (ConsumerProtocol v0 metadata) and syncs it: the group is Stable in
// generation 1. It returns the member id.
func consumerJoin(t *testing.T, c *Coordinator, groupID string, sessionTimeout time.Duration, topics ...string) string {
	t.Helper()
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = topics
	req := joinReq(groupID, "")
	req.Protocols = []Protocol{{Name: "range", Metadata: meta.AppendTo(nil)}}
	req.SessionTimeout, req.RebalanceTimeout = sessionTimeout, sessionTimeout
	j := recv(t, joinAsync(c, req))
	if j.err != nil {
		t.Fatalf("join: %v", j.err)
	}
	s := recv(t, syncAsync(t, c, SyncRequest{Group: groupID, Generation: j.res.Generation, MemberID: j.res.MemberID,
		Assignments: map[string][]byte{j.res.MemberID: {}}}))
	if s.err != nil {
		t.Fatalf("sync: %v", s.err)
	}
	return j.res.MemberID
}

func commit(t *testing.T, c *Coordinator, req CommitRequest) {
	t.Helper()
	errs, err := c.CommitOffsets(context.Background(), req)
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	for tp, e := range errs {
		if e != nil {
			t.Fatalf("commit %s: %v", tp, e)
		}
	}
}

func offsetsOf(t *testing.T, c *Coordinator, groupID string) map[cluster.TopicPartition]Offset {
	t.Helper()
	offs, err := c.FetchOffsets(groupID, nil, false)
	if err != nil {
		t.Fatalf("fetch offsets of %s: %v", groupID, err)
	}
	return offs
}

// TestDeleteGroupsWritesTombstones: deleting an Empty consumer group
// writes a tombstone for each of its offset keys and for its metadata
// key, in Kafka's key format; a storage-only group (generation 0, never
// had metadata) gets offset tombstones only, as Kafka's
// cleanupGroupMetadata. After a reload of the log neither group exists.
func TestDeleteGroupsWritesTombstones(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	log := newFakeLog()
	c := newTestCoordinator(t, log, clock, -1)
	t0 := cluster.TopicPartition{Topic: "t", Partition: 0}
	t1 := cluster.TopicPartition{Topic: "u", Partition: 3}

	m := consumerJoin(t, c, "g", 10*time.Second, "t", "u")
	commit(t, c, CommitRequest{Group: "g", Generation: 1, MemberID: m, Retention: -1,
		Offsets: map[cluster.TopicPartition]CommitOffset{t0: {Offset: 5}, t1: {Offset: 6}}})
	if errs, _ := c.LeaveGroup("g", []LeaveMember{{MemberID: m}}); errs[0] != nil {
		t.Fatalf("leave: %v", errs)
	}
	// The storage-only group s lives in another partition than g, so
	// that each deletion's records can be told apart.
	s := "s"
	for i := 0; c.PartitionFor(s) == c.PartitionFor("g"); i++ {
		s = fmt.Sprintf("s%d", i)
	}
	commit(t, c, CommitRequest{Group: s, Generation: -1, Retention: -1,
		Offsets: map[cluster.TopicPartition]CommitOffset{t0: {Offset: 9}}})
	pg, ps := c.PartitionFor("g"), c.PartitionFor(s)
	fromG, fromS := log.end(pg), log.end(ps)

	got := c.DeleteGroups(context.Background(), []string{"g", s})
	if got["g"] != nil || got[s] != nil {
		t.Fatalf("delete: %v", got)
	}
	gTomb := tombstonesAfter(log.records(t, pg), fromG)
	want := [][]byte{
		// Kafka's keys: offset key version 1 (group, topic, partition),
		// group metadata key version 2 (group).
		{0, 1, 0, 1, 'g', 0, 1, 't', 0, 0, 0, 0},
		{0, 1, 0, 1, 'g', 0, 1, 'u', 0, 0, 0, 3},
		{0, 2, 0, 1, 'g'},
	}
	if len(gTomb) != len(want) {
		t.Fatalf("tombstones of g: %x, want %x", gTomb, want)
	}
	for _, k := range want {
		if !hasKey(gTomb, k) {
			t.Fatalf("tombstones of g %x lack %x", gTomb, k)
		}
	}
	sTomb := tombstonesAfter(log.records(t, ps), fromS)
	if len(sTomb) != 1 || !bytes.Equal(sTomb[0], offsetKey(s, "t", 0)) {
		t.Fatalf("tombstones of the storage-only group s: %x, want only its offset key", sTomb)
	}

	c2 := newTestCoordinator(t, log, clock, -1)
	for _, id := range []string{"g", s} {
		if offs := offsetsOf(t, c2, id); len(offs) != 0 {
			t.Fatalf("offsets of %s after delete and reload: %v", id, offs)
		}
		if d, _ := c2.DescribeGroup(id); d.State != "Dead" {
			t.Fatalf("%s after delete and reload: %+v", id, d)
		}
	}
	if l, _ := c2.ListGroups(); len(l) != 0 {
		t.Fatalf("groups after delete and reload: %v", l)
	}
}

// TestExpireOffsetsOfEmptyGroup: the offsets of a consumer group that
// became Empty expire offsets.retention.minutes after it became empty
// (its current state timestamp), whenever they were committed; then the
// group, Empty without offsets, is removed: tombstones for its offsets
// and metadata, and nothing of it after a reload.
func TestExpireOffsetsOfEmptyGroup(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	log := newFakeLog()
	const retention = time.Hour
	c := newRetentionCoordinator(t, log, clock, retention, time.Minute)
	t0 := cluster.TopicPartition{Topic: "t", Partition: 0}
	m := consumerJoin(t, c, "g", 10*time.Second, "t")
	commit(t, c, CommitRequest{Group: "g", Generation: 1, MemberID: m, Retention: -1,
		Offsets: map[cluster.TopicPartition]CommitOffset{t0: {Offset: 5}}})
	// Committed long before the group empties: the empty time counts.
	clock.Advance(2 * retention)
	if errs, _ := c.LeaveGroup("g", []LeaveMember{{MemberID: m}}); errs[0] != nil {
		t.Fatalf("leave: %v", errs)
	}
	p := c.PartitionFor("g")
	from := log.end(p)

	clock.Advance(retention - time.Millisecond)
	c.Tick()
	if offs := offsetsOf(t, c, "g"); offs[t0].Offset != 5 {
		t.Fatalf("offsets a millisecond before the retention: %v", offs)
	}
	if tomb := tombstonesAfter(log.records(t, p), from); len(tomb) != 0 {
		t.Fatalf("tombstones before the retention: %x", tomb)
	}

	clock.Advance(time.Minute) // the next check
	c.Tick()
	if offs := offsetsOf(t, c, "g"); len(offs) != 0 {
		t.Fatalf("offsets after the retention: %v", offs)
	}
	if d, _ := c.DescribeGroup("g"); d.State != "Dead" {
		t.Fatalf("expired empty group: %+v", d)
	}
	tomb := tombstonesAfter(log.records(t, p), from)
	if len(tomb) != 2 || !hasKey(tomb, offsetKey("g", "t", 0)) || !hasKey(tomb, groupKey("g")) {
		t.Fatalf("tombstones after expiry: %x", tomb)
	}

	c2 := newTestCoordinator(t, log, clock, -1)
	if offs := offsetsOf(t, c2, "g"); len(offs) != 0 {
		t.Fatalf("offsets after expiry and reload: %v", offs)
	}
	if l, _ := c2.ListGroups(); len(l) != 0 {
		t.Fatalf("groups after expiry and reload: %v", l)
	}
}

// TestExpireOffsetsOfStableGroup: with members, a consumer group's
// offsets expire (by commit time) only for topics no member subscribes
// to; an explicit expire timestamp (OffsetCommit v2-v4 retention) does
// not expire a subscribed topic's offset either, as Kafka 2.1+. A group
// whose protocol type is not "consumer", or whose subscriptions do not
// parse, keeps all its offsets while it has members.
func TestExpireOffsetsOfStableGroup(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	log := newFakeLog()
	const retention = time.Hour
	c := newRetentionCoordinator(t, log, clock, retention, time.Minute)
	sub := cluster.TopicPartition{Topic: "t", Partition: 0}
	subExplicit := cluster.TopicPartition{Topic: "t", Partition: 1}
	gone := cluster.TopicPartition{Topic: "old", Partition: 0}

	m := consumerJoin(t, c, "g", 2*retention, "t")
	commit(t, c, CommitRequest{Group: "g", Generation: 1, MemberID: m, Retention: -1,
		Offsets: map[cluster.TopicPartition]CommitOffset{sub: {Offset: 1}, gone: {Offset: 2}}})
	commit(t, c, CommitRequest{Group: "g", Generation: 1, MemberID: m, Retention: time.Second,
		Offsets: map[cluster.TopicPartition]CommitOffset{subExplicit: {Offset: 3}}})

	// "raw": members whose metadata is not ConsumerProtocol; "conn":
	// another protocol type (as Kafka Connect's workers).
	// Each joins as one member, syncs and commits gone at offset.
	joinCommit := func(groupID, protocolType string, offset int64) {
		r := joinReq(groupID, "")
		r.ProtocolType = protocolType
		r.SessionTimeout, r.RebalanceTimeout = 2*retention, 2*retention
		j := recv(t, joinAsync(c, r))
		recv(t, syncAsync(t, c, SyncRequest{Group: groupID, Generation: 1, MemberID: j.res.MemberID}))
		commit(t, c, CommitRequest{Group: groupID, Generation: 1, MemberID: j.res.MemberID, Retention: -1,
			Offsets: map[cluster.TopicPartition]CommitOffset{gone: {Offset: offset}}})
	}
	joinCommit("raw", "consumer", 4)
	joinCommit("conn", "connect", 5)

	c.Tick() // the first check runs at once
	clock.Advance(retention - time.Millisecond)
	c.Tick()
	if offs := offsetsOf(t, c, "g"); len(offs) != 3 {
		t.Fatalf("offsets before the retention: %v", offs)
	}
	clock.Advance(time.Minute) // the next check
	c.Tick()
	offs := offsetsOf(t, c, "g")
	if _, ok := offs[gone]; ok || offs[sub].Offset != 1 || offs[subExplicit].Offset != 3 {
		t.Fatalf("offsets of the stable group after the retention: %v, want only topic t's", offs)
	}
	tomb := tombstonesAfter(log.records(t, c.PartitionFor("g")), 0)
	if !hasKey(tomb, offsetKey("g", "old", 0)) || hasKey(tomb, offsetKey("g", "t", 0)) || hasKey(tomb, offsetKey("g", "t", 1)) ||
		hasKey(tomb, groupKey("g")) {
		t.Fatalf("tombstones of the stable group: %x", tomb)
	}
	if d, _ := c.DescribeGroup("g"); d.State != "Stable" {
		t.Fatalf("stable group after expiry: %+v", d)
	}
	for _, id := range []string{"raw", "conn"} {
		if offs := offsetsOf(t, c, id); offs[gone].Offset == 0 {
			t.Fatalf("offsets of %s after the retention: %v", id, offs)
		}
	}
}

// TestExpireOffsetsOfStorageOnlyGroup: a group without a protocol type
// (simple consumers committing with generation -1) has each offset
// expire offsets.retention.minutes after its own commit; the group goes
// once it has none, without a metadata tombstone (it never had metadata).
// An offset whose commit is still waiting for replication is not expired.
func TestExpireOffsetsOfStorageOnlyGroup(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	log := newFakeLog()
	const retention = time.Hour
	c := newRetentionCoordinator(t, log, clock, retention, time.Minute)
	early := cluster.TopicPartition{Topic: "t", Partition: 0}
	late := cluster.TopicPartition{Topic: "t", Partition: 1}
	commit(t, c, CommitRequest{Group: "s", Generation: -1, Retention: -1,
		Offsets: map[cluster.TopicPartition]CommitOffset{early: {Offset: 1}}})
	c.Tick()
	clock.Advance(retention / 2)
	commit(t, c, CommitRequest{Group: "s", Generation: -1, Retention: -1,
		Offsets: map[cluster.TopicPartition]CommitOffset{late: {Offset: 2}}})
	clock.Advance(retention / 2)
	c.Tick()
	offs := offsetsOf(t, c, "s")
	if _, ok := offs[early]; ok || offs[late].Offset != 2 {
		t.Fatalf("after the first offset's retention: %v", offs)
	}

	// A recommit of late still in flight when its retention passes: not
	// expired (Kafka's pendingOffsetCommits), and the group stays.
	p := c.PartitionFor("s")
	open := log.gate(log.end(p))
	done := make(chan error, 1)
	go func() {
		_, err := c.CommitOffsets(context.Background(), CommitRequest{Group: "s", Generation: -1, Retention: -1,
			Offsets: map[cluster.TopicPartition]CommitOffset{late: {Offset: 3}}})
		done <- err
	}()
	waitFor(t, func() bool { return log.end(p) > 0 && pendingCommits(c, "s") > 0 })
	clock.Advance(retention / 2)
	c.Tick()
	if offs := offsetsOf(t, c, "s"); offs[late].Offset != 2 {
		t.Fatalf("offset with a commit in flight expired: %v", offs)
	}
	open()
	if err := recv(t, done); err != nil {
		t.Fatal(err)
	}
	from := log.end(p)
	clock.Advance(retention)
	c.Tick()
	if offs := offsetsOf(t, c, "s"); len(offs) != 0 {
		t.Fatalf("after the last offset's retention: %v", offs)
	}
	if l, _ := c.ListGroups(); len(l) != 0 {
		t.Fatalf("groups after every offset expired: %v", l)
	}
	tomb := tombstonesAfter(log.records(t, p), from)
	if len(tomb) != 1 || !bytes.Equal(tomb[0], offsetKey("s", "t", 1)) {
		t.Fatalf("tombstones: %x, want only the offset key (no group metadata was ever written)", tomb)
	}
}

func pendingCommits(c *Coordinator, groupID string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[groupID]
	if g == nil {
		return 0
	}
	n := 0
	for _, k := range g.pendingCommits {
		n += k
	}
	return n
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestExpiryRunsAtTheCheckInterval: expiry is one periodic task of the
// coordinator, run from Tick every offsets.retention.check.interval.ms
// (the first time at once, as Kafka schedules it with no delay): an
// offset past its retention stays until the next check.
func TestExpiryRunsAtTheCheckInterval(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	log := newFakeLog()
	c := newRetentionCoordinator(t, log, clock, time.Minute, 10*time.Minute)
	tp := cluster.TopicPartition{Topic: "t", Partition: 0}
	commit(t, c, CommitRequest{Group: "s", Generation: -1, Retention: -1,
		Offsets: map[cluster.TopicPartition]CommitOffset{tp: {Offset: 1}}})
	c.Tick() // a check: nothing due
	clock.Advance(2 * time.Minute)
	c.Tick()
	if offs := offsetsOf(t, c, "s"); len(offs) != 1 {
		t.Fatalf("expired between checks: %v", offs)
	}
	clock.Advance(8*time.Minute - time.Millisecond)
	c.Tick()
	if offs := offsetsOf(t, c, "s"); len(offs) != 1 {
		t.Fatalf("expired a millisecond before the next check: %v", offs)
	}
	clock.Advance(time.Millisecond)
	c.Tick()
	if offs := offsetsOf(t, c, "s"); len(offs) != 0 {
		t.Fatalf("not expired at the next check: %v", offs)
	}
}

// TestLoadAppliesTombstones: a partition holding commits and metadata
// followed by their tombstones loads without them: a tombstoned offset is
// absent, a tombstoned group is gone (its offsets, if they live on, make
// a storage-only group, as Kafka's loader), and a later record for a key
// brings it back.
func TestLoadAppliesTombstones(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	log := newFakeLog()
	// Everything in partition 0, written as a coordinator would.
	var ids []string
	for i := 0; len(ids) < 3; i++ {
		if id := string(rune('a' + i)); PartitionFor(id, testPartitions) == 0 {
			ids = append(ids, id)
		}
	}
	dead, offsetsOnly, back := ids[0], ids[1], ids[2]
	g := newGroup(dead, 0, clock.Now())
	g.protocolType, g.generation = "consumer", 3
	off := func(n int64) []byte {
		return offsetValue(Offset{Offset: n, LeaderEpoch: -1, CommitTimestamp: 1, ExpireTimestamp: -1})
	}
	tp := cluster.TopicPartition{Topic: Topic, Partition: 0}
	for _, recs := range [][]kv{
		{{groupKey(dead), groupValue(g, clock.Now())}, {offsetKey(dead, "t", 0), off(1)}},
		{{offsetKey(offsetsOnly, "t", 0), off(2)}, {offsetKey(offsetsOnly, "t", 1), off(3)}},
		{{groupKey(offsetsOnly), groupValue(g, clock.Now())}},
		{{offsetKey(back, "t", 0), off(4)}},
		{{offsetKey(dead, "t", 0), nil}, {groupKey(dead), nil}, {offsetKey(offsetsOnly, "t", 0), nil}},
		{{groupKey(offsetsOnly), nil}, {offsetKey(back, "t", 0), nil}},
		{{offsetKey(back, "t", 0), off(5)}},
	} {
		if _, err := log.Append(tp, buildBatch(recs, clock.Now()), -1); err != nil {
			t.Fatal(err)
		}
	}
	c := newTestCoordinator(t, log, clock, -1)
	if d, _ := c.DescribeGroup(dead); d.State != "Dead" {
		t.Fatalf("tombstoned group after load: %+v", d)
	}
	if offs := offsetsOf(t, c, dead); len(offs) != 0 {
		t.Fatalf("tombstoned offsets after load: %v", offs)
	}
	d, _ := c.DescribeGroup(offsetsOnly)
	offs := offsetsOf(t, c, offsetsOnly)
	if d.State != "Empty" || d.ProtocolType != "" || len(offs) != 1 || offs[cluster.TopicPartition{Topic: "t", Partition: 1}].Offset != 3 {
		t.Fatalf("group with tombstoned metadata and a live offset: %+v %v", d, offs)
	}
	if offs := offsetsOf(t, c, back); offs[cluster.TopicPartition{Topic: "t", Partition: 0}].Offset != 5 {
		t.Fatalf("offset committed again after its tombstone: %v", offs)
	}
	if l, _ := c.ListGroups(); len(l) != 2 {
		t.Fatalf("groups after load: %v", l)
	}
}

// TestLoadCompactedTail: compaction may leave no record between the last
// surviving batch and the log end offset (the tail of a cleaned segment
// before an empty active segment). Loading stops when a read at or below
// the high watermark finds nothing more, as Kafka's loader stops on an
// empty read, instead of waiting for records that will never come.
func TestLoadCompactedTail(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	log := newFakeLog()
	tp := cluster.TopicPartition{Topic: Topic, Partition: 0}
	var id string
	for i := 0; id == ""; i++ {
		if s := string(rune('a' + i)); PartitionFor(s, testPartitions) == 0 {
			id = s
		}
	}
	off := offsetValue(Offset{Offset: 7, LeaderEpoch: -1, CommitTimestamp: 1, ExpireTimestamp: -1})
	for _, recs := range [][]kv{{{offsetKey(id, "t", 0), off}}, {{offsetKey(id, "t", 1), off}}, {{offsetKey(id, "t", 1), nil}}} {
		if _, err := log.Append(tp, buildBatch(recs, clock.Now()), -1); err != nil {
			t.Fatal(err)
		}
	}
	// The cleaner dropped the commit of t-1 and its tombstone: offsets 1
	// and 2 are gone, the log end offset is still 3.
	log.mu.Lock()
	log.batches[tp] = log.batches[tp][:1]
	if log.leo[tp] != 3 || log.hw[tp] != 3 {
		t.Fatalf("fake log end %d, hw %d", log.leo[tp], log.hw[tp])
	}
	log.mu.Unlock()
	c := newTestCoordinator(t, log, clock, -1)
	offs := offsetsOf(t, c, id)
	if len(offs) != 1 || offs[cluster.TopicPartition{Topic: "t", Partition: 0}].Offset != 7 {
		t.Fatalf("offsets after loading a compacted partition: %v", offs)
	}
}

// consumerSubscription pins the parsing of ConsumerProtocol subscriptions
// (the v0 prefix every version starts with) that decides which offsets of
// a Stable group may expire.
func TestSubscribedTopics(t *testing.T) {
	v0 := kmsg.NewConsumerMemberMetadata()
	v0.Topics = []string{"a", "b"}
	v3 := kmsg.NewConsumerMemberMetadata()
	v3.Version = 3
	v3.Topics = []string{"c"}
	v3.UserData = []byte("u")
	for _, tc := range []struct {
		name string
		meta []byte
		want []string
		ok   bool
	}{
		{"v0", v0.AppendTo(nil), []string{"a", "b"}, true},
		{"v3", v3.AppendTo(nil), []string{"c"}, true},
		{"garbage", []byte("m-x"), nil, false},
		{"truncated", v0.AppendTo(nil)[:7], nil, false},
		{"negative count", binary.BigEndian.AppendUint32([]byte{0, 0}, 0xffffffff), nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := subscriptionTopics(tc.meta)
			if (err == nil) != tc.ok || len(got) != len(tc.want) {
				t.Fatalf("subscriptionTopics = %v, %v; want %v ok=%v", got, err, tc.want, tc.ok)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("subscriptionTopics = %v, want %v", got, tc.want)
				}
			}
		})
	}
}

// compact rewrites the fake log as Kafka's cleaner leaves it once
// delete.retention.ms has passed: per key only its last record, and no
// tombstones; offsets and the log end offset unchanged. It returns how
// many records are left.
func (f *fakeLog) compact(t *testing.T) int {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	left := 0
	for tp, batches := range f.batches {
		var recs []logRecord
		last := map[string]int64{}
		for _, b := range batches {
			if _, err := parseBatches(b, func(at int64, k, v []byte) {
				recs = append(recs, logRecord{at, k, v})
				last[string(k)] = at
			}); err != nil {
				t.Fatal(err)
			}
		}
		var out [][]byte
		for _, r := range recs {
			if last[string(r.key)] != r.at || r.value == nil {
				continue
			}
			b := buildBatch([]kv{{r.key, r.value}}, time.UnixMilli(0))
			binary.BigEndian.PutUint64(b[0:8], uint64(r.at))
			out = append(out, b)
			left++
		}
		f.batches[tp] = out
	}
	return left
}

// TestCompactedLogReloadsLiveState: after a storm of commits, a deleted
// group and expired offsets, compacting the log as Kafka's cleaner does
// (which works only if every tombstone's key is byte for byte the key it
// deletes) leaves one record per live offset and group, and a new
// coordinator loads from it exactly the state the old one had, with an
// Empty group's empty time intact so its offsets still expire on time.
func TestCompactedLogReloadsLiveState(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	log := newFakeLog()
	const retention = time.Hour
	c := newRetentionCoordinator(t, log, clock, retention, time.Minute)
	tps := []cluster.TopicPartition{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}, {Topic: "old", Partition: 0}}

	live := consumerJoin(t, c, "live", 24*time.Hour, "t")
	gone := consumerJoin(t, c, "gone", 24*time.Hour, "t")
	empty := consumerJoin(t, c, "empty", 24*time.Hour, "t")
	for i := int64(0); i < 200; i++ {
		for _, g := range []struct{ id, member string }{{"live", live}, {"gone", gone}, {"empty", empty}} {
			commit(t, c, CommitRequest{Group: g.id, Generation: 1, MemberID: g.member, Retention: -1,
				Offsets: map[cluster.TopicPartition]CommitOffset{tps[i%3]: {Offset: i}}})
		}
		commit(t, c, CommitRequest{Group: "simple", Generation: -1, Retention: -1,
			Offsets: map[cluster.TopicPartition]CommitOffset{tps[i%2]: {Offset: i}}})
	}
	if errs, _ := c.LeaveGroup("gone", []LeaveMember{{MemberID: gone}}); errs[0] != nil {
		t.Fatalf("leave: %v", errs)
	}
	if got := c.DeleteGroups(context.Background(), []string{"gone"}); got["gone"] != nil {
		t.Fatalf("delete: %v", got)
	}
	clock.Advance(retention)
	if errs, _ := c.LeaveGroup("empty", []LeaveMember{{MemberID: empty}}); errs[0] != nil {
		t.Fatalf("leave: %v", errs)
	}
	// live loses the offset of "old", to which it does not subscribe;
	// simple loses nothing: it committed t-0 and t-1 only.
	commit(t, c, CommitRequest{Group: "simple", Generation: -1, Retention: -1,
		Offsets: map[cluster.TopicPartition]CommitOffset{tps[0]: {Offset: 1000}, tps[1]: {Offset: 1001}}})
	c.Tick()
	if offs := offsetsOf(t, c, "live"); len(offs) != 2 {
		t.Fatalf("live after expiry: %v", offs)
	}
	clock.Advance(retention / 2)

	type snapshot struct {
		groups  []GroupListing
		offsets map[string]map[cluster.TopicPartition]Offset
	}
	snap := func(c *Coordinator) snapshot {
		l, err := c.ListGroups()
		if err != nil {
			t.Fatal(err)
		}
		s := snapshot{groups: l, offsets: map[string]map[cluster.TopicPartition]Offset{}}
		for _, g := range l {
			s.offsets[g.Group] = offsetsOf(t, c, g.Group)
		}
		return s
	}
	before := snap(c)
	if len(before.groups) != 3 { // live, empty, simple
		t.Fatalf("groups before compaction: %v", before.groups)
	}
	liveKeys := 0
	for _, offs := range before.offsets {
		liveKeys += len(offs)
	}
	liveKeys += 2 // group metadata of live and empty; simple has none

	if left := log.compact(t); left != liveKeys {
		t.Fatalf("compacted log holds %d records, want one per live key (%d)", left, liveKeys)
	}
	c2 := newRetentionCoordinator(t, log, clock, retention, time.Minute)
	after := snap(c2)
	if len(after.groups) != len(before.groups) {
		t.Fatalf("groups after compaction and reload: %v, before %v", after.groups, before.groups)
	}
	for i, g := range before.groups {
		if after.groups[i] != g {
			t.Fatalf("group after reload %+v, before %+v", after.groups[i], g)
		}
		for tp, o := range before.offsets[g.Group] {
			if after.offsets[g.Group][tp] != o {
				t.Fatalf("offset of %s %s after reload %+v, before %+v", g.Group, tp, after.offsets[g.Group][tp], o)
			}
		}
		if len(after.offsets[g.Group]) != len(before.offsets[g.Group]) {
			t.Fatalf("offsets of %s after reload %v, before %v", g.Group, after.offsets[g.Group], before.offsets[g.Group])
		}
	}
	// "empty" became empty half a retention ago: the new coordinator
	// expires it then, not a whole retention after loading it.
	c2.Tick()
	clock.Advance(retention / 2)
	c2.Tick()
	if d, _ := c2.DescribeGroup("empty"); d.State != "Dead" {
		t.Fatalf("empty group a retention after it emptied, across a reload: %+v", d)
	}
}

// TestLoadFailsOnUnreadableBatch: a batch of the offsets partition that
// cannot be parsed (here: it claims gzip but holds plain records, so it
// fails to inflate) fails the load as Kafka's loader does, instead of
// marking the partition loaded without the groups at and after it; the
// loader retries, and once the batch reads it loads every group.
func TestLoadFailsOnUnreadableBatch(t *testing.T) {
	checkLoadWaitsForBatch(t, 3, 1, func(b []byte) { b[22] |= 0x01 }) // attributes: gzip
}

// TestLoadFailsOnCorruptBatch: a batch of the offsets partition whose
// CRC32C does not match (one flipped bit in a committed offset), or whose
// length field is below a batch header, fails the load as an unreadable
// one does: COORDINATOR_LOAD_IN_PROGRESS, never a load that applied a
// wrong offset or stopped short, until the batch reads.
func TestLoadFailsOnCorruptBatch(t *testing.T) {
	t.Run("crc", func(t *testing.T) {
		checkLoadWaitsForBatch(t, 2, 0, func(b []byte) { b[len(b)-2] ^= 0x01 })
	})
	t.Run("length", func(t *testing.T) {
		checkLoadWaitsForBatch(t, 2, 0, func(b []byte) { binary.BigEndian.PutUint32(b[8:], 12) })
	})
}

// checkLoadWaitsForBatch commits offset 7 of t-0 for n groups of partition
// 0, one batch each, spoils batch bad with corrupt, and checks that the
// load answers COORDINATOR_LOAD_IN_PROGRESS until the batch is restored,
// then loads every group's offset.
func checkLoadWaitsForBatch(t *testing.T, n, bad int, corrupt func(b []byte)) {
	t.Helper()
	clock := &fakeClock{now: time.Unix(1000, 0)}
	log := newFakeLog()
	tp := cluster.TopicPartition{Topic: Topic, Partition: 0}
	var ids []string
	for i := 0; len(ids) < n; i++ {
		if s := string(rune('a' + i)); PartitionFor(s, testPartitions) == 0 {
			ids = append(ids, s)
		}
	}
	off := offsetValue(Offset{Offset: 7, LeaderEpoch: -1, CommitTimestamp: 1, ExpireTimestamp: -1})
	for _, id := range ids {
		if _, err := log.Append(tp, buildBatch([]kv{{offsetKey(id, "t", 0), off}}, clock.Now()), -1); err != nil {
			t.Fatal(err)
		}
	}
	log.mu.Lock()
	b := log.batches[tp][bad]
	good := append([]byte(nil), b...)
	corrupt(b)
	log.mu.Unlock()

	c := New(testCoordinatorConfig(t, log, clock, -1))
	t.Cleanup(func() { c.Close() })
	c.OnBecomeLeader(0, 1)
	time.Sleep(300 * time.Millisecond)
	for _, id := range ids {
		if _, err := c.FetchOffsets(id, nil, false); !errors.Is(err, ErrCoordinatorLoadInProgress) {
			t.Fatalf("fetch offsets of %s with a spoilt batch in the log: %v, want COORDINATOR_LOAD_IN_PROGRESS", id, err)
		}
	}
	log.mu.Lock()
	copy(b, good)
	log.mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.mu.Lock()
		loaded := c.parts[0].loaded
		c.mu.Unlock()
		if loaded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("not loaded within 5s of the batch becoming readable")
		}
		time.Sleep(time.Millisecond)
	}
	for _, id := range ids {
		if offs := offsetsOf(t, c, id); offs[cluster.TopicPartition{Topic: "t", Partition: 0}].Offset != 7 {
			t.Fatalf("offsets of %s after the retried load: %v", id, offs)
		}
	}
}
