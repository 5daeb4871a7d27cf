package group

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
)

func TestPartitionForMatchesJava(t *testing.T) {
	// Values of Java's Utils.abs(groupId.hashCode()) % 50.
	for _, tc := range []struct {
		group string
		want  int32
	}{
		{"", 0}, {"group", 47}, {"my-consumer-group", 13}, {"test-group-xyz", 6},
		{"kafka-consumer", 7}, {"😀g", 22},
	} {
		if got := PartitionFor(tc.group, 50); got != tc.want {
			t.Errorf("PartitionFor(%q) = %d, want %d", tc.group, got, tc.want)
		}
	}
}

func syncAsync(t *testing.T, c *Coordinator, req SyncRequest) <-chan syncReply {
	ch := make(chan syncReply, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := c.SyncGroup(ctx, req)
		ch <- syncReply{res, err}
	}()
	return ch
}

// joinNew does the KIP-394 dance: a first join gets MEMBER_ID_REQUIRED
// and a member id, the second join with it takes part in the rebalance.
func joinNew(t *testing.T, c *Coordinator, group string) (string, <-chan joinOutcome) {
	t.Helper()
	req := joinReq(group, "")
	req.RequireKnownMemberID = true
	first := recv(t, joinAsync(c, req))
	if !errors.Is(first.err, ErrMemberIDRequired) || first.res.MemberID == "" {
		t.Fatalf("first join: %+v %v, want MEMBER_ID_REQUIRED with a member id", first.res, first.err)
	}
	req.MemberID = first.res.MemberID
	return first.res.MemberID, joinAsync(c, req)
}

// TestJoinSyncHeartbeatLeave walks two members through joins, syncs,
// heartbeats, commits and a leave, checking generation fencing.
func TestJoinSyncHeartbeatLeave(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	c := newTestCoordinator(t, newFakeLog(), clock, -1)
	a, aJoin := joinNew(t, c, "g")
	ja := recv(t, aJoin)
	if ja.err != nil || ja.res.Generation != 1 || ja.res.Leader != a || len(ja.res.Members) != 1 || ja.res.Protocol != "range" {
		t.Fatalf("join a: %+v %v", ja.res, ja.err)
	}
	sa := recv(t, syncAsync(t, c, SyncRequest{Group: "g", Generation: 1, MemberID: a, Assignments: map[string][]byte{a: []byte("A1")}}))
	if sa.err != nil || string(sa.res.Assignment) != "A1" {
		t.Fatalf("sync a: %+v %v", sa.res, sa.err)
	}
	if err := c.Heartbeat(HeartbeatRequest{Group: "g", Generation: 1, MemberID: a}); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}

	// B joins: A is told to rejoin through its heartbeat.
	b, bJoin := joinNew(t, c, "g")
	noAnswer(t, bJoin)
	if err := c.Heartbeat(HeartbeatRequest{Group: "g", Generation: 1, MemberID: a}); !errors.Is(err, ErrRebalanceInProgress) {
		t.Fatalf("heartbeat during rebalance: %v", err)
	}
	// A commits in the old generation while rebalancing: allowed (Kafka).
	tp := cluster.TopicPartition{Topic: "t", Partition: 0}
	if errs, err := c.CommitOffsets(context.Background(), CommitRequest{Group: "g", Generation: 1, MemberID: a, Retention: -1,
		Offsets: map[cluster.TopicPartition]CommitOffset{tp: {Offset: 5, LeaderEpoch: 2, Metadata: "x"}}}); err != nil || errs[tp] != nil {
		t.Fatalf("commit while rebalancing: %v %v", errs, err)
	}
	aJoin = joinAsync(c, joinReq("g", a))
	ja, jb := recv(t, aJoin), recv(t, bJoin)
	if ja.err != nil || jb.err != nil || ja.res.Generation != 2 || jb.res.Generation != 2 {
		t.Fatalf("rejoin: %+v %v / %+v %v", ja.res, ja.err, jb.res, jb.err)
	}
	if len(ja.res.Members) != 2 || len(jb.res.Members) != 0 || jb.res.Leader != a {
		t.Fatalf("leader %q sees %d members, follower %d", jb.res.Leader, len(ja.res.Members), len(jb.res.Members))
	}
	if err := c.Heartbeat(HeartbeatRequest{Group: "g", Generation: 1, MemberID: a}); !errors.Is(err, ErrIllegalGeneration) {
		t.Fatalf("old generation heartbeat: %v", err)
	}
	// The follower's sync waits for the leader's.
	bSync := syncAsync(t, c, SyncRequest{Group: "g", Generation: 2, MemberID: b})
	noAnswer(t, bSync)
	if _, err := c.CommitOffsets(context.Background(), CommitRequest{Group: "g", Generation: 2, MemberID: a, Retention: -1,
		Offsets: map[cluster.TopicPartition]CommitOffset{tp: {Offset: 6}}}); !errors.Is(err, ErrRebalanceInProgress) {
		t.Fatalf("commit while completing the rebalance: %v", err)
	}
	sa = recv(t, syncAsync(t, c, SyncRequest{Group: "g", Generation: 2, MemberID: a,
		Assignments: map[string][]byte{a: []byte("A2"), b: []byte("B2")}}))
	sb := recv(t, bSync)
	if sa.err != nil || sb.err != nil || string(sa.res.Assignment) != "A2" || string(sb.res.Assignment) != "B2" {
		t.Fatalf("sync: %+v %v / %+v %v", sa.res, sa.err, sb.res, sb.err)
	}
	d, _ := c.DescribeGroup("g")
	if d.State != "Stable" || len(d.Members) != 2 || d.Protocol != "range" {
		t.Fatalf("describe: %+v", d)
	}

	// Generation fencing of commits, then a good one.
	commit := func(gen int32, member string, off int64) error {
		errs, err := c.CommitOffsets(context.Background(), CommitRequest{Group: "g", Generation: gen, MemberID: member, Retention: -1,
			Offsets: map[cluster.TopicPartition]CommitOffset{tp: {Offset: off, LeaderEpoch: 3}}})
		if err == nil {
			err = errs[tp]
		}
		return err
	}
	if err := commit(1, a, 7); !errors.Is(err, ErrIllegalGeneration) {
		t.Fatalf("commit of an old generation: %v", err)
	}
	if err := commit(2, "nobody", 7); !errors.Is(err, ErrUnknownMemberID) {
		t.Fatalf("commit of an unknown member: %v", err)
	}
	if err := commit(-1, "", 7); !errors.Is(err, ErrUnknownMemberID) {
		t.Fatalf("simple commit to a group with members: %v", err)
	}
	if err := commit(2, b, 8); err != nil {
		t.Fatalf("commit: %v", err)
	}
	offs, _ := c.FetchOffsets("g", nil, false)
	if o := offs[tp]; o.Offset != 8 || o.LeaderEpoch != 3 {
		t.Fatalf("fetched %+v", offs)
	}

	// B leaves; A rejoins alone in generation 3.
	errs, err := c.LeaveGroup("g", []LeaveMember{{MemberID: b}, {MemberID: "ghost"}})
	if err != nil || errs[0] != nil || !errors.Is(errs[1], ErrUnknownMemberID) {
		t.Fatalf("leave: %v %v", errs, err)
	}
	ja = recv(t, joinAsync(c, joinReq("g", a)))
	if ja.err != nil || ja.res.Generation != 3 || len(ja.res.Members) != 1 {
		t.Fatalf("join after leave: %+v %v", ja.res, ja.err)
	}
	if err := c.Heartbeat(HeartbeatRequest{Group: "g", Generation: 3, MemberID: b}); !errors.Is(err, ErrUnknownMemberID) {
		t.Fatalf("heartbeat of a member that left: %v", err)
	}
	if got := c.DeleteGroups(context.Background(), []string{"g", "none"}); !errors.Is(got["g"], ErrNonEmptyGroup) || !errors.Is(got["none"], ErrGroupIDNotFound) {
		t.Fatalf("delete: %v", got)
	}
}

func TestJoinValidation(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	c := newTestCoordinator(t, newFakeLog(), clock, -1)
	req := joinReq("g", "")
	req.SessionTimeout = 500 * time.Millisecond
	if r := recv(t, joinAsync(c, req)); !errors.Is(r.err, ErrInvalidSessionTimeout) {
		t.Fatalf("short session: %v", r.err)
	}
	req = joinReq("", "")
	if r := recv(t, joinAsync(c, req)); !errors.Is(r.err, ErrInvalidGroupID) {
		t.Fatalf("empty group: %v", r.err)
	}
	if r := recv(t, joinAsync(c, joinReq("g", "made-up"))); !errors.Is(r.err, ErrUnknownMemberID) {
		t.Fatalf("unknown member of a new group: %v", r.err)
	}
	a := recv(t, joinAsync(c, joinReq("g", "")))
	if a.err != nil {
		t.Fatal(a.err)
	}
	other := joinReq("g", "")
	other.Protocols = []Protocol{{Name: "roundrobin"}}
	if r := recv(t, joinAsync(c, other)); !errors.Is(r.err, ErrInconsistentGroupProtocol) {
		t.Fatalf("no common protocol: %v", r.err)
	}
	other = joinReq("g", "")
	other.ProtocolType = "connect"
	if r := recv(t, joinAsync(c, other)); !errors.Is(r.err, ErrInconsistentGroupProtocol) {
		t.Fatalf("other protocol type: %v", r.err)
	}
}

// TestSessionExpiry: a member that stops heartbeating is removed after
// its session timeout and the rest rebalance.
func TestSessionExpiry(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	c := newTestCoordinator(t, newFakeLog(), clock, -1)
	aJoin := joinAsync(c, joinReq("g", ""))
	ja := recv(t, aJoin)
	a := ja.res.MemberID
	bJoin := joinAsync(c, joinReq("g", ""))
	noAnswer(t, bJoin)
	aJoin = joinAsync(c, joinReq("g", a))
	ja, jb := recv(t, aJoin), recv(t, bJoin)
	b := jb.res.MemberID
	recv(t, syncAsync(t, c, SyncRequest{Group: "g", Generation: ja.res.Generation, MemberID: a}))
	gen := ja.res.Generation
	for i := 0; i < 3; i++ {
		clock.Advance(4 * time.Second)
		if err := c.Heartbeat(HeartbeatRequest{Group: "g", Generation: gen, MemberID: a}); err != nil {
			t.Fatalf("heartbeat %d: %v", i, err)
		}
		c.Tick()
	}
	// b's 10 s session has expired: a must rejoin, alone.
	if err := c.Heartbeat(HeartbeatRequest{Group: "g", Generation: gen, MemberID: a}); !errors.Is(err, ErrRebalanceInProgress) {
		t.Fatalf("heartbeat after b expired: %v", err)
	}
	ja = recv(t, joinAsync(c, joinReq("g", a)))
	if ja.err != nil || ja.res.Generation != gen+1 || len(ja.res.Members) != 1 {
		t.Fatalf("rejoin: %+v %v", ja.res, ja.err)
	}
	if err := c.Heartbeat(HeartbeatRequest{Group: "g", Generation: gen + 1, MemberID: b}); !errors.Is(err, ErrUnknownMemberID) {
		t.Fatalf("expired member heartbeat: %v", err)
	}
	// a stops too: the group ends Empty with a new generation.
	clock.Advance(11 * time.Second)
	c.Tick()
	d, _ := c.DescribeGroup("g")
	if d.State != "Empty" || len(d.Members) != 0 {
		t.Fatalf("after every session expired: %+v", d)
	}
}

// TestRebalanceTimeout: a member that does not rejoin within the rebalance
// timeout is dropped from the new generation.
func TestRebalanceTimeout(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	c := newTestCoordinator(t, newFakeLog(), clock, -1)
	ja := recv(t, joinAsync(c, joinReq("g", "")))
	a := ja.res.MemberID
	recv(t, syncAsync(t, c, SyncRequest{Group: "g", Generation: 1, MemberID: a}))
	bJoin := joinAsync(c, joinReq("g", ""))
	noAnswer(t, bJoin)
	for i := 0; i < 4; i++ { // a heartbeats but never rejoins
		clock.Advance(5 * time.Second)
		_ = c.Heartbeat(HeartbeatRequest{Group: "g", Generation: 1, MemberID: a})
		c.Tick()
	}
	jb := recv(t, bJoin)
	if jb.err != nil || jb.res.Generation != 2 || jb.res.Leader != jb.res.MemberID || len(jb.res.Members) != 1 {
		t.Fatalf("b after the rebalance timeout: %+v %v", jb.res, jb.err)
	}
}

// TestInitialRebalanceDelay: the first rebalance of a new group waits
// group.initial.rebalance.delay.ms, extended while members keep coming.
func TestInitialRebalanceDelay(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	c := newTestCoordinator(t, newFakeLog(), clock, 3*time.Second)
	aJoin := joinAsync(c, joinReq("g", ""))
	noAnswer(t, aJoin)
	clock.Advance(2 * time.Second)
	c.Tick()
	bJoin := joinAsync(c, joinReq("g", ""))
	noAnswer(t, bJoin)
	clock.Advance(1 * time.Second) // the first delay ends; b arrived: extend
	c.Tick()
	noAnswer(t, aJoin)
	clock.Advance(3 * time.Second)
	c.Tick()
	ja, jb := recv(t, aJoin), recv(t, bJoin)
	if ja.err != nil || jb.err != nil || ja.res.Generation != 1 || jb.res.Generation != 1 {
		t.Fatalf("%+v %v / %+v %v", ja.res, ja.err, jb.res, jb.err)
	}
}

// TestStaticMembership: a static member rejoining without its member id
// gets a new one without a rebalance; the old id is fenced.
func TestStaticMembership(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	c := newTestCoordinator(t, newFakeLog(), clock, -1)
	inst := "instance-1"
	req := joinReq("g", "")
	req.InstanceID = &inst
	req.RequireKnownMemberID = true // static members skip MEMBER_ID_REQUIRED
	ja := recv(t, joinAsync(c, req))
	if ja.err != nil || ja.res.Generation != 1 {
		t.Fatalf("static join: %+v %v", ja.res, ja.err)
	}
	old := ja.res.MemberID
	recv(t, syncAsync(t, c, SyncRequest{Group: "g", Generation: 1, MemberID: old, InstanceID: &inst,
		Assignments: map[string][]byte{old: []byte("S")}}))
	again := recv(t, joinAsync(c, req))
	if again.err != nil || again.res.Generation != 1 || again.res.MemberID == old {
		t.Fatalf("static rejoin: %+v %v", again.res, again.err)
	}
	if err := c.Heartbeat(HeartbeatRequest{Group: "g", Generation: 1, MemberID: old, InstanceID: &inst}); !errors.Is(err, ErrFencedInstanceID) {
		t.Fatalf("old member id: %v", err)
	}
	s := recv(t, syncAsync(t, c, SyncRequest{Group: "g", Generation: 1, MemberID: again.res.MemberID, InstanceID: &inst}))
	if s.err != nil || string(s.res.Assignment) != "S" {
		t.Fatalf("sync of the new id: %+v %v", s.res, s.err)
	}
	errs, _ := c.LeaveGroup("g", []LeaveMember{{MemberID: old, InstanceID: &inst}})
	if !errors.Is(errs[0], ErrFencedInstanceID) {
		t.Fatalf("leave with the old id: %v", errs)
	}
	errs, _ = c.LeaveGroup("g", []LeaveMember{{InstanceID: &inst}})
	if errs[0] != nil {
		t.Fatalf("leave by instance id: %v", errs)
	}
	if d, _ := c.DescribeGroup("g"); d.State != "Empty" {
		t.Fatalf("after the static member left: %+v", d)
	}
}

// TestSimpleCommitAndDelete: generation -1 commits for a group without
// members; DeleteGroups then writes tombstones.
func TestSimpleCommitAndDelete(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	log := newFakeLog()
	c := newTestCoordinator(t, log, clock, -1)
	tp := cluster.TopicPartition{Topic: "t", Partition: 1}
	errs, err := c.CommitOffsets(context.Background(), CommitRequest{Group: "s", Generation: -1, Retention: -1,
		Offsets: map[cluster.TopicPartition]CommitOffset{tp: {Offset: 42, LeaderEpoch: -1}}})
	if err != nil || errs[tp] != nil {
		t.Fatalf("simple commit: %v %v", errs, err)
	}
	if _, err := c.CommitOffsets(context.Background(), CommitRequest{Group: "other", Generation: 3, MemberID: "m", Retention: -1,
		Offsets: map[cluster.TopicPartition]CommitOffset{tp: {Offset: 1}}}); !errors.Is(err, ErrIllegalGeneration) {
		t.Fatalf("generation commit to an unknown group: %v", err)
	}
	big := CommitOffset{Offset: 1, Metadata: string(make([]byte, 5000))}
	errs, _ = c.CommitOffsets(context.Background(), CommitRequest{Group: "s", Generation: -1, Retention: -1,
		Offsets: map[cluster.TopicPartition]CommitOffset{tp: big}})
	if !errors.Is(errs[tp], ErrOffsetMetadataTooLarge) {
		t.Fatalf("large metadata: %v", errs)
	}
	if got := c.DeleteGroups(context.Background(), []string{"s"}); got["s"] != nil {
		t.Fatalf("delete: %v", got)
	}
	if offs, _ := c.FetchOffsets("s", nil, false); len(offs) != 0 {
		t.Fatalf("offsets after delete: %v", offs)
	}
	// Reloading the log finds nothing of the deleted group.
	c2 := newTestCoordinator(t, log, clock, -1)
	if offs, _ := c2.FetchOffsets("s", nil, false); len(offs) != 0 {
		t.Fatalf("offsets after delete and reload: %v", offs)
	}
	if l, _ := c2.ListGroups(); len(l) != 0 {
		t.Fatalf("groups after delete and reload: %v", l)
	}
}

// TestCommitWaitsForReplication: a commit is answered, and visible, only
// once the high watermark passes it; a write that fails maps to a
// coordinator error.
func TestCommitWaitsForReplication(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	log := newFakeLog()
	c := newTestCoordinator(t, log, clock, -1)
	tp := cluster.TopicPartition{Topic: "t", Partition: 0}
	log.setHold(true)
	done := make(chan error, 1)
	go func() {
		errs, err := c.CommitOffsets(context.Background(), CommitRequest{Group: "s", Generation: -1, Retention: -1,
			Offsets: map[cluster.TopicPartition]CommitOffset{tp: {Offset: 9}}})
		if err == nil {
			err = errs[tp]
		}
		done <- err
	}()
	noAnswer(t, done)
	if offs, _ := c.FetchOffsets("s", nil, false); len(offs) != 0 {
		t.Fatalf("unreplicated commit visible: %v", offs)
	}
	log.setHold(false)
	if err := recv(t, done); err != nil {
		t.Fatal(err)
	}
	if offs, _ := c.FetchOffsets("s", nil, false); offs[tp].Offset != 9 {
		t.Fatalf("after replication: %v", offs)
	}
	log.mu.Lock()
	log.failErr = partition.ErrNotEnoughReplicas
	log.mu.Unlock()
	errs, _ := c.CommitOffsets(context.Background(), CommitRequest{Group: "s", Generation: -1, Retention: -1,
		Offsets: map[cluster.TopicPartition]CommitOffset{tp: {Offset: 10}}})
	if !errors.Is(errs[tp], ErrCoordinatorNotAvailable) {
		t.Fatalf("commit with too few replicas: %v", errs)
	}
}

// TestLoadFromLog: a second coordinator over the same log rebuilds the
// groups (Stable, same generation and assignments) and offsets, and waits
// for the high watermark before answering.
func TestLoadFromLog(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	log := newFakeLog()
	c1 := newTestCoordinator(t, log, clock, -1)
	ja := recv(t, joinAsync(c1, joinReq("g", "")))
	a := ja.res.MemberID
	recv(t, syncAsync(t, c1, SyncRequest{Group: "g", Generation: 1, MemberID: a, Assignments: map[string][]byte{a: []byte("A")}}))
	tp := cluster.TopicPartition{Topic: "t", Partition: 2}
	if _, err := c1.CommitOffsets(context.Background(), CommitRequest{Group: "g", Generation: 1, MemberID: a, Retention: -1,
		Offsets: map[cluster.TopicPartition]CommitOffset{tp: {Offset: 77, LeaderEpoch: 4, Metadata: "meta"}}}); err != nil {
		t.Fatal(err)
	}
	c1.OnBecomeFollower(c1.PartitionFor("g"))
	if err := c1.Heartbeat(HeartbeatRequest{Group: "g", Generation: 1, MemberID: a}); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("after resigning: %v", err)
	}

	log.setHold(true) // the new leader's high watermark lags
	log.mu.Lock()
	for p, leo := range log.leo {
		log.hw[p] = leo - 1
	}
	log.mu.Unlock()
	c2 := New(Config{NumPartitions: testPartitions, InitialRebalanceDelay: -1, MinSessionTimeout: time.Second,
		Now: clock.Now, Log: log})
	t.Cleanup(func() { c2.Close() })
	p := c2.PartitionFor("g")
	c2.OnBecomeLeader(p, 2)
	time.Sleep(50 * time.Millisecond)
	if err := c2.Heartbeat(HeartbeatRequest{Group: "g", Generation: 1, MemberID: a}); !errors.Is(err, ErrCoordinatorLoadInProgress) {
		t.Fatalf("while loading: %v", err)
	}
	log.setHold(false)
	waitLoaded(t, c2)
	if err := c2.Heartbeat(HeartbeatRequest{Group: "g", Generation: 1, MemberID: a}); err != nil {
		t.Fatalf("heartbeat to the new coordinator: %v", err)
	}
	d, _ := c2.DescribeGroup("g")
	if d.State != "Stable" || len(d.Members) != 1 || string(d.Members[0].Assignment) != "A" || d.Protocol != "range" {
		t.Fatalf("loaded group: %+v", d)
	}
	offs, _ := c2.FetchOffsets("g", []cluster.TopicPartition{tp}, false)
	if o := offs[tp]; o.Offset != 77 || o.LeaderEpoch != 4 || o.Metadata != "meta" {
		t.Fatalf("loaded offsets: %+v", offs)
	}
	if _, err := c2.FetchOffsets("not-here", nil, false); c2.PartitionFor("not-here") != p && !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("group of a partition not led: %v", err)
	}
}

// TestResignAnswersWaiters: a join waiting when the partition is lost is
// answered NOT_COORDINATOR.
func TestResignAnswersWaiters(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	c := newTestCoordinator(t, newFakeLog(), clock, 3*time.Second)
	j := joinAsync(c, joinReq("g", ""))
	noAnswer(t, j)
	c.OnBecomeFollower(c.PartitionFor("g"))
	if r := recv(t, j); !errors.Is(r.err, ErrNotCoordinator) {
		t.Fatalf("waiting join after resigning: %v", r.err)
	}
}

// TestRecordFormats pins the bytes of the four record kinds against
// Kafka's schemas and decodes them back.
func TestRecordFormats(t *testing.T) {
	key := offsetKey("g", "t", 3)
	if want := "0001" + "0001" + "67" + "0001" + "74" + "00000003"; hex.EncodeToString(key) != want {
		t.Errorf("offset key %x, want %s", key, want)
	}
	val := offsetValue(Offset{Offset: 5, LeaderEpoch: 2, Metadata: "m", CommitTimestamp: 1000, ExpireTimestamp: -1})
	if want := "0003" + "0000000000000005" + "00000002" + "0001" + "6d" + "00000000000003e8"; hex.EncodeToString(val) != want {
		t.Errorf("offset value %x, want %s", val, want)
	}
	val1 := offsetValue(Offset{Offset: 5, LeaderEpoch: 2, Metadata: "", CommitTimestamp: 1000, ExpireTimestamp: 2000})
	if want := "0001" + "0000000000000005" + "0000" + "00000000000003e8" + "00000000000007d0"; hex.EncodeToString(val1) != want {
		t.Errorf("offset value v1 %x, want %s", val1, want)
	}
	gk := groupKey("g")
	if want := "0002" + "0001" + "67"; hex.EncodeToString(gk) != want {
		t.Errorf("group key %x, want %s", gk, want)
	}
	inst := "i"
	g := newGroup("g", 0, time.UnixMilli(1000))
	g.protocolType, g.protocol, g.generation, g.leader = "consumer", "range", 7, "m1"
	g.members["m1"] = &member{id: "m1", instanceID: &inst, clientID: "c", clientHost: "/h",
		protocols: []Protocol{{Name: "range", Metadata: []byte{1}}}, assignment: []byte{2},
		sessionTimeout: 10 * time.Second, rebalanceTimeout: 20 * time.Second}
	gv := groupValue(g, time.UnixMilli(1000))
	want := "0003" + "0008" + hex.EncodeToString([]byte("consumer")) + "00000007" +
		"0005" + hex.EncodeToString([]byte("range")) + "0002" + hex.EncodeToString([]byte("m1")) +
		"00000000000003e8" + "00000001" +
		"0002" + hex.EncodeToString([]byte("m1")) + "0001" + "69" + "0001" + "63" + "0002" + "2f68" +
		"00004e20" + "00002710" + "00000001" + "01" + "00000001" + "02"
	if hex.EncodeToString(gv) != want {
		t.Errorf("group value\n got %x\nwant %s", gv, want)
	}

	d, err := decodeRecord(key, val)
	if err != nil || !d.isOffset || d.group != "g" || d.topic != "t" || d.partition != 3 || d.offset.Offset != 5 || d.offset.LeaderEpoch != 2 {
		t.Errorf("decode offset: %+v %v", d, err)
	}
	d, err = decodeRecord(gk, gv)
	if err != nil || d.isOffset || d.metadata.Generation != 7 || *d.metadata.Members[0].InstanceID != "i" ||
		!bytes.Equal(d.metadata.Members[0].Assignment, []byte{2}) {
		t.Errorf("decode group: %+v %v", d, err)
	}
	if d, err = decodeRecord(gk, nil); err != nil || d.metadata != nil {
		t.Errorf("decode tombstone: %+v %v", d, err)
	}
	if _, err := decodeRecord([]byte{0, 9, 0}, nil); !errors.Is(err, errBadRecord) {
		t.Errorf("unknown key version: %v", err)
	}

	// A batch of the three round-trips through parseBatches.
	batch := buildBatch([]kv{{key, val}, {gk, gv}, {gk, nil}}, time.UnixMilli(1000))
	var got []kv
	next, err := parseBatches(batch, func(_ int64, k, v []byte) { got = append(got, kv{k, v}) })
	if err != nil || next != 3 || len(got) != 3 || !bytes.Equal(got[1].value, gv) || got[2].value != nil {
		t.Fatalf("parse batch: next %d, %d records, %v", next, len(got), err)
	}
}

// TestSyncHeartbeatChecks pins the checks SyncGroup and Heartbeat share,
// in Kafka's order (group id, coordinator, group, fencing, member,
// generation), and the different answers each gives per group state.
func TestSyncHeartbeatChecks(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	c := newTestCoordinator(t, newFakeLog(), clock, -1)
	inst, other := "instance-1", "consumer-x"
	req := joinReq("g", "")
	req.InstanceID = &inst
	ja := recv(t, joinAsync(c, req))
	a := ja.res.MemberID
	if s := recv(t, syncAsync(t, c, SyncRequest{Group: "g", Generation: 1, MemberID: a, InstanceID: &inst,
		Assignments: map[string][]byte{a: []byte("A")}})); s.err != nil {
		t.Fatalf("sync: %v", s.err)
	}

	type check struct {
		name          string
		group, member string
		instance      *string
		generation    int32
		protocolType  *string
		sync, beat    error // nil: answered without error
	}
	run := func(t *testing.T, cases []check) {
		t.Helper()
		for _, tc := range cases {
			s := recv(t, syncAsync(t, c, SyncRequest{Group: tc.group, Generation: tc.generation, MemberID: tc.member,
				InstanceID: tc.instance, ProtocolType: tc.protocolType}))
			if !errors.Is(s.err, tc.sync) || tc.sync == nil && s.err != nil {
				t.Errorf("%s: SyncGroup = %v, want %v", tc.name, s.err, tc.sync)
			}
			err := c.Heartbeat(HeartbeatRequest{Group: tc.group, Generation: tc.generation, MemberID: tc.member, InstanceID: tc.instance})
			if !errors.Is(err, tc.beat) || tc.beat == nil && err != nil {
				t.Errorf("%s: Heartbeat = %v, want %v", tc.name, err, tc.beat)
			}
		}
	}

	// Stable.
	run(t, []check{
		{name: "empty group id", group: "", member: a, generation: 1, sync: ErrInvalidGroupID, beat: ErrInvalidGroupID},
		{name: "unknown group", group: "none", member: a, generation: 1, sync: ErrUnknownMemberID, beat: ErrUnknownMemberID},
		{name: "fenced before unknown member and generation", group: "g", member: "x", instance: &inst, generation: 9,
			sync: ErrFencedInstanceID, beat: ErrFencedInstanceID},
		{name: "unknown member before generation", group: "g", member: "x", generation: 9,
			sync: ErrUnknownMemberID, beat: ErrUnknownMemberID},
		{name: "generation before protocol type", group: "g", member: a, generation: 9, protocolType: &other,
			sync: ErrIllegalGeneration, beat: ErrIllegalGeneration},
		{name: "protocol type", group: "g", member: a, generation: 1, protocolType: &other,
			sync: ErrInconsistentGroupProtocol, beat: nil},
		{name: "stable", group: "g", member: a, instance: &inst, generation: 1},
	})

	// PreparingRebalance: b joins and waits for a.
	bJoin := joinAsync(c, joinReq("g", ""))
	noAnswer(t, bJoin)
	run(t, []check{
		{name: "preparing, old generation", group: "g", member: a, generation: 0,
			sync: ErrIllegalGeneration, beat: ErrIllegalGeneration},
		{name: "preparing", group: "g", member: a, generation: 1,
			sync: ErrRebalanceInProgress, beat: ErrRebalanceInProgress},
	})

	// CompletingRebalance: a heartbeats without error; its SyncGroup
	// (the leader's) is the one that ends it.
	req.MemberID = a
	ja, jb := recv(t, joinAsync(c, req)), recv(t, bJoin)
	if ja.err != nil || jb.err != nil || ja.res.Generation != 2 {
		t.Fatalf("rejoin: %+v %v / %+v %v", ja.res, ja.err, jb.res, jb.err)
	}
	run(t, []check{
		{name: "completing, old generation", group: "g", member: a, generation: 1,
			sync: ErrIllegalGeneration, beat: ErrIllegalGeneration},
		{name: "completing, unknown member", group: "g", member: "x", generation: 2,
			sync: ErrUnknownMemberID, beat: ErrUnknownMemberID},
	})
	if err := c.Heartbeat(HeartbeatRequest{Group: "g", Generation: 2, MemberID: jb.res.MemberID}); err != nil {
		t.Fatalf("heartbeat while completing: %v", err)
	}

	// Not coordinator: an empty group id is still INVALID_GROUP_ID first.
	for p := int32(0); p < testPartitions; p++ {
		c.OnBecomeFollower(p)
	}
	run(t, []check{
		{name: "empty group id, not coordinator", group: "", member: a, generation: 2, sync: ErrInvalidGroupID, beat: ErrInvalidGroupID},
		{name: "not coordinator", group: "g", member: a, generation: 2, sync: ErrNotCoordinator, beat: ErrNotCoordinator},
	})
}

// TestSyncWaitersFailed: a SyncGroup waiting for the leader's assignment
// is answered REBALANCE_IN_PROGRESS when a join starts a rebalance, the
// write's error when the leader's assignment cannot be stored (and the
// group rebalances), and NOT_COORDINATOR when the partition is lost.
func TestSyncWaitersFailed(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	log := newFakeLog()
	c := newTestCoordinator(t, log, clock, -1)
	// Generation 1 is a alone; b's join makes generation 2.
	ja := recv(t, joinAsync(c, joinReq("g", "")))
	a := ja.res.MemberID
	recv(t, syncAsync(t, c, SyncRequest{Group: "g", Generation: 1, MemberID: a}))
	bJoin := joinAsync(c, joinReq("g", ""))
	noAnswer(t, bJoin)
	ja, jb := recv(t, joinAsync(c, joinReq("g", a))), recv(t, bJoin)
	b := jb.res.MemberID
	bSync := syncAsync(t, c, SyncRequest{Group: "g", Generation: 2, MemberID: b})
	noAnswer(t, bSync)

	// A third member's join starts a rebalance: b's sync is answered.
	cJoin := joinAsync(c, joinReq("g", ""))
	if s := recv(t, bSync); !errors.Is(s.err, ErrRebalanceInProgress) {
		t.Fatalf("waiting sync when a member joins: %+v %v", s.res, s.err)
	}
	aJoin, bJoin := joinAsync(c, joinReq("g", a)), joinAsync(c, joinReq("g", b))
	ja, jb = recv(t, aJoin), recv(t, bJoin)
	jc := recv(t, cJoin)
	if ja.err != nil || jb.err != nil || jc.err != nil || ja.res.Generation != 3 || ja.res.Leader != a {
		t.Fatalf("rejoin: %+v %v / %+v %v / %+v %v", ja.res, ja.err, jb.res, jb.err, jc.res, jc.err)
	}

	// The leader's assignment cannot be written: every waiting sync gets
	// the write's error and the group rebalances.
	bSync = syncAsync(t, c, SyncRequest{Group: "g", Generation: 3, MemberID: b})
	noAnswer(t, bSync)
	log.mu.Lock()
	log.failErr = partition.ErrNotEnoughReplicas
	log.mu.Unlock()
	sa := recv(t, syncAsync(t, c, SyncRequest{Group: "g", Generation: 3, MemberID: a,
		Assignments: map[string][]byte{a: []byte("A"), b: []byte("B")}}))
	if sb := recv(t, bSync); !errors.Is(sa.err, ErrCoordinatorNotAvailable) || !errors.Is(sb.err, ErrCoordinatorNotAvailable) {
		t.Fatalf("syncs when the write fails: %v / %v", sa.err, sb.err)
	}
	if err := c.Heartbeat(HeartbeatRequest{Group: "g", Generation: 3, MemberID: b}); !errors.Is(err, ErrRebalanceInProgress) {
		t.Fatalf("heartbeat after the failed write: %v", err)
	}
	log.mu.Lock()
	log.failErr = nil
	log.mu.Unlock()

	// Generation 4; losing the partition answers b's waiting sync.
	aJoin, bJoin, cJoin = joinAsync(c, joinReq("g", a)), joinAsync(c, joinReq("g", b)), joinAsync(c, joinReq("g", jc.res.MemberID))
	ja, jb, jc = recv(t, aJoin), recv(t, bJoin), recv(t, cJoin)
	if ja.err != nil || jb.err != nil || jc.err != nil || jb.res.Generation != 4 {
		t.Fatalf("rejoin after the failed write: %+v %v / %+v %v / %+v %v", ja.res, ja.err, jb.res, jb.err, jc.res, jc.err)
	}
	bSync = syncAsync(t, c, SyncRequest{Group: "g", Generation: 4, MemberID: b})
	noAnswer(t, bSync)
	c.OnBecomeFollower(c.PartitionFor("g"))
	if s := recv(t, bSync); !errors.Is(s.err, ErrNotCoordinator) {
		t.Fatalf("waiting sync after resigning: %v", s.err)
	}
}
