package protocol

import (
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
)

// wakeCounting is a real partition.Manager that counts how the produce
// handler appends and wakes long-polling fetches.
type wakeCounting struct {
	*partition.Manager
	plain, deferred, wakes atomic.Int64
}

func (w *wakeCounting) Append(tp cluster.TopicPartition, records []byte, acks int16) (partition.AppendResult, error) {
	w.plain.Add(1)
	return w.Manager.Append(tp, records, acks)
}

func (w *wakeCounting) AppendWith(tp cluster.TopicPartition, records []byte, opts partition.AppendOptions) (partition.AppendResult, error) {
	if opts.Wakes != nil {
		w.deferred.Add(1)
	} else {
		w.plain.Add(1)
	}
	return w.Manager.AppendWith(tp, records, opts)
}

func (w *wakeCounting) Wake(ws *partition.Wakes) {
	if ws.Pending() {
		w.wakes.Add(1)
	}
	w.Manager.Wake(ws)
}

// TestProduceWakesFetchesOnce: a Produce of many partitions appends each
// with the request's Wakes and wakes the long-polling fetches once, after
// the last append, so a follower's session gets every partition of the
// request in one response rather than one wake-up per partition.
func TestProduceWakesFetchesOnce(t *testing.T) {
	m, err := partition.NewManager(partition.Config{
		BrokerID: 1, LogDirs: []string{filepath.Join(t.TempDir(), "logs")},
		HighWatermarkCheckpointInterval: time.Hour, RecoveryPointCheckpointInterval: time.Hour,
		RetentionCheckInterval: time.Hour, Log: zerolog.Nop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	const n = 25
	var states []partition.PartitionState
	for p := range n {
		states = append(states, partition.PartitionState{TopicPartition: cluster.TopicPartition{Topic: "w", Partition: int32(p)},
			Replicas: []int32{1}, Config: cluster.DefaultLogConfig(), LeaderAndIsr: cluster.LeaderAndIsr{Leader: 1, LeaderEpoch: 1, Isr: []int32{1}}})
	}
	if err := m.ApplyPartitionStates(states); err != nil {
		t.Fatal(err)
	}
	w := &wakeCounting{Manager: m}
	fr := newFakeReplicas()
	c := newFakeCluster(fr, cluster.Broker{ID: 1, Endpoints: []cluster.Endpoint{{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: "127.0.0.1", Port: 1}}})
	s := NewServer(Config{BrokerID: 1, Replicas: w, Metadata: c, Admin: c, ProducerIDs: c, Log: zerolog.Nop()})
	p1, p2 := net.Pipe()
	t.Cleanup(func() {
		p2.Close()
		p1.Close()
		s.Close()
	})
	cn := s.newConn(p1, "PLAINTEXT")

	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, 1, 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "w"
	for p := range n {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = int32(p)
		rp.Records = makeBatch(1, "a", "b")
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	followers := m.Changed(true)
	frame, err := benchHandle(cn, benchFrame(req))
	if err != nil || len(frame) == 0 {
		t.Fatalf("produce: %v", err)
	}
	if p, d, wk := w.plain.Load(), w.deferred.Load(), w.wakes.Load(); p != 0 || d != n || wk != 1 {
		t.Fatalf("%d plain appends, %d with Wakes, %d wakes; want 0, %d, 1", p, d, wk, n)
	}
	select {
	case <-followers:
	default:
		t.Fatal("followers' fetches not woken after the produce")
	}
	for _, st := range states {
		if hw, _, _, err := m.ListOffset(st.TopicPartition, partition.LatestTimestamp, -1, partition.AskerConsumer); err != nil || hw != 2 {
			t.Fatalf("%s: high watermark %d (%v), want 2", st.TopicPartition, hw, err)
		}
	}
}
