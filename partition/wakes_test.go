package partition

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
)

// TestAppendWithWakesDefersTheWake: appends to many partitions with one
// Wakes wake the long-polling fetches not at all until Manager.Wake, then
// once; without Wakes each append wakes them.
func TestAppendWithWakesDefersTheWake(t *testing.T) {
	m := applyTestManager(t, []string{filepath.Join(t.TempDir(), "logs")}, 1)
	const n = 40
	var states []PartitionState
	for p := range n {
		states = append(states, leaderOf(cluster.TopicPartition{Topic: "t", Partition: int32(p)}))
	}
	if err := m.ApplyPartitionStates(states); err != nil {
		t.Fatal(err)
	}
	followers := m.Changed(true)
	before := m.notifies.Load()
	var ws Wakes
	for _, st := range states {
		if _, err := m.AppendWith(st.TopicPartition, buildBatch(batchSpec{records: 2, valueSize: 8}), AppendOptions{Acks: -1, Wakes: &ws}); err != nil {
			t.Fatal(err)
		}
	}
	if d := m.notifies.Load() - before; d != 0 {
		t.Fatalf("%d wakes before Wake, want 0", d)
	}
	select {
	case <-followers:
		t.Fatal("followers' fetches woken before Wake")
	default:
	}
	if !ws.Pending() {
		t.Fatal("no wake collected")
	}
	m.Wake(&ws)
	if d := m.notifies.Load() - before; d != 1 {
		t.Fatalf("%d wakes for %d appends with one Wakes, want 1", d, n)
	}
	select {
	case <-followers:
	default:
		t.Fatal("followers' fetches not woken by Wake")
	}
	m.Wake(&ws) // empty now: nothing
	if d := m.notifies.Load() - before; d != 1 {
		t.Fatalf("an empty Wake woke the fetches (%d wakes)", d)
	}
	before = m.notifies.Load()
	for _, st := range states[:5] {
		if _, err := m.Append(st.TopicPartition, buildBatch(batchSpec{records: 1, valueSize: 8, timestamp: 1}), -1); err != nil {
			t.Fatal(err)
		}
	}
	if d := m.notifies.Load() - before; d != 5 {
		t.Fatalf("%d wakes for 5 appends without Wakes, want 5", d)
	}
}

// TestFetcherWakesOncePerResponse: a follower applying a fetch response
// of many partitions wakes its own long-polling fetches once, after the
// last append, not once per partition.
func TestFetcherWakesOncePerResponse(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	zk := &fakeZK{}
	newMgr := func(id int32, lc LeaderClient) *Manager {
		m, err := NewManager(Config{
			BrokerID: id, LogDirs: []string{filepath.Join(t.TempDir(), "logs")},
			HighWatermarkCheckpointInterval: time.Hour, RecoveryPointCheckpointInterval: time.Hour,
			RetentionCheckInterval: time.Hour, Now: clock.Now, ReplicaLagTimeMax: 10 * time.Second,
			LeaderClient: lc, StateWriter: zk, Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		return m
	}
	leader := newMgr(1, nil)
	client := &sessionClient{leader: leader, answered: map[cluster.TopicPartition][2]int64{}}
	follower := newMgr(2, client)
	const n = 30
	var states []PartitionState
	for p := range n {
		tp := cluster.TopicPartition{Topic: "t", Partition: int32(p)}
		st := zk.controllerWrite(1, 0, []int32{1, 2})
		states = append(states, PartitionState{TopicPartition: tp, Replicas: []int32{1, 2}, Config: cluster.DefaultLogConfig(), LeaderAndIsr: st})
	}
	for _, m := range []*Manager{leader, follower} {
		if err := m.ApplyPartitionStates(states); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 { // truncation, then fetching
		follower.replicateOnce()
	}
	for _, st := range states {
		if _, err := leader.Append(st.TopicPartition, buildBatch(batchSpec{records: 2, valueSize: 8}), 1); err != nil {
			t.Fatal(err)
		}
	}
	before := follower.notifies.Load()
	follower.replicateOnce()
	if d := follower.notifies.Load() - before; d != 1 {
		t.Errorf("%d wakes for one response of %d partitions, want 1", d, n)
	}
	for _, s := range follower.PartitionStatus() {
		if s.LogEndOffset != 2 {
			t.Fatalf("%s: follower LEO %d after the fetch, want 2", s.TopicPartition, s.LogEndOffset)
		}
	}
}
