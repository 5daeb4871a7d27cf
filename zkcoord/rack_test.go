package zkcoord

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/internal/zktest"
)

// TestZKRackAwareAssignment: brokers registered with a broker.rack get a
// new topic's and added partitions' replicas one per rack (the racks
// travel from the broker znodes into the session's broker cache), and a
// broker without a rack joining makes automatic assignment fail with
// ErrIncompleteRackInfo while an explicit assignment still works.
func TestZKRackAwareAssignment(t *testing.T) {
	srv := zktest.Start(t)
	sender := &fakeSender{}
	rackOf := map[int32]string{}
	var s1 *Session
	for id := int32(1); id <= 6; id++ {
		cfg := testConfig(t, srv.Connect(), id)
		cfg.Sender = sender
		cfg.Rack = fmt.Sprintf("rack-%d", id%3)
		rackOf[id] = cfg.Rack
		s := connect(t, cfg)
		if err := s.Register(context.Background()); err != nil {
			t.Fatal(err)
		}
		if s1 == nil {
			s1 = s
		}
	}
	eventually(t, 10*time.Second, func() error {
		if n := len(s1.Brokers()); n != 6 {
			return fmt.Errorf("%d brokers", n)
		}
		return nil
	})
	ctx := context.Background()
	raw := rawConn(t, srv.Connect())
	checkRacks := func(topic string, partitions int) {
		t.Helper()
		data, _ := mustGet(t, raw, topicPath(topic))
		a, err := decodeTopicAssignment(topic, data)
		if err != nil || len(a) != partitions {
			t.Fatalf("%s: %s: %v", topic, data, err)
		}
		for p, rs := range a {
			seen := map[string]bool{}
			for _, b := range rs {
				seen[rackOf[b]] = true
			}
			if len(rs) != 3 || len(seen) != 3 {
				t.Fatalf("%s-%d: replicas %v on %d racks, want 3", topic, p, rs, len(seen))
			}
		}
	}
	if err := s1.CreateTopic(ctx, TopicSpec{Name: "racked", NumPartitions: 12, ReplicationFactor: 3}); err != nil {
		t.Fatal(err)
	}
	checkRacks("racked", 12)
	if _, err := s1.CreatePartitions(ctx, PartitionSpec{Topic: "racked", Count: 18}); err != nil {
		t.Fatal(err)
	}
	checkRacks("racked", 18)

	// A seventh broker without a rack.
	cfg := testConfig(t, srv.Connect(), 7)
	cfg.Sender = sender
	if err := connect(t, cfg).Register(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() error {
		if n := len(s1.Brokers()); n != 7 {
			return fmt.Errorf("%d brokers", n)
		}
		return nil
	})
	if err := s1.CreateTopic(ctx, TopicSpec{Name: "mixed", NumPartitions: 3, ReplicationFactor: 3}); !errors.Is(err, cluster.ErrIncompleteRackInfo) {
		t.Fatalf("mixed racks: got %v, want ErrIncompleteRackInfo", err)
	}
	if _, err := s1.CreatePartitions(ctx, PartitionSpec{Topic: "racked", Count: 19}); !errors.Is(err, cluster.ErrIncompleteRackInfo) {
		t.Fatalf("mixed racks, add partitions: got %v, want ErrIncompleteRackInfo", err)
	}
	if err := s1.CreateTopic(ctx, TopicSpec{Name: "explicit", Assignment: map[int32][]int32{0: {7, 1}}}); err != nil {
		t.Fatalf("explicit assignment with mixed racks: %v", err)
	}
}
