package zkcoord

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/internal/zktest"
)

// offlineSender is a BrokerSender whose brokers answer LeaderAndIsr with
// KAFKA_STORAGE_ERROR for the partitions in offline[broker], and records
// the UpdateMetadata partitions each broker was sent.
type offlineSender struct {
	mu      sync.Mutex
	offline map[int32]map[cluster.TopicPartition]bool
	asked   map[int32]int // LeaderAndIsr requests per broker
	meta    map[int32][]cluster.TopicPartitionInfo
}

func (s *offlineSender) LeaderAndIsr(context.Context, cluster.Broker, cluster.LeaderAndIsrRequest) error {
	return errors.New("offlineSender: LeaderAndIsrOffline must be used")
}

func (s *offlineSender) LeaderAndIsrOffline(_ context.Context, to cluster.Broker, req cluster.LeaderAndIsrRequest) (offline, online []cluster.TopicPartition, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked[to.ID]++
	for _, pa := range req.Partitions {
		if s.offline[to.ID][pa.TopicPartition] {
			offline = append(offline, pa.TopicPartition)
		} else {
			online = append(online, pa.TopicPartition)
		}
	}
	return offline, online, nil
}

func (s *offlineSender) UpdateMetadata(_ context.Context, to cluster.Broker, req cluster.UpdateMetadataRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.meta[to.ID] = append(s.meta[to.ID], req.Partitions...)
	return nil
}

func (s *offlineSender) StopReplica(context.Context, cluster.Broker, cluster.StopReplicaRequest) error {
	return nil
}

func TestLogDirEventJSON(t *testing.T) {
	if got, want := string(encodeLogDirEvent(3)), `{"version":1,"broker":3,"event":1}`; got != want {
		t.Fatalf("payload %s, want Kafka's %s", got, want)
	}
	if id, err := decodeLogDirEvent([]byte(`{"version":1,"broker":7,"event":1}`)); err != nil || id != 7 {
		t.Fatalf("decode: %d %v", id, err)
	}
	for _, bad := range []string{`{"version":1,"broker":7,"event":2}`, `{"version":2,"broker":7,"event":1}`, `nope`} {
		if _, err := decodeLogDirEvent([]byte(bad)); err == nil {
			t.Errorf("decode %s: no error", bad)
		}
	}
}

// TestZKLogDirEvent: against a real ZooKeeper, broker 2 writes its log dir
// event notification (PropagateLogDirEvent, a persistent sequential
// log_dir_event_<seq> with Kafka's payload); the controller, broker 1,
// deletes it, asks broker 2 with LeaderAndIsr, and from the
// KAFKA_STORAGE_ERROR answers moves the leadership of the partition 2
// led to 1, drops 2 from both ISRs and tells the brokers replica 2 is
// offline. A partition of broker 2's healthy dir is untouched.
func TestZKLogDirEvent(t *testing.T) {
	srv := zktest.Start(t)
	snd := &offlineSender{offline: map[int32]map[cluster.TopicPartition]bool{}, asked: map[int32]int{}, meta: map[int32][]cluster.TopicPartitionInfo{}}
	s1 := startBrokerWith(t, srv.Connect(), 1, snd)
	eventually(t, 20*time.Second, func() error {
		if !s1.IsController() {
			return errors.New("broker 1 is not the controller yet")
		}
		return nil
	})
	s2 := startBrokerWith(t, srv.Connect(), 2, snd)
	eventually(t, 10*time.Second, func() error {
		if len(s1.Brokers()) != 2 {
			return fmt.Errorf("controller sees %d brokers", len(s1.Brokers()))
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s1.CreateTopic(ctx, TopicSpec{Name: "ld", Assignment: map[int32][]int32{0: {1, 2}, 1: {2, 1}, 2: {2, 1}}, NumPartitions: -1, ReplicationFactor: -1}); err != nil {
		t.Fatal(err)
	}
	raw := rawConn(t, srv.Connect())
	for p := int32(0); p < 3; p++ {
		mustGet(t, raw, partitionStatePath("ld", p))
	}
	ld := func(p int32) cluster.TopicPartition { return cluster.TopicPartition{Topic: "ld", Partition: p} }
	snd.mu.Lock()
	snd.offline[2] = map[cluster.TopicPartition]bool{ld(0): true, ld(1): true} // ld-2 is in its healthy dir
	before := snd.asked[2]
	snd.mu.Unlock()

	if err := s2.PropagateLogDirEvent(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, func() error {
		kids, _, err := raw.Children(logDirEventNotificationPath)
		if err != nil || len(kids) != 0 {
			return fmt.Errorf("notifications %v %v, want none left", kids, err)
		}
		for p, want := range map[int32]cluster.LeaderAndIsr{0: {Leader: 1, Isr: []int32{1}}, 1: {Leader: 1, Isr: []int32{1}}, 2: {Leader: 2, Isr: []int32{2, 1}}} {
			st, err := stateOf(raw, "ld", p)
			if err != nil {
				return err
			}
			if st.Leader != want.Leader || !slices.Equal(st.Isr, want.Isr) {
				return fmt.Errorf("ld-%d leader %d isr %v, want %d %v", p, st.Leader, st.Isr, want.Leader, want.Isr)
			}
		}
		snd.mu.Lock()
		defer snd.mu.Unlock()
		if snd.asked[2] == before {
			return errors.New("broker 2 not asked")
		}
		told := map[int32]bool{}
		for _, pi := range snd.meta[1] {
			if pi.Topic == "ld" && slices.Contains(pi.Offline, 2) {
				told[pi.Partition] = true
			}
		}
		if !told[0] || !told[1] || told[2] {
			return fmt.Errorf("broker 1 told replica 2 offline for %v, want ld-0 and ld-1 only", told)
		}
		return nil
	})
}
