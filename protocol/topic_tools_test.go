package protocol

// Tests of the topic tools (CreatePartitions, AlterConfigs,
// IncrementalAlterConfigs, DeleteRecords, DescribeCluster,
// DescribeLogDirs), driven by kadm and by hand over the in-memory fakes.
// The fakes' extra capabilities are defined here, so the default test
// broker serves (and TestApiVersions and TestRoundTripEveryVersion cover)
// every key of the table.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
)

// CreatePartitions makes PartitionAdmin of fakeCluster: new partitions copy
// partition 0's replicas unless assigned.
func (c *fakeCluster) CreatePartitions(_ context.Context, topic string, count int32, assignment [][]int32, validateOnly bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.topics[topic]
	if !ok {
		return fmt.Errorf("create partitions of %q: %w", topic, cluster.ErrUnknownTopic)
	}
	old := int32(len(t.Partitions))
	if count <= old {
		return fmt.Errorf("%w: topic has %d partitions, %d is not an increase", cluster.ErrInvalidPartitions, old, count)
	}
	if assignment != nil && int32(len(assignment)) != count-old {
		return fmt.Errorf("%w: %d assignments for %d new partitions", cluster.ErrInvalidReplicaAssignment, len(assignment), count-old)
	}
	if validateOnly {
		return nil
	}
	for p := old; p < count; p++ {
		replicas := t.Partitions[0].Replicas
		if assignment != nil {
			replicas = assignment[p-old]
		}
		t.Partitions = append(t.Partitions, cluster.PartitionInfo{Partition: p, Replicas: replicas,
			State: cluster.LeaderAndIsr{Leader: replicas[0], Isr: replicas}})
		c.replicas.addPartition(cluster.TopicPartition{Topic: topic, Partition: p})
	}
	c.topics[topic] = t
	return nil
}

// AlterTopicConfig makes ConfigAdmin of fakeCluster.
func (c *fakeCluster) AlterTopicConfig(_ context.Context, topic string, alter func(map[string]string) (map[string]string, error), validateOnly bool) error {
	c.mu.Lock()
	t, ok := c.topics[topic]
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("alter config of %q: %w", topic, cluster.ErrUnknownTopic)
	}
	cur := maps.Clone(t.Config)
	if cur == nil {
		cur = map[string]string{}
	}
	next, err := alter(cur)
	if err != nil {
		return err
	}
	if _, err := cluster.DefaultLogConfig().WithOverrides(next); err != nil {
		return err
	}
	if validateOnly {
		return nil
	}
	c.mu.Lock()
	t.Config = next
	c.topics[topic] = t
	c.mu.Unlock()
	return nil
}

// DeleteRecords makes RecordDeleter of fakeReplicas: it moves the
// reported log start offset; every replica is caught up at once.
func (f *fakeReplicas) DeleteRecords(_ context.Context, tp cluster.TopicPartition, offset int64, _ func(int32) bool) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.parts[tp]
	if l == nil {
		return -1, fmt.Errorf("delete records of %s: %w", tp, partition.ErrUnknownTopicOrPartition)
	}
	if offset == -1 {
		offset = l.hw
	}
	if offset < 0 || offset > l.hw {
		return -1, fmt.Errorf("%w: %d above high watermark %d", partition.ErrOffsetOutOfRange, offset, l.hw)
	}
	l.start = max(l.start, offset)
	return l.start, nil
}

// DescribeLogDirs makes LogDirs of fakeReplicas: one dir, sizes from the
// stored batches.
func (f *fakeReplicas) DescribeLogDirs() []partition.LogDirInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := partition.LogDirInfo{Dir: "/fake/logs"}
	for tp, l := range f.parts {
		var size int64
		for _, b := range l.batches {
			size += int64(len(b.data))
		}
		d.Replicas = append(d.Replicas, partition.ReplicaLogInfo{TopicPartition: tp, Size: size})
	}
	return []partition.LogDirInfo{d}
}

func TestTopicToolsCreatePartitions(t *testing.T) {
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, b))
	createTopic(t, b, "grow", 2)

	if resp, err := adm.ValidateCreatePartitions(ctx, 3, "grow"); err != nil || resp["grow"].Err != nil {
		t.Fatalf("validate: %+v %v", resp, err)
	}
	if ti, _ := b.cluster.Topic("grow"); len(ti.Partitions) != 2 {
		t.Fatalf("validate only grew the topic to %d", len(ti.Partitions))
	}
	resp, err := adm.UpdatePartitions(ctx, 5, "grow")
	if err != nil || resp["grow"].Err != nil {
		t.Fatalf("UpdatePartitions: %+v %v", resp, err)
	}
	if ti, _ := b.cluster.Topic("grow"); len(ti.Partitions) != 5 {
		t.Fatalf("topic has %d partitions, want 5", len(ti.Partitions))
	}
	resp, err = adm.UpdatePartitions(ctx, 3, "grow")
	if err != nil || !errors.Is(resp["grow"].Err, kerr.InvalidPartitions) || resp["grow"].ErrMessage == "" {
		t.Fatalf("shrinking: %+v %v", resp, err)
	}

	// By hand: unknown topic, duplicate topic, and the leader wait timing out.
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.Version = 3
	req.TimeoutMillis = 5000
	for _, name := range []string{"missing", "dup", "dup"} {
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = name, 4
		req.Topics = append(req.Topics, rt)
	}
	got := b.dial(t).roundTrip(req).(*kmsg.CreatePartitionsResponse)
	if got.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code || got.Topics[1].ErrorCode != kerr.InvalidRequest.Code ||
		got.Topics[2].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("errors: %+v", got.Topics)
	}
	b.cluster.mu.Lock()
	ti := b.cluster.topics["grow"]
	ti.Partitions[0].State.Leader = -1 // the metadata shows no leader
	b.cluster.mu.Unlock()
	req.Topics = req.Topics[:1]
	req.Topics[0].Topic, req.Topics[0].Count = "grow", 6
	req.TimeoutMillis = 100
	if got := b.dial(t).roundTrip(req).(*kmsg.CreatePartitionsResponse); got.Topics[0].ErrorCode != kerr.RequestTimedOut.Code {
		t.Fatalf("leaderless: %+v", got.Topics)
	}
}

func TestTopicToolsAlterConfigs(t *testing.T) {
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, b))
	createTopic(t, b, "cfg", 1)
	str := func(s string) *string { return &s }

	resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Name: "retention.ms", Value: str("60000")},
		{Name: "max.message.bytes", Value: str("1000")},
	}, "cfg")
	if err != nil || resp[0].Err != nil {
		t.Fatalf("set: %+v %v", resp, err)
	}
	described, err := adm.DescribeTopicConfigs(ctx, "cfg")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := described.On("cfg", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rc.Configs {
		switch c.Key {
		case "retention.ms", "max.message.bytes":
			if c.Source != kmsg.ConfigSourceDynamicTopicConfig {
				t.Errorf("%s source %v, want TOPIC_CONFIG", c.Key, c.Source)
			}
		case "min.insync.replicas":
			if c.Source != kmsg.ConfigSourceDefaultConfig {
				t.Errorf("%s source %v, want DEFAULT_CONFIG", c.Key, c.Source)
			}
		}
	}
	resp, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "retention.ms"}}, "cfg")
	if err != nil || resp[0].Err != nil {
		t.Fatalf("delete: %+v %v", resp, err)
	}
	if ti, _ := b.cluster.Topic("cfg"); len(ti.Config) != 1 || ti.Config["max.message.bytes"] != "1000" {
		t.Fatalf("overrides after delete %v", ti.Config)
	}
	resp, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: str("delete")}}, "cfg")
	if err != nil || resp[0].Err != nil {
		t.Fatalf("append to a list: %+v %v", resp, err)
	}
	if ti, _ := b.cluster.Topic("cfg"); ti.Config["cleanup.policy"] != "delete" {
		t.Fatalf("append of the default's own item: %v", ti.Config)
	}

	for _, c := range []struct {
		name string
		cfg  kadm.AlterConfig
		want *kerr.Error
	}{
		{"unknown key", kadm.AlterConfig{Name: "no.such.key", Value: str("1")}, kerr.InvalidConfig},
		{"bad value", kadm.AlterConfig{Name: "retention.ms", Value: str("soon")}, kerr.InvalidConfig},
		{"append to a scalar", kadm.AlterConfig{Op: kadm.AppendConfig, Name: "retention.ms", Value: str("1")}, kerr.InvalidConfig},
		{"subtract from a scalar", kadm.AlterConfig{Op: kadm.SubtractConfig, Name: "retention.ms", Value: str("1")}, kerr.InvalidConfig},
		{"unsupported list item", kadm.AlterConfig{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: str("forever")}, kerr.InvalidConfig},
		{"set null", kadm.AlterConfig{Name: "retention.ms"}, kerr.InvalidRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{c.cfg}, "cfg")
			if err != nil || !errors.Is(resp[0].Err, c.want) || resp[0].ErrMessage == "" {
				t.Fatalf("got %+v %v, want %v", resp, err, c.want)
			}
		})
	}
	if resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: str("1")}}, "missing"); err != nil || !errors.Is(resp[0].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("unknown topic: %+v %v", resp, err)
	}
	if ti, _ := b.cluster.Topic("cfg"); len(ti.Config) != 2 {
		t.Fatalf("failed alterations changed the overrides: %v", ti.Config)
	}

	// By hand: broker resources, duplicate keys, validate only, AlterConfigs.
	inc := kmsg.NewPtrIncrementalAlterConfigsRequest()
	inc.Version = 1
	broker := kmsg.NewIncrementalAlterConfigsRequestResource()
	broker.ResourceType, broker.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
	dup := kmsg.NewIncrementalAlterConfigsRequestResource()
	dup.ResourceType, dup.ResourceName = kmsg.ConfigResourceTypeTopic, "cfg"
	for range 2 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = "retention.ms", str("5")
		dup.Configs = append(dup.Configs, c)
	}
	inc.Resources = append(inc.Resources, broker, dup)
	got := b.dial(t).roundTrip(inc).(*kmsg.IncrementalAlterConfigsResponse)
	if got.Resources[0].ErrorCode != kerr.InvalidRequest.Code || got.Resources[0].ErrorMessage == nil ||
		got.Resources[1].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("broker resource and duplicate keys: %+v", got.Resources)
	}
	inc.Resources = inc.Resources[1:]
	inc.Resources[0].Configs = inc.Resources[0].Configs[:1]
	inc.ValidateOnly = true
	if got := b.dial(t).roundTrip(inc).(*kmsg.IncrementalAlterConfigsResponse); got.Resources[0].ErrorCode != 0 {
		t.Fatalf("validate only: %+v", got.Resources)
	}
	if ti, _ := b.cluster.Topic("cfg"); ti.Config["retention.ms"] != "" {
		t.Fatalf("validate only wrote %v", ti.Config)
	}

	alter := kmsg.NewPtrAlterConfigsRequest()
	alter.Version = 1
	r := kmsg.NewAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, "cfg"
	c := kmsg.NewAlterConfigsRequestResourceConfig()
	c.Name, c.Value = "segment.ms", str("1000")
	r.Configs = append(r.Configs, c)
	alter.Resources = append(alter.Resources, r)
	if got := b.dial(t).roundTrip(alter).(*kmsg.AlterConfigsResponse); got.Resources[0].ErrorCode != 0 {
		t.Fatalf("AlterConfigs: %+v", got.Resources)
	}
	if ti, _ := b.cluster.Topic("cfg"); len(ti.Config) != 1 || ti.Config["segment.ms"] != "1000" {
		t.Fatalf("AlterConfigs replaces every override: %v", ti.Config)
	}
}

func TestTopicToolsDeleteRecords(t *testing.T) {
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, b))
	createTopic(t, b, "del", 2)
	tp := cluster.TopicPartition{Topic: "del", Partition: 0}
	for range 5 {
		if _, err := b.replicas.Append(tp, makeBatch(0, "a", "b"), 1); err != nil {
			t.Fatal(err)
		}
	}
	offsets := kadm.Offsets{}
	offsets.AddOffset("del", 0, 4, -1)
	resp, err := adm.DeleteRecords(ctx, offsets)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := resp.Lookup("del", 0); r.Err != nil || r.LowWatermark != 4 {
		t.Fatalf("delete to 4: %+v", r)
	}
	offsets = kadm.Offsets{} // Add keeps an offset already there over -1
	offsets.AddOffset("del", 0, -1, -1)
	offsets.AddOffset("del", 1, 3, -1)
	resp, err = adm.DeleteRecords(ctx, offsets)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := resp.Lookup("del", 0); r.Err != nil || r.LowWatermark != 10 {
		t.Fatalf("delete to the high watermark: %+v", r)
	}
	if r, _ := resp.Lookup("del", 1); !errors.Is(r.Err, kerr.OffsetOutOfRange) || r.LowWatermark != -1 {
		t.Fatalf("above the high watermark: %+v", r)
	}
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.Version = 2
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = "missing"
	rt.Partitions = []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 1}}
	req.Topics = append(req.Topics, rt)
	got := b.dial(t).roundTrip(req).(*kmsg.DeleteRecordsResponse)
	if p := got.Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownTopicOrPartition.Code || p.LowWatermark != -1 {
		t.Fatalf("unknown partition: %+v", p)
	}
}

func TestTopicToolsDescribeClusterAndLogDirs(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "dirs", 2)
	if _, err := b.replicas.Append(cluster.TopicPartition{Topic: "dirs", Partition: 1}, makeBatch(0, "a"), 1); err != nil {
		t.Fatal(err)
	}
	c := b.dial(t)
	for v := int16(0); v <= 1; v++ {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.Version, req.EndpointType = v, 1
		resp := c.roundTrip(req).(*kmsg.DescribeClusterResponse)
		if resp.ErrorCode != 0 || resp.ClusterID != "fake-cluster" || resp.ControllerID != 1 || len(resp.Brokers) != 1 ||
			resp.Brokers[0].Port != b.port || resp.Brokers[0].Host != "127.0.0.1" {
			t.Fatalf("v%d: %+v", v, resp)
		}
	}
	req := kmsg.NewPtrDescribeClusterRequest()
	req.Version, req.EndpointType = 1, 2
	if resp := c.roundTrip(req).(*kmsg.DescribeClusterResponse); resp.ErrorCode != kerr.UnsupportedEndpointType.Code {
		t.Fatalf("controller endpoints: %+v", resp)
	}

	ld := kmsg.NewPtrDescribeLogDirsRequest()
	ld.Version = 2
	resp := c.roundTrip(ld).(*kmsg.DescribeLogDirsResponse)
	if len(resp.Dirs) != 1 || resp.Dirs[0].Dir != "/fake/logs" || len(resp.Dirs[0].Topics) != 1 || len(resp.Dirs[0].Topics[0].Partitions) != 2 {
		t.Fatalf("all: %+v", resp)
	}
	rt := kmsg.NewDescribeLogDirsRequestTopic()
	rt.Topic, rt.Partitions = "dirs", []int32{1, 7}
	ld.Topics = append(ld.Topics, rt)
	resp = c.roundTrip(ld).(*kmsg.DescribeLogDirsResponse)
	if ps := resp.Dirs[0].Topics[0].Partitions; len(ps) != 1 || ps[0].Partition != 1 || ps[0].Size == 0 {
		t.Fatalf("one partition: %+v", resp.Dirs[0].Topics)
	}
}

// TestTopicToolsDeleteRecordsNoReplicaHere: DeleteRecords for a partition
// this broker holds no replica of answers NOT_LEADER_OR_FOLLOWER when the
// metadata knows the partition (the client's metadata is stale, as after a
// reassignment) and UNKNOWN_TOPIC_OR_PARTITION otherwise, as Kafka's
// ReplicaManager.getPartitionOrError does and as Produce and Fetch here.
// TestTopicToolsDeleteRecordsInternalTopic: records of __consumer_offsets
// cannot be deleted (INVALID_TOPIC_EXCEPTION, as in Kafka), and nothing is
// deleted from its log; a partition the metadata does not know is still
// UNKNOWN_TOPIC_OR_PARTITION.
func TestTopicToolsDeleteRecordsInternalTopic(t *testing.T) {
	b := startBroker(t, withoutAutoCreate())
	createTopic(t, b, offsetsTopic, 1)
	tp := cluster.TopicPartition{Topic: offsetsTopic, Partition: 0}
	b.replicas.Append(tp, makeBatch(1000, "a", "b"), 1)
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.Version = 2
	req.TimeoutMillis = 1000
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = offsetsTopic
	rt.Partitions = []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 1}, {Partition: 7, Offset: 1}}
	req.Topics = append(req.Topics, rt)
	got := b.dial(t).roundTrip(req).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions
	for i, w := range []*kerr.Error{kerr.InvalidTopicException, kerr.UnknownTopicOrPartition} {
		if got[i].ErrorCode != w.Code || got[i].LowWatermark != -1 {
			t.Errorf("%s-%d: error %d, low watermark %d; want %d (%s), -1", offsetsTopic, got[i].Partition, got[i].ErrorCode, got[i].LowWatermark, w.Code, w.Message)
		}
	}
	if start, _, _, err := b.replicas.ListOffset(tp, partition.EarliestTimestamp, -1, partition.AskerConsumer); err != nil || start != 0 {
		t.Fatalf("log start offset of %s: %d (%v), want 0: nothing deleted", tp, start, err)
	}
}

func TestTopicToolsDeleteRecordsNoReplicaHere(t *testing.T) {
	b := startBroker(t, withoutAutoCreate())
	createTopic(t, b, "moved", 1)
	b.replicas.removeTopic("moved") // the metadata still has moved-0
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.Version = 2
	req.TimeoutMillis = 1000
	for _, topic := range []string{"moved", "missing"} {
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = topic
		rt.Partitions = []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 1}, {Partition: 1, Offset: 1}}
		req.Topics = append(req.Topics, rt)
	}
	got := b.dial(t).roundTrip(req).(*kmsg.DeleteRecordsResponse)
	want := map[string][]*kerr.Error{
		"moved":   {kerr.NotLeaderForPartition, kerr.UnknownTopicOrPartition},
		"missing": {kerr.UnknownTopicOrPartition, kerr.UnknownTopicOrPartition},
	}
	for _, rt := range got.Topics {
		for i, p := range rt.Partitions {
			if w := want[rt.Topic][i]; p.ErrorCode != w.Code || p.LowWatermark != -1 {
				t.Errorf("%s-%d: error %d, low watermark %d; want %d (%s), -1", rt.Topic, p.Partition, p.ErrorCode, p.LowWatermark, w.Code, w.Message)
			}
		}
	}
}

// TestCreatePartitionsNoTimeout: timeout_ms <= 0 leaves no time to wait
// for the new partitions' leaders, so a grown topic answers
// REQUEST_TIMED_OUT at once (the partitions exist), as CreateTopics and
// Kafka's ZkAdminManager.createPartitions do; ValidateOnly and a failed
// topic keep their own answer.
func TestCreatePartitionsNoTimeout(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "grow0", 1)
	for _, timeout := range []int32{0, -1} {
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.Version = 3
		req.TimeoutMillis = timeout
		req.ValidateOnly = true
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = "grow0", 10
		req.Topics = append(req.Topics, rt)
		if got := b.dial(t).roundTrip(req).(*kmsg.CreatePartitionsResponse); got.Topics[0].ErrorCode != 0 {
			t.Fatalf("timeout %d, validate only: error %d, want none", timeout, got.Topics[0].ErrorCode)
		}
		req.ValidateOnly = false
		ti, _ := b.cluster.Topic("grow0")
		req.Topics[0].Count = int32(len(ti.Partitions)) + 1
		missing := kmsg.NewCreatePartitionsRequestTopic()
		missing.Topic, missing.Count = "missing", 4
		req.Topics = append(req.Topics, missing)
		got := b.dial(t).roundTrip(req).(*kmsg.CreatePartitionsResponse)
		if got.Topics[0].ErrorCode != kerr.RequestTimedOut.Code {
			t.Errorf("timeout %d: grown topic error %d, want REQUEST_TIMED_OUT", timeout, got.Topics[0].ErrorCode)
		}
		if got.Topics[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("timeout %d: missing topic error %d, want UNKNOWN_TOPIC_OR_PARTITION", timeout, got.Topics[1].ErrorCode)
		}
		if ti, _ := b.cluster.Topic("grow0"); int32(len(ti.Partitions)) != req.Topics[0].Count {
			t.Errorf("timeout %d: topic has %d partitions, want %d", timeout, len(ti.Partitions), req.Topics[0].Count)
		}
	}
}
