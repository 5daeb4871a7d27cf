package group

import (
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
)

// TestCompressedOffsetsTopic: with offsets.topic.compression.codec set,
// the coordinator writes its batches with that codec (Kafka's
// GroupMetadataManager compressionType), commits, group metadata and
// tombstones alike, and a new coordinator loads them back.
func TestCompressedOffsetsTopic(t *testing.T) {
	for _, codec := range []int8{1, 2, 3, 4} {
		t.Run(fmt.Sprintf("codec=%d", codec), func(t *testing.T) {
			clock := &fakeClock{now: time.Unix(1000, 0)}
			log := newFakeLog()
			cfg := Config{
				NumPartitions: testPartitions, InitialRebalanceDelay: -1, MinSessionTimeout: time.Second,
				CompressionCodec: codec, Now: clock.Now, Log: log,
				Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
			}
			c := New(cfg)
			t.Cleanup(func() { c.Close() })
			for p := int32(0); p < testPartitions; p++ {
				c.OnBecomeLeader(p, 1)
			}
			waitLoaded(t, c)
			m := consumerJoin(t, c, "g", 10*time.Second, "t")
			tp := cluster.TopicPartition{Topic: "t", Partition: 0}
			deleted := cluster.TopicPartition{Topic: "t", Partition: 1}
			commit(t, c, CommitRequest{Group: "g", Generation: 1, MemberID: m, Retention: -1,
				Offsets: map[cluster.TopicPartition]CommitOffset{tp: {Offset: 42, Metadata: "meta"}, deleted: {Offset: 1}}})
			c.mu.Lock()
			c.writeAsyncLocked(c.PartitionFor("g"), c.tombstonesLocked(c.groups["g"], []cluster.TopicPartition{deleted}), "test")
			c.mu.Unlock()

			log.mu.Lock()
			batches := log.batches[cluster.TopicPartition{Topic: Topic, Partition: c.PartitionFor("g")}]
			for _, b := range batches {
				var rb kmsg.RecordBatch
				if err := rb.ReadFrom(b); err != nil {
					t.Fatal(err)
				}
				if got := int8(rb.Attributes & 0x07); got != codec {
					t.Errorf("batch at %d written with codec %d, want %d", rb.FirstOffset, got, codec)
				}
			}
			log.mu.Unlock()

			c.OnBecomeFollower(c.PartitionFor("g"))
			cfg.CompressionCodec = 0 // reading does not depend on the setting
			c2 := New(cfg)
			t.Cleanup(func() { c2.Close() })
			c2.OnBecomeLeader(c2.PartitionFor("g"), 2)
			waitLoaded(t, c2)
			offs, err := c2.FetchOffsets("g", nil, false)
			if err != nil || len(offs) != 1 || offs[tp].Offset != 42 || offs[tp].Metadata != "meta" {
				t.Fatalf("offsets loaded from codec %d: %v %v", codec, offs, err)
			}
			if d, _ := c2.DescribeGroup("g"); d.State != "Stable" || len(d.Members) != 1 {
				t.Fatalf("group loaded from codec %d: %+v", codec, d)
			}
			if err := c2.Heartbeat(HeartbeatRequest{Group: "g", Generation: 1, MemberID: m}); err != nil {
				t.Fatalf("heartbeat after load: %v", err)
			}
		})
	}
}
