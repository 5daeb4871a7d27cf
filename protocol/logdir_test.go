package protocol

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
)

// offlineDirReplicas is the fakes with a second log dir that failed: the
// partitions in offline answer partition.ErrStorage, as partition.Manager
// answers for the replicas of an offline log dir.
type offlineDirReplicas struct {
	*fakeTxnReplicas
	offline map[cluster.TopicPartition]bool
}

func (f *offlineDirReplicas) err(tp cluster.TopicPartition) error {
	if f.offline[tp] {
		return fmt.Errorf("%w: %s is in offline log dir /fake/failed", partition.ErrStorage, tp)
	}
	return nil
}

func (f *offlineDirReplicas) Append(tp cluster.TopicPartition, records []byte, acks int16) (partition.AppendResult, error) {
	if err := f.err(tp); err != nil {
		return partition.AppendResult{}, err
	}
	return f.fakeTxnReplicas.Append(tp, records, acks)
}

func (f *offlineDirReplicas) AppendWith(tp cluster.TopicPartition, records []byte, opts partition.AppendOptions) (partition.AppendResult, error) {
	if err := f.err(tp); err != nil {
		return partition.AppendResult{}, err
	}
	return f.fakeTxnReplicas.AppendWith(tp, records, opts)
}

func (f *offlineDirReplicas) Read(tp cluster.TopicPartition, req partition.ReadRequest) (partition.ReadResult, error) {
	if err := f.err(tp); err != nil {
		return partition.ReadResult{}, err
	}
	return f.fakeTxnReplicas.Read(tp, req)
}

func (f *offlineDirReplicas) ListOffset(tp cluster.TopicPartition, ts int64, epoch int32, asker partition.OffsetsAsker) (int64, int64, int32, error) {
	if err := f.err(tp); err != nil {
		return 0, 0, 0, err
	}
	return f.fakeTxnReplicas.ListOffset(tp, ts, epoch, asker)
}

func (f *offlineDirReplicas) DescribeLogDirs() []partition.LogDirInfo {
	return append(f.fakeTxnReplicas.DescribeLogDirs(), partition.LogDirInfo{
		Dir: "/fake/failed", Err: fmt.Errorf("%w: log dir /fake/failed is offline", partition.ErrStorage)})
}

// TestLogDirOfflineErrorCodes: the replicas of an offline log dir answer
// KAFKA_STORAGE_ERROR (56) to Produce, Fetch and ListOffsets, and
// DescribeLogDirs answers the dir with that error and no topics while the
// healthy dir lists its replicas; the other partitions are served.
func TestLogDirOfflineErrorCodes(t *testing.T) {
	var od *offlineDirReplicas
	b := startBroker(t, func(c *Config) {
		od = &offlineDirReplicas{fakeTxnReplicas: c.Replicas.(*fakeTxnReplicas),
			offline: map[cluster.TopicPartition]bool{{Topic: "disk", Partition: 1}: true}}
		c.Replicas = od
	})
	createTopic(t, b, "disk", 2)
	c := b.dial(t)
	storage := kerr.KafkaStorageError.Code
	if storage != 56 {
		t.Fatalf("KAFKA_STORAGE_ERROR is %d", storage)
	}

	pr := kmsg.NewPtrProduceRequest()
	pr.Version, pr.Acks, pr.TimeoutMillis = 7, -1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "disk"
	for p := int32(0); p < 2; p++ {
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Partition, pp.Records = p, makeBatch(1000, "v")
		pt.Partitions = append(pt.Partitions, pp)
	}
	pr.Topics = append(pr.Topics, pt)
	presp := c.roundTrip(pr).(*kmsg.ProduceResponse)
	codes := map[int32]int16{}
	for _, p := range presp.Topics[0].Partitions {
		codes[p.Partition] = p.ErrorCode
	}
	if codes[0] != 0 || codes[1] != storage {
		t.Fatalf("produce codes %v, want disk-0 0 and disk-1 %d", codes, storage)
	}

	fr := kmsg.NewPtrFetchRequest()
	fr.Version, fr.ReplicaID, fr.MaxWaitMillis, fr.MaxBytes = 11, -1, 0, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "disk"
	for p := int32(0); p < 2; p++ {
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = p, 1<<20, -1
		ft.Partitions = append(ft.Partitions, fp)
	}
	fr.Topics = append(fr.Topics, ft)
	fresp := c.roundTrip(fr).(*kmsg.FetchResponse)
	codes = map[int32]int16{}
	for _, p := range fresp.Topics[0].Partitions {
		codes[p.Partition] = p.ErrorCode
	}
	if codes[0] != 0 || codes[1] != storage {
		t.Fatalf("fetch codes %v, want disk-0 0 and disk-1 %d", codes, storage)
	}

	lr := kmsg.NewPtrListOffsetsRequest()
	lr.Version, lr.ReplicaID = 5, -1
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "disk"
	for p := int32(0); p < 2; p++ {
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp, lp.CurrentLeaderEpoch = p, -1, -1
		lt.Partitions = append(lt.Partitions, lp)
	}
	lr.Topics = append(lr.Topics, lt)
	lresp := c.roundTrip(lr).(*kmsg.ListOffsetsResponse)
	codes = map[int32]int16{}
	for _, p := range lresp.Topics[0].Partitions {
		codes[p.Partition] = p.ErrorCode
	}
	if codes[0] != 0 || codes[1] != storage {
		t.Fatalf("list offsets codes %v, want disk-0 0 and disk-1 %d", codes, storage)
	}

	for v := int16(0); v <= 2; v++ {
		ld := kmsg.NewPtrDescribeLogDirsRequest()
		ld.Version = v
		resp := c.roundTrip(ld).(*kmsg.DescribeLogDirsResponse)
		if len(resp.Dirs) != 2 {
			t.Fatalf("v%d: dirs %+v", v, resp.Dirs)
		}
		healthy, failed := resp.Dirs[0], resp.Dirs[1]
		if healthy.ErrorCode != 0 || healthy.Dir != "/fake/logs" || len(healthy.Topics) != 1 {
			t.Errorf("v%d: healthy dir %+v", v, healthy)
		}
		if failed.ErrorCode != storage || failed.Dir != "/fake/failed" || len(failed.Topics) != 0 {
			t.Errorf("v%d: failed dir %+v, want error %d and no topics", v, failed, storage)
		}
	}
}

// TestLeaderAndIsrOfflineOutcomes: the controller's client sorts a
// LeaderAndIsr response into the partitions answered
// KAFKA_STORAGE_ERROR (offline replicas) and those answered without
// error; any other error is in neither.
func TestLeaderAndIsrOfflineOutcomes(t *testing.T) {
	b := startBroker(t)
	c := newBrokerClient(t, b)
	req := sampleLeaderAndIsr(5, 42)
	a0 := req.Partitions[0].TopicPartition
	var others []cluster.TopicPartition
	for _, p := range req.Partitions[1:] {
		others = append(others, p.TopicPartition)
	}
	b.control.set(map[cluster.TopicPartition]error{a0: fmt.Errorf("wrapped: %w", partition.ErrStorage)}, nil)
	offline, online, err := c.LeaderAndIsrOffline(context.Background(), b.self(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(offline, []cluster.TopicPartition{a0}) || !slices.Equal(online, others) {
		t.Fatalf("offline %v online %v, want [%v] and %v", offline, online, a0, others)
	}
	b.control.set(map[cluster.TopicPartition]error{a0: partition.ErrNotLeader}, nil)
	offline, online, err = c.LeaderAndIsrOffline(context.Background(), b.self(), req)
	if err != nil || len(offline) != 0 || !slices.Equal(online, others) {
		t.Fatalf("with another error: offline %v online %v err %v, want none offline and %v online", offline, online, err, others)
	}
}

func (f *offlineDirReplicas) DeleteRecords(ctx context.Context, tp cluster.TopicPartition, offset int64, alive func(int32) bool) (int64, error) {
	if err := f.err(tp); err != nil {
		return -1, err
	}
	return f.fakeTxnReplicas.DeleteRecords(ctx, tp, offset, alive)
}

// TestLogDirOfflineEpochAndDeleteRecords: a replica of an offline log dir
// answers KAFKA_STORAGE_ERROR (56) to OffsetsForLeaderEpoch (a follower
// truncating against it, and a consumer) and to DeleteRecords, as
// partition.Manager answers ErrStorage for it; the other partition is
// served.
func TestLogDirOfflineEpochAndDeleteRecords(t *testing.T) {
	offline := cluster.TopicPartition{Topic: "disk", Partition: 1}
	var epochs *fakeLeaderEpochs
	b := startBroker(t, func(c *Config) {
		c.Replicas = &offlineDirReplicas{fakeTxnReplicas: c.Replicas.(*fakeTxnReplicas),
			offline: map[cluster.TopicPartition]bool{offline: true}}
		epochs = c.LeaderEpochs.(*fakeLeaderEpochs)
		epochs.answers[cluster.TopicPartition{Topic: "disk", Partition: 0}] = fakeEpochAnswer{epoch: 0, end: 1}
		epochs.answers[offline] = fakeEpochAnswer{epoch: -1, end: -1,
			err: fmt.Errorf("%w: %s is in offline log dir /fake/failed", partition.ErrStorage, offline)}
	})
	createTopic(t, b, "disk", 2)
	c := b.dial(t)
	storage := kerr.KafkaStorageError.Code
	want := map[int32]int16{0: 0, 1: storage}

	for _, replicaID := range []int32{-1, 2} {
		for _, v := range []int16{2, 3, 4} {
			if v < 3 && replicaID >= 0 {
				continue // a replica id from v3
			}
			r := kmsg.NewPtrOffsetForLeaderEpochRequest()
			r.Version, r.ReplicaID = v, replicaID
			rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
			rt.Topic = "disk"
			for p := int32(0); p < 2; p++ {
				rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
				rp.Partition, rp.LeaderEpoch, rp.CurrentLeaderEpoch = p, 0, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			r.Topics = append(r.Topics, rt)
			resp := c.roundTrip(r).(*kmsg.OffsetForLeaderEpochResponse)
			got := map[int32]int16{}
			for _, p := range resp.Topics[0].Partitions {
				got[p.Partition] = p.ErrorCode
			}
			if !maps.Equal(got, want) {
				t.Errorf("OffsetsForLeaderEpoch v%d replica %d codes %v, want %v", v, replicaID, got, want)
			}
		}
	}

	dr := kmsg.NewPtrDeleteRecordsRequest()
	dr.Version, dr.TimeoutMillis = 1, 1000
	dt := kmsg.NewDeleteRecordsRequestTopic()
	dt.Topic = "disk"
	dt.Partitions = []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: -1}, {Partition: 1, Offset: -1}}
	dr.Topics = append(dr.Topics, dt)
	dresp := c.roundTrip(dr).(*kmsg.DeleteRecordsResponse)
	got := map[int32]int16{}
	for _, p := range dresp.Topics[0].Partitions {
		got[p.Partition] = p.ErrorCode
	}
	if !maps.Equal(got, want) {
		t.Errorf("DeleteRecords codes %v, want %v", got, want)
	}
}
