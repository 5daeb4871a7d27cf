package group

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func deleteOffsets(t *testing.T, c *Coordinator, groupID string, tps ...cluster.TopicPartition) map[cluster.TopicPartition]error {
	t.Helper()
	out, err := c.DeleteOffsets(context.Background(), groupID, tps)
	if err != nil {
		t.Fatalf("delete offsets of %s: %v", groupID, err)
	}
	if len(out) != len(dedupeTPs(append([]cluster.TopicPartition(nil), tps...))) {
		t.Fatalf("delete offsets of %s: %v, want an entry per partition of %v", groupID, out, tps)
	}
	return out
}

// TestDeleteOffsetsSubscribedTopicRefused: a Stable consumer group keeps
// the offsets of a topic its members subscribe to
// (GROUP_SUBSCRIBED_TO_TOPIC for each of its partitions) and loses those
// of a topic they no longer consume, with a tombstone for each and none
// for the kept ones; the group stays Stable, and a reload agrees.
func TestDeleteOffsetsSubscribedTopicRefused(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	log := newFakeLog()
	c := newTestCoordinator(t, log, clock, -1)
	sub0 := cluster.TopicPartition{Topic: "t", Partition: 0}
	sub1 := cluster.TopicPartition{Topic: "t", Partition: 1}
	old := cluster.TopicPartition{Topic: "old", Partition: 2}
	never := cluster.TopicPartition{Topic: "old", Partition: 3} // no offset committed

	m := consumerJoin(t, c, "g", time.Minute, "t")
	commit(t, c, CommitRequest{Group: "g", Generation: 1, MemberID: m, Retention: -1,
		Offsets: map[cluster.TopicPartition]CommitOffset{sub0: {Offset: 1}, sub1: {Offset: 2}, old: {Offset: 3}}})
	p := c.PartitionFor("g")
	from := log.end(p)

	got := deleteOffsets(t, c, "g", sub0, old, sub1, never)
	if !errors.Is(got[sub0], ErrGroupSubscribedToTopic) || !errors.Is(got[sub1], ErrGroupSubscribedToTopic) ||
		got[old] != nil || got[never] != nil {
		t.Fatalf("delete offsets: %v", got)
	}
	offs := offsetsOf(t, c, "g")
	if _, ok := offs[old]; ok || offs[sub0].Offset != 1 || offs[sub1].Offset != 2 {
		t.Fatalf("offsets after delete: %v, want only topic t's", offs)
	}
	tomb := tombstonesAfter(log.records(t, p), from)
	if len(tomb) != 1 || !bytes.Equal(tomb[0], offsetKey("g", "old", 2)) {
		t.Fatalf("tombstones %x, want only old-2's offset key", tomb)
	}
	if d, _ := c.DescribeGroup("g"); d.State != "Stable" {
		t.Fatalf("group after delete: %+v", d)
	}

	c2 := newTestCoordinator(t, log, clock, -1)
	offs = offsetsOf(t, c2, "g")
	if _, ok := offs[old]; ok || len(offs) != 2 {
		t.Fatalf("offsets after reload: %v", offs)
	}
}

// TestDeleteOffsetsGroupChecks: the group-level answers. An unknown group
// or an empty id, a group coordinated elsewhere or still loading; a
// group with members in another protocol type (NON_EMPTY_GROUP); a
// "consumer" group whose subscriptions are unknown (metadata that does not
// parse, or a first generation still joining) refuses every topic.
func TestDeleteOffsetsGroupChecks(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	log := newFakeLog()
	c := newTestCoordinator(t, log, clock, -1)
	tp := cluster.TopicPartition{Topic: "t", Partition: 0}

	if _, err := c.DeleteOffsets(context.Background(), "nobody", []cluster.TopicPartition{tp}); !errors.Is(err, ErrGroupIDNotFound) {
		t.Fatalf("unknown group: %v", err)
	}
	if _, err := c.DeleteOffsets(context.Background(), "", []cluster.TopicPartition{tp}); !errors.Is(err, ErrInvalidGroupID) {
		t.Fatalf("empty group id: %v", err)
	}

	joinSync := func(groupID, protocolType string) {
		r := joinReq(groupID, "")
		r.ProtocolType = protocolType
		j := recv(t, joinAsync(c, r))
		recv(t, syncAsync(t, c, SyncRequest{Group: groupID, Generation: 1, MemberID: j.res.MemberID}))
		commit(t, c, CommitRequest{Group: groupID, Generation: 1, MemberID: j.res.MemberID, Retention: -1,
			Offsets: map[cluster.TopicPartition]CommitOffset{tp: {Offset: 4}}})
	}
	joinSync("conn", "connect")
	if _, err := c.DeleteOffsets(context.Background(), "conn", []cluster.TopicPartition{tp}); !errors.Is(err, ErrNonEmptyGroup) {
		t.Fatalf("connect group with members: %v", err)
	}
	joinSync("raw", "consumer") // metadata "m-...", not a subscription
	if got := deleteOffsets(t, c, "raw", tp); !errors.Is(got[tp], ErrGroupSubscribedToTopic) {
		t.Fatalf("consumer group with unknown subscriptions: %v", got)
	}
	for _, id := range []string{"conn", "raw"} {
		if offs := offsetsOf(t, c, id); offs[tp].Offset != 4 {
			t.Fatalf("offsets of %s after a refused delete: %v", id, offs)
		}
	}

	// A first generation still joining (the initial rebalance delay):
	// its subscriptions are not known yet.
	cd := newTestCoordinator(t, newFakeLog(), clock, time.Minute)
	commit(t, cd, CommitRequest{Group: "j", Generation: -1, Retention: -1,
		Offsets: map[cluster.TopicPartition]CommitOffset{tp: {Offset: 5}}})
	joining := joinAsync(cd, joinReq("j", ""))
	waitFor(t, func() bool { d, _ := cd.DescribeGroup("j"); return d.State == "PreparingRebalance" })
	if got := deleteOffsets(t, cd, "j", tp); !errors.Is(got[tp], ErrGroupSubscribedToTopic) {
		t.Fatalf("group preparing its first rebalance: %v", got)
	}
	cd.OnBecomeFollower(cd.PartitionFor("j"))
	recv(t, joining)
	if _, err := cd.DeleteOffsets(context.Background(), "j", []cluster.TopicPartition{tp}); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("after resigning: %v", err)
	}

	// Loading: the new leader's high watermark lags its log end.
	log.setHold(true)
	log.mu.Lock()
	for p, leo := range log.leo {
		log.hw[p] = leo - 1
	}
	log.mu.Unlock()
	c2 := New(testCoordinatorConfig(t, log, clock, -1))
	t.Cleanup(func() { c2.Close() })
	c2.OnBecomeLeader(c2.PartitionFor("raw"), 2)
	if _, err := c2.DeleteOffsets(context.Background(), "raw", []cluster.TopicPartition{tp}); !errors.Is(err, ErrCoordinatorLoadInProgress) {
		t.Fatalf("while loading: %v", err)
	}
	log.setHold(false)
}

// TestDeleteOffsetsEmptyGroup: an Empty group deletes the offsets of any
// topic, subscribed to before or not; deleting its last offsets removes
// the group, with a tombstone for its metadata (none for a storage-only
// group, which never had any). A reload of the log brings none of them
// back.
func TestDeleteOffsetsEmptyGroup(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	log := newFakeLog()
	c := newTestCoordinator(t, log, clock, -1)
	t0 := cluster.TopicPartition{Topic: "t", Partition: 0}
	t1 := cluster.TopicPartition{Topic: "t", Partition: 1}
	u0 := cluster.TopicPartition{Topic: "u", Partition: 0}

	m := consumerJoin(t, c, "g", time.Minute, "t", "u")
	commit(t, c, CommitRequest{Group: "g", Generation: 1, MemberID: m, Retention: -1,
		Offsets: map[cluster.TopicPartition]CommitOffset{t0: {Offset: 1}, t1: {Offset: 2}, u0: {Offset: 3}}})
	if errs, _ := c.LeaveGroup("g", []LeaveMember{{MemberID: m}}); errs[0] != nil {
		t.Fatalf("leave: %v", errs)
	}
	p := c.PartitionFor("g")
	from := log.end(p)
	if got := deleteOffsets(t, c, "g", t0, t0); got[t0] != nil {
		t.Fatalf("delete t-0: %v", got)
	}
	if offs := offsetsOf(t, c, "g"); len(offs) != 2 || offs[t1].Offset != 2 || offs[u0].Offset != 3 {
		t.Fatalf("offsets after deleting t-0: %v", offs)
	}
	if d, _ := c.DescribeGroup("g"); d.State != "Empty" {
		t.Fatalf("group with offsets left: %+v", d)
	}
	tomb := tombstonesAfter(log.records(t, p), from)
	if len(tomb) != 1 || !bytes.Equal(tomb[0], offsetKey("g", "t", 0)) {
		t.Fatalf("tombstones %x, want t-0's offset key once", tomb)
	}

	from = log.end(p)
	if got := deleteOffsets(t, c, "g", t1, u0); got[t1] != nil || got[u0] != nil {
		t.Fatalf("delete the rest: %v", got)
	}
	tomb = tombstonesAfter(log.records(t, p), from)
	if len(tomb) != 3 || !hasKey(tomb, offsetKey("g", "t", 1)) || !hasKey(tomb, offsetKey("g", "u", 0)) || !hasKey(tomb, groupKey("g")) {
		t.Fatalf("tombstones %x, want t-1's, u-0's and the group's", tomb)
	}
	if d, _ := c.DescribeGroup("g"); d.State != "Dead" {
		t.Fatalf("group without offsets: %+v", d)
	}
	if _, err := c.DeleteOffsets(context.Background(), "g", []cluster.TopicPartition{t1}); !errors.Is(err, ErrGroupIDNotFound) {
		t.Fatalf("removed group: %v", err)
	}

	// A storage-only group: no metadata tombstone.
	commit(t, c, CommitRequest{Group: "s", Generation: -1, Retention: -1,
		Offsets: map[cluster.TopicPartition]CommitOffset{t0: {Offset: 9}}})
	ps := c.PartitionFor("s")
	from = log.end(ps)
	if got := deleteOffsets(t, c, "s", t0); got[t0] != nil {
		t.Fatalf("delete storage-only: %v", got)
	}
	if tomb := tombstonesAfter(log.records(t, ps), from); len(tomb) != 1 || !bytes.Equal(tomb[0], offsetKey("s", "t", 0)) {
		t.Fatalf("storage-only tombstones %x", tomb)
	}

	c2 := newTestCoordinator(t, log, clock, -1)
	for _, id := range []string{"g", "s"} {
		if offs := offsetsOf(t, c2, id); len(offs) != 0 {
			t.Fatalf("offsets of %s after reload: %v", id, offs)
		}
	}
	if l, _ := c2.ListGroups(); len(l) != 0 {
		t.Fatalf("groups after reload: %v", l)
	}
}

// TestDeleteOffsetsCommitInFlight: a commit appended before the
// tombstone and replicated after it does not bring the offset back into
// the cache, since in the log the tombstone follows it.
func TestDeleteOffsetsCommitInFlight(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	log := newFakeLog()
	c := newTestCoordinator(t, log, clock, -1)
	tp := cluster.TopicPartition{Topic: "t", Partition: 0}
	commit(t, c, CommitRequest{Group: "s", Generation: -1, Retention: -1,
		Offsets: map[cluster.TopicPartition]CommitOffset{tp: {Offset: 1}}})
	p := c.PartitionFor("s")
	open := log.gate(log.end(p))
	done := make(chan error, 1)
	go func() {
		_, err := c.CommitOffsets(context.Background(), CommitRequest{Group: "s", Generation: -1, Retention: -1,
			Offsets: map[cluster.TopicPartition]CommitOffset{tp: {Offset: 2}}})
		done <- err
	}()
	waitFor(t, func() bool { return pendingCommits(c, "s") > 0 })
	if got := deleteOffsets(t, c, "s", tp); got[tp] != nil {
		t.Fatalf("delete: %v", got)
	}
	open()
	if err := recv(t, done); err != nil {
		t.Fatal(err)
	}
	if offs := offsetsOf(t, c, "s"); len(offs) != 0 {
		t.Fatalf("offsets after a commit completed behind the delete: %v", offs)
	}
	c2 := newTestCoordinator(t, log, clock, -1)
	if offs := offsetsOf(t, c2, "s"); len(offs) != 0 {
		t.Fatalf("offsets after reload: %v", offs)
	}
	// A commit appended after the delete counts again.
	commit(t, c, CommitRequest{Group: "s", Generation: -1, Retention: -1,
		Offsets: map[cluster.TopicPartition]CommitOffset{tp: {Offset: 3}}})
	if offs := offsetsOf(t, c, "s"); offs[tp].Offset != 3 {
		t.Fatalf("offsets after a later commit: %v", offs)
	}
}

// TestDeleteOffsetsWriteFails: when the tombstones cannot be appended the
// error is the group's and the offsets stay, in the cache as in the log.
func TestDeleteOffsetsWriteFails(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	log := newFakeLog()
	c := newTestCoordinator(t, log, clock, -1)
	tp := cluster.TopicPartition{Topic: "t", Partition: 0}
	commit(t, c, CommitRequest{Group: "s", Generation: -1, Retention: -1,
		Offsets: map[cluster.TopicPartition]CommitOffset{tp: {Offset: 1}}})
	log.mu.Lock()
	log.failErr = partition.ErrNotEnoughReplicas
	log.mu.Unlock()
	if _, err := c.DeleteOffsets(context.Background(), "s", []cluster.TopicPartition{tp}); !errors.Is(err, ErrCoordinatorNotAvailable) {
		t.Fatalf("delete with the log refusing appends: %v", err)
	}
	log.mu.Lock()
	log.failErr = nil
	log.mu.Unlock()
	if offs := offsetsOf(t, c, "s"); offs[tp].Offset != 1 {
		t.Fatalf("offsets after a failed delete: %v", offs)
	}
	if got := deleteOffsets(t, c, "s", tp); got[tp] != nil {
		t.Fatalf("delete once the log takes appends: %v", got)
	}
	if l, _ := c.ListGroups(); len(l) != 0 {
		t.Fatalf("groups after the delete: %v", l)
	}
}

// TestDeleteOffsetsFirstCommitInFlight: a delete of a partition whose
// only commit is appended and not yet replicated counts it as present: it
// writes a tombstone after the commit, so neither the cache once the
// commit completes nor a reload of the log has the offset.
func TestDeleteOffsetsFirstCommitInFlight(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	log := newFakeLog()
	c := newTestCoordinator(t, log, clock, -1)
	tp := cluster.TopicPartition{Topic: "t", Partition: 0}
	other := cluster.TopicPartition{Topic: "u", Partition: 0}
	commit(t, c, CommitRequest{Group: "s", Generation: -1, Retention: -1,
		Offsets: map[cluster.TopicPartition]CommitOffset{other: {Offset: 1}}})
	p := c.PartitionFor("s")
	open := log.gate(log.end(p))
	done := make(chan error, 1)
	go func() {
		_, err := c.CommitOffsets(context.Background(), CommitRequest{Group: "s", Generation: -1, Retention: -1,
			Offsets: map[cluster.TopicPartition]CommitOffset{tp: {Offset: 2}}})
		done <- err
	}()
	waitFor(t, func() bool { return pendingCommits(c, "s") > 0 })
	from := log.end(p)
	deleted := make(chan map[cluster.TopicPartition]error, 1)
	go func() {
		out, err := c.DeleteOffsets(context.Background(), "s", []cluster.TopicPartition{tp})
		if err != nil {
			t.Errorf("delete: %v", err)
		}
		deleted <- out
	}()
	waitFor(t, func() bool { return log.end(p) > from })
	open()
	if err := recv(t, done); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, deleted); got[tp] != nil {
		t.Fatalf("delete: %v", got)
	}
	if tomb := tombstonesAfter(log.records(t, p), from); len(tomb) != 1 || !bytes.Equal(tomb[0], offsetKey("s", "t", 0)) {
		t.Fatalf("tombstones %x, want t-0's offset key", tomb)
	}
	if offs := offsetsOf(t, c, "s"); len(offs) != 1 || offs[other].Offset != 1 {
		t.Fatalf("offsets after the first commit completed behind the delete: %v", offs)
	}
	c2 := newTestCoordinator(t, log, clock, -1)
	if offs := offsetsOf(t, c2, "s"); len(offs) != 1 || offs[other].Offset != 1 {
		t.Fatalf("offsets after reload: %v", offs)
	}
}

// TestDeleteOffsetsEmptyGroupRejoining: a "consumer" group that became
// Empty in a past generation subscribes to nothing (Kafka's
// computeSubscribedTopics for a consumer group without members), so while
// a new member's join waits for the rebalance it may still delete the
// offsets of any topic, whether it became Empty in this coordinator or
// was loaded Empty; once the join completes, the new generation's topics
// are refused again.
func TestDeleteOffsetsEmptyGroupRejoining(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	log := newFakeLog()
	c := newTestCoordinator(t, log, clock, time.Minute)
	t0 := cluster.TopicPartition{Topic: "t", Partition: 0}
	t1 := cluster.TopicPartition{Topic: "t", Partition: 1}
	u0 := cluster.TopicPartition{Topic: "u", Partition: 0}
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{"t"}
	req := joinReq("g", "")
	req.Protocols = []Protocol{{Name: "range", Metadata: meta.AppendTo(nil)}}
	state := func(c *Coordinator) string { d, _ := c.DescribeGroup("g"); return d.State }
	// joinWaiting starts a join of an Empty group: it waits out the
	// initial rebalance delay.
	joinWaiting := func(c *Coordinator) <-chan joinOutcome {
		ch := joinAsync(c, req)
		waitFor(t, func() bool { return state(c) == "PreparingRebalance" })
		return ch
	}
	completeJoin := func(c *Coordinator, ch <-chan joinOutcome) JoinResult {
		clock.Advance(req.RebalanceTimeout + time.Second)
		c.Tick()
		j := recv(t, ch)
		if j.err != nil {
			t.Fatalf("join: %v", j.err)
		}
		return j.res
	}

	j := completeJoin(c, joinWaiting(c))
	if s := recv(t, syncAsync(t, c, SyncRequest{Group: "g", Generation: j.Generation, MemberID: j.MemberID,
		Assignments: map[string][]byte{j.MemberID: {}}})); s.err != nil {
		t.Fatalf("sync: %v", s.err)
	}
	commit(t, c, CommitRequest{Group: "g", Generation: j.Generation, MemberID: j.MemberID, Retention: -1,
		Offsets: map[cluster.TopicPartition]CommitOffset{t0: {Offset: 1}, t1: {Offset: 2}, u0: {Offset: 3}}})
	if errs, _ := c.LeaveGroup("g", []LeaveMember{{MemberID: j.MemberID}}); errs[0] != nil {
		t.Fatalf("leave: %v", errs)
	}
	if s := state(c); s != "Empty" {
		t.Fatalf("group after its last member left: %s", s)
	}

	// Loaded Empty, then joined (first, while c has not written more).
	c2 := newTestCoordinator(t, log, clock, time.Minute)
	joinWaiting(c2)
	if got := deleteOffsets(t, c2, "g", t1); got[t1] != nil {
		t.Fatalf("loaded Empty group with a member joining: delete t-1: %v", got)
	}
	if offs := offsetsOf(t, c2, "g"); len(offs) != 2 {
		t.Fatalf("offsets in the second coordinator after deleting t-1: %v", offs)
	}

	// Became Empty here, then joined.
	joining := joinWaiting(c)
	if got := deleteOffsets(t, c, "g", t0); got[t0] != nil {
		t.Fatalf("Empty group with a member joining: delete t-0: %v", got)
	}
	if offs := offsetsOf(t, c, "g"); len(offs) != 2 || offs[u0].Offset != 3 {
		t.Fatalf("offsets after deleting t-0: %v", offs)
	}
	completeJoin(c, joining)
	if s := state(c); s != "CompletingRebalance" {
		t.Fatalf("group after the join: %s", s)
	}
	if got := deleteOffsets(t, c, "g", t1, u0); !errors.Is(got[t1], ErrGroupSubscribedToTopic) || got[u0] != nil {
		t.Fatalf("new generation subscribed to t: %v", got)
	}
}
