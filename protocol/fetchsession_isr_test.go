package protocol

// A follower replicating through a fetch session over the wire: idle, its
// incremental fetches name no partition, yet the leader records a fetch
// of every partition of the session, so the follower stays in the ISR
// (replica.lag.time.max.ms); after a produce it catches up.

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
)

// memStateWriters is memStateWriter for many partitions, counting writes.
type memStateWriters struct {
	mu     sync.Mutex
	states map[cluster.TopicPartition]cluster.LeaderAndIsr
	writes int
}

func (w *memStateWriters) WriteLeaderAndIsr(_ context.Context, tp cluster.TopicPartition, st cluster.LeaderAndIsr) (int32, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if cur := w.states[tp]; st.ZkVersion != cur.ZkVersion {
		return -1, fmt.Errorf("write %s at version %d (znode at %d): %w", tp, st.ZkVersion, cur.ZkVersion, partition.ErrStateConflict)
	}
	st.Isr = slices.Clone(st.Isr)
	st.ZkVersion++
	w.states[tp] = st
	w.writes++
	return st.ZkVersion, nil
}

func (w *memStateWriters) NotifyIsrChange(cluster.TopicPartition) {}

func (w *memStateWriters) snapshot() (int, map[cluster.TopicPartition][]int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[cluster.TopicPartition][]int32{}
	for tp, st := range w.states {
		out[tp] = slices.Clone(st.Isr)
	}
	return w.writes, out
}

func lagManager(t *testing.T, id int32, lag time.Duration, lc partition.LeaderClient, sw partition.StateWriter) *partition.Manager {
	t.Helper()
	m, err := partition.NewManager(partition.Config{
		BrokerID: id, LogDirs: []string{filepath.Join(t.TempDir(), "logs")},
		HighWatermarkCheckpointInterval: time.Hour, RecoveryPointCheckpointInterval: time.Hour,
		RetentionCheckInterval: time.Hour,
		ReplicaLagTimeMax:      lag,
		ReplicaFetchWaitMax:    lag / 4, ReplicaFetchBackoff: 20 * time.Millisecond,
		LeaderClient: lc, StateWriter: sw,
		Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel).With().Int32("broker_id", id).Logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func TestFetchSessionFollowerStaysInISR(t *testing.T) {
	const n = 20
	const lag = 400 * time.Millisecond
	sw := &memStateWriters{states: map[cluster.TopicPartition]cluster.LeaderAndIsr{}}
	var states []partition.PartitionState
	for p := range int32(n) {
		tp := cluster.TopicPartition{Topic: "i", Partition: p}
		st := cluster.LeaderAndIsr{Leader: 1, LeaderEpoch: 1, Isr: []int32{1, 2}, ControllerEpoch: 1}
		sw.states[tp] = st
		states = append(states, partition.PartitionState{TopicPartition: tp, Replicas: []int32{1, 2},
			Config: cluster.DefaultLogConfig(), LeaderAndIsr: st})
	}
	leader := lagManager(t, 1, lag, nil, sw)
	for tp, res := range leader.BecomeLeaderOrFollower(states) {
		if res.Err != nil {
			t.Fatalf("%s: %v", tp, res.Err)
		}
	}
	leader.Start()
	b := startBroker(t, func(c *Config) { c.Replicas, c.LeaderEpochs = leader, leader })
	client := newBrokerClient(t, b)
	follower := lagManager(t, 2, lag, client, nil)
	for tp, res := range follower.BecomeLeaderOrFollower(states) {
		if res.Err != nil {
			t.Fatalf("%s: %v", tp, res.Err)
		}
	}
	follower.Start()
	for p := range int32(n) {
		appendTo(t, leader, cluster.TopicPartition{Topic: "i", Partition: p}, "a", "b")
	}
	caughtUp := func(want int64) error {
		ls, fs := leader.PartitionStatus(), follower.PartitionStatus()
		byTP := map[cluster.TopicPartition]partition.ReplicaStatus{}
		for _, s := range fs {
			byTP[s.TopicPartition] = s
		}
		for _, l := range ls {
			f := byTP[l.TopicPartition]
			if l.LogEndOffset != want || f.LogEndOffset != want || l.HighWatermark != want || f.HighWatermark != want || len(l.Isr) != 2 {
				return fmt.Errorf("%s: leader LEO %d HW %d ISR %v, follower LEO %d HW %d; want %d", l.TopicPartition,
					l.LogEndOffset, l.HighWatermark, l.Isr, f.LogEndOffset, f.HighWatermark, want)
			}
		}
		return nil
	}
	waitFor := func(what string, cond func() error) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := cond()
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %v", what, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("follower catching up", func() error { return caughtUp(2) })

	// Idle for five lag times: every partition stays in the ISR, no ISR
	// write happens, and the fetches go on in one session.
	writes, _ := sw.snapshot()
	sess := onlySession(t, b)
	epoch0 := sessionEpoch(sess)
	time.Sleep(5 * lag)
	if err := caughtUp(2); err != nil {
		t.Fatalf("after idling: %v", err)
	}
	w, isrs := sw.snapshot()
	if w != writes {
		t.Errorf("%d ISR writes while idle, want none", w-writes)
	}
	for tp, isr := range isrs {
		if len(isr) != 2 {
			t.Errorf("%s: ISR %v after idling, want [1 2]", tp, isr)
		}
	}
	if s := onlySession(t, b); s != sess || !s.privileged || sessionEpoch(s)-epoch0 < 5 {
		t.Errorf("session %d (privileged %v) went from epoch %d to %d while idle; want the same session, fetching",
			s.id, s.privileged, epoch0, sessionEpoch(s))
	}

	// A produce to one partition reaches the follower and the HW.
	appendTo(t, leader, cluster.TopicPartition{Topic: "i", Partition: 7}, "c")
	waitFor("catching up after a produce", func() error {
		for _, s := range follower.PartitionStatus() {
			if s.TopicPartition.Partition == 7 && (s.LogEndOffset != 3 || s.HighWatermark != 3) {
				return fmt.Errorf("follower of i-7 at LEO %d HW %d, want 3", s.LogEndOffset, s.HighWatermark)
			}
		}
		for _, s := range leader.PartitionStatus() {
			if s.TopicPartition.Partition == 7 && s.HighWatermark != 3 {
				return fmt.Errorf("leader of i-7 at HW %d, want 3", s.HighWatermark)
			}
		}
		return nil
	})
}

func onlySession(t *testing.T, b *testBroker) *fetchSession {
	t.Helper()
	c := b.srv.fetchSessions
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.sessions) != 1 {
		t.Fatalf("%d fetch sessions, want 1", len(c.sessions))
	}
	for _, s := range c.sessions {
		return s
	}
	return nil
}

func sessionEpoch(s *fetchSession) int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epoch
}
