package protocol

import (
	"maps"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestOffsetsTopicConfigs pins the configs __consumer_offsets is created
// with, Kafka's GroupCoordinator.offsetsTopicConfigs: compacted, segments
// of offsets.topic.segment.bytes, compression as the coordinator writes
// it.
func TestOffsetsTopicConfigs(t *testing.T) {
	want := map[string]string{"cleanup.policy": "compact", "segment.bytes": "104857600", "compression.type": "producer"}
	if got := offsetsTopicConfigs(104857600); !maps.Equal(got, want) {
		t.Errorf("offsetsTopicConfigs: %v, want %v", got, want)
	}

	// FindCoordinator creates the topic with them: the configs the
	// CreateTopic request carried are those the fake cluster stored (the
	// real Admin writes them to /config/topics/__consumer_offsets).
	b := startBroker(t)
	c := b.dial(t)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = "g"
	c.roundTrip(fc)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if info, ok := b.cluster.Topic(offsetsTopic); ok {
			if exp := map[string]string{"cleanup.policy": "compact", "segment.bytes": "1048576", "compression.type": "producer"}; !maps.Equal(info.Config, exp) {
				t.Fatalf("__consumer_offsets created with %v, want %v", info.Config, exp)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("__consumer_offsets not created")
		}
		time.Sleep(10 * time.Millisecond)
		c.roundTrip(fc)
	}
}
