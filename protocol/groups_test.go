package protocol

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/group"
	"github.com/kafkazk/broker/partition"
)

// testOffsetsPartitions is offsets.topic.num.partitions of test brokers.
const testOffsetsPartitions = 3

// fakeOffsetsLog adds LogEndOffset to fakeReplicas, making it a group.Log.
type fakeOffsetsLog struct{ *fakeReplicas }

func (f fakeOffsetsLog) LogEndOffset(tp cluster.TopicPartition) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.parts[tp]
	if l == nil {
		return 0, fmt.Errorf("%s: %w", tp, cluster.ErrUnknownTopic)
	}
	return l.leo, nil
}

// newTestGroups is a real coordinator over the fake replicas that leads
// every partition of __consumer_offsets; it finishes loading once
// FindCoordinator has created the topic.
func newTestGroups(t *testing.T, r *fakeReplicas) *group.Coordinator {
	g := group.New(group.Config{
		BrokerID: 1, NumPartitions: testOffsetsPartitions,
		InitialRebalanceDelay: -1, MinSessionTimeout: time.Second, TickInterval: 20 * time.Millisecond,
		Log: fakeOffsetsLog{r}, Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
	})
	for p := int32(0); p < testOffsetsPartitions; p++ {
		g.OnBecomeLeader(p, 0)
	}
	g.Start()
	t.Cleanup(func() { g.Close() })
	return g
}

// TestGroupKgoConsumer runs a kgo consumer group (JoinGroup v9 with
// MEMBER_ID_REQUIRED, SyncGroup v5, OffsetCommit/OffsetFetch, batched
// FindCoordinator) against the server and checks the commits through kadm.
func TestGroupKgoConsumer(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "t", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prod, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.DefaultProduceTopic("t"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for i := 0; i < 20; i++ {
		if err := prod.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 2), Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t"),
		kgo.DisableAutoCommit(), kgo.SessionTimeout(6*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for got < 20 {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of 20: %v", got, fs.Errors())
		}
		got += fs.NumRecords()
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(prod)
	described, err := adm.DescribeGroups(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if d := described["g"]; d.State != "Stable" || len(d.Members) != 1 || d.Protocol == "" {
		t.Errorf("describe: %+v", d)
	}
	cons.Close() // leaves the group
	offs, err := adm.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		if o, ok := offs.Lookup("t", p); !ok || o.At != 10 {
			t.Errorf("partition %d committed %+v, want 10", p, o)
		}
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil || len(listed) != 1 || listed["g"].State != "Empty" {
		t.Errorf("list groups: %+v %v", listed, err)
	}
	deleted, err := adm.DeleteGroups(ctx, "g")
	if err != nil || deleted["g"].Err != nil {
		t.Errorf("delete group: %+v %v", deleted, err)
	}
	if offs, err = adm.FetchOffsets(ctx, "g"); err != nil || len(offs) != 0 {
		t.Errorf("offsets after delete: %+v %v", offs, err)
	}
}

// TestGroupOldVersions walks kafka-go's Reader's versions by hand:
// FindCoordinator v0, JoinGroup v1, SyncGroup v0, Heartbeat v0,
// OffsetCommit v2, OffsetFetch v1, LeaveGroup v0.
func TestGroupOldVersions(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "t", 1)
	c := b.dial(t)

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = "old"
	var fr *kmsg.FindCoordinatorResponse
	deadline := time.Now().Add(10 * time.Second)
	for {
		fr = c.roundTrip(fc).(*kmsg.FindCoordinatorResponse)
		if fr.ErrorCode == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if fr.ErrorCode != 0 || fr.NodeID != 1 || fr.Port != b.port {
		t.Fatalf("find coordinator: %+v", fr)
	}

	join := kmsg.NewPtrJoinGroupRequest()
	join.Version = 1
	join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = "old", 6000, 6000, "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{1}}}
	var jr *kmsg.JoinGroupResponse
	for {
		jr = c.roundTrip(join).(*kmsg.JoinGroupResponse)
		if jr.ErrorCode != kerr.CoordinatorLoadInProgress.Code || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if jr.ErrorCode != 0 || jr.Generation != 1 || jr.LeaderID != jr.MemberID || len(jr.Members) != 1 || *jr.Protocol != "range" {
		t.Fatalf("join: %+v", jr)
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.Generation, sync.MemberID = "old", jr.Generation, jr.MemberID
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: jr.MemberID, MemberAssignment: []byte("a")}}
	if sr := c.roundTrip(sync).(*kmsg.SyncGroupResponse); sr.ErrorCode != 0 || string(sr.MemberAssignment) != "a" {
		t.Fatalf("sync: %+v", sr)
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.Generation, hb.MemberID = "old", jr.Generation, jr.MemberID
	if r := c.roundTrip(hb).(*kmsg.HeartbeatResponse); r.ErrorCode != 0 {
		t.Fatalf("heartbeat: %d", r.ErrorCode)
	}
	hb.Generation++
	if r := c.roundTrip(hb).(*kmsg.HeartbeatResponse); r.ErrorCode != kerr.IllegalGeneration.Code {
		t.Fatalf("heartbeat of a later generation: %d", r.ErrorCode)
	}

	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Version = 2
	oc.Group, oc.Generation, oc.MemberID = "old", jr.Generation, jr.MemberID
	oc.Topics = []kmsg.OffsetCommitRequestTopic{
		{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 7, Metadata: kmsg.StringPtr("m")}}},
		{Topic: "nope", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}},
	}
	ocr := c.roundTrip(oc).(*kmsg.OffsetCommitResponse)
	if ocr.Topics[0].Partitions[0].ErrorCode != 0 || ocr.Topics[1].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("commit: %+v", ocr)
	}
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version = 1
	of.Group = "old"
	of.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0, 1}}}
	ofr := c.roundTrip(of).(*kmsg.OffsetFetchResponse)
	if p := ofr.Topics[0].Partitions; len(p) != 2 || p[0].Offset != 7 || *p[0].Metadata != "m" || p[1].Offset != -1 {
		t.Fatalf("fetch: %+v", ofr)
	}

	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group, leave.MemberID = "old", jr.MemberID
	if r := c.roundTrip(leave).(*kmsg.LeaveGroupResponse); r.ErrorCode != 0 {
		t.Fatalf("leave: %d", r.ErrorCode)
	}
	if r := c.roundTrip(leave).(*kmsg.LeaveGroupResponse); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("second leave: %d", r.ErrorCode)
	}
	// Producing to the internal topic is refused.
	pr := c.roundTrip(produceRequest(7, 1, 1000, "__consumer_offsets", 0, makeBatch(0, "x"))).(*kmsg.ProduceResponse)
	if e := pr.Topics[0].Partitions[0].ErrorCode; e != kerr.InvalidTopicException.Code {
		t.Fatalf("produce to __consumer_offsets: %d", e)
	}
	// Without a transaction coordinator, FindCoordinator for a transactional
	// id is refused with an error clients do not retry.
	c = startBroker(t, withoutTransactions()).dial(t)
	fc = kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorType, fc.CoordinatorKey = 2, 1, "txn"
	if r := c.roundTrip(fc).(*kmsg.FindCoordinatorResponse); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("transaction coordinator: %d", r.ErrorCode)
	}
}

// TestFindCoordinatorBatched checks v4's batched keys and the refusal to
// create __consumer_offsets with fewer live brokers than its replication
// factor.
func TestFindCoordinatorBatched(t *testing.T) {
	b := startBroker(t, func(c *Config) { c.OffsetsTopic.ReplicationFactor = 3 })
	c := b.dial(t)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version = 4
	fc.CoordinatorKeys = []string{"a", "b"}
	r := c.roundTrip(fc).(*kmsg.FindCoordinatorResponse)
	if len(r.Coordinators) != 2 || r.Coordinators[0].Key != "a" || r.Coordinators[1].ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("batched with too few brokers: %+v", r)
	}
	if _, ok := b.cluster.Topic("__consumer_offsets"); ok {
		t.Fatal("__consumer_offsets created with 1 broker and replication factor 3")
	}
}

// AppendWith makes fakeOffsetsLog a group.Log: the options make no
// difference to the fake.
func (f fakeOffsetsLog) AppendWith(tp cluster.TopicPartition, records []byte, opts partition.AppendOptions) (partition.AppendResult, error) {
	return f.Append(tp, records, opts.Acks)
}
