package protocol

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
)

// topicOnlyMetadata hides a Metadata's PartitionLookup, so the server
// looks partitions up through Topic.
type topicOnlyMetadata struct{ Metadata }

// TestNoReplicaHere: Produce, Fetch, ListOffsets and OffsetForLeaderEpoch
// for a partition this broker holds no replica of answer
// NOT_LEADER_OR_FOLLOWER when the metadata knows the partition (the
// client's metadata is stale) and UNKNOWN_TOPIC_OR_PARTITION otherwise,
// whether the metadata answers through PartitionLookup or only Topic.
func TestNoReplicaHere(t *testing.T) {
	for _, lookup := range []bool{true, false} {
		t.Run(fmt.Sprintf("PartitionLookup=%v", lookup), func(t *testing.T) {
			opts := []brokerOption{withoutAutoCreate()}
			if !lookup {
				opts = append(opts, func(c *Config) { c.Metadata = topicOnlyMetadata{c.Metadata} })
			}
			b := startBroker(t, opts...)
			createTopic(t, b, "t", 2)
			b.replicas.removeTopic("t") // the metadata still has t-0 and t-1
			c := b.dial(t)

			requests := []struct {
				name string
				code func(topic string, part int32) int16
			}{
				{"produce", func(topic string, part int32) int16 {
					resp := c.roundTrip(produceRequest(9, 1, 1000, topic, part, makeBatch(0, "a"))).(*kmsg.ProduceResponse)
					return resp.Topics[0].Partitions[0].ErrorCode
				}},
				{"fetch", func(topic string, part int32) int16 {
					resp := c.roundTrip(fetchRequest(11, 0, 1, topic, part, 0)).(*kmsg.FetchResponse)
					return resp.Topics[0].Partitions[0].ErrorCode
				}},
				{"list offsets", func(topic string, part int32) int16 {
					req := kmsg.NewPtrListOffsetsRequest()
					req.Version = 7
					rt := kmsg.NewListOffsetsRequestTopic()
					rt.Topic = topic
					rp := kmsg.NewListOffsetsRequestTopicPartition()
					rp.Partition = part
					rp.Timestamp = -1
					rt.Partitions = append(rt.Partitions, rp)
					req.Topics = append(req.Topics, rt)
					return c.roundTrip(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode
				}},
				{"offset for leader epoch", func(topic string, part int32) int16 {
					req := kmsg.NewPtrOffsetForLeaderEpochRequest()
					req.Version = 4
					rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
					rt.Topic = topic
					rt.Partitions = []kmsg.OffsetForLeaderEpochRequestTopicPartition{{Partition: part, CurrentLeaderEpoch: -1}}
					req.Topics = append(req.Topics, rt)
					return c.roundTrip(req).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0].ErrorCode
				}},
			}
			cases := []struct {
				topic string
				part  int32
				want  *kerr.Error
			}{
				{"t", 1, kerr.NotLeaderForPartition},
				{"t", 2, kerr.UnknownTopicOrPartition},
				{"missing", 0, kerr.UnknownTopicOrPartition},
			}
			for _, r := range requests {
				for _, tc := range cases {
					if got := r.code(tc.topic, tc.part); got != tc.want.Code {
						t.Errorf("%s %s-%d: error %d, want %d (%s)", r.name, tc.topic, tc.part, got, tc.want.Code, tc.want.Message)
					}
				}
			}
			if _, ok := b.cluster.Topic("missing"); ok {
				t.Fatal("topic created with auto-creation off")
			}
		})
	}
}

// TestMetadataCacheHasPartition: HasPartition answers as Topic does as
// partitions and topics come and go.
func TestMetadataCacheHasPartition(t *testing.T) {
	part := func(topic string, p, leader int32) cluster.TopicPartitionInfo {
		return cluster.TopicPartitionInfo{Topic: topic, PartitionInfo: cluster.PartitionInfo{
			Partition: p, Replicas: []int32{1}, State: cluster.LeaderAndIsr{Leader: leader, Isr: []int32{1}}}}
	}
	c := NewMetadataCache("x")
	updates := [][]cluster.TopicPartitionInfo{
		nil,
		{part("a", 0, 1), part("a", 2, 1), part("b", 0, -1)},
		{part("a", 0, leaderDuringDelete)},
		{part("a", 2, leaderDuringDelete), part("b", 1, 1)},
	}
	for i, u := range updates {
		c.Apply(cluster.UpdateMetadataRequest{ControllerID: 1, Partitions: u})
		for _, topic := range []string{"a", "b", "c"} {
			for p := int32(0); p < 3; p++ {
				tp := cluster.TopicPartition{Topic: topic, Partition: p}
				info, ok := c.Topic(topic)
				wantTopic, wantPart := ok, ok && hasPartition(info, p)
				if gotTopic, gotPart := c.HasPartition(tp); gotTopic != wantTopic || gotPart != wantPart {
					t.Errorf("after update %d: HasPartition(%s) = %v, %v; Topic says %v, %v", i, tp, gotTopic, gotPart, wantTopic, wantPart)
				}
			}
		}
	}
	if topicExists, _ := c.HasPartition(cluster.TopicPartition{Topic: "a"}); topicExists {
		t.Fatal("topic a exists after its last partition was deleted")
	}
}
