package protocol

// Replication over the real wire: a leader partition.Manager behind a
// Server and a follower Manager whose LeaderClient is a BrokerClient, so
// what the in-memory simulation hides (what each field carries on the
// wire, e.g. the -1 an errored Fetch partition answers for its log start
// offset) is exercised end to end.

import (
	"context"
	"errors"
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

// memStateWriter is an in-memory partition state znode: conditional
// writes on its version always succeed when the version matches.
type memStateWriter struct {
	mu    sync.Mutex
	state cluster.LeaderAndIsr
}

func (w *memStateWriter) WriteLeaderAndIsr(_ context.Context, tp cluster.TopicPartition, st cluster.LeaderAndIsr) (int32, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if st.ZkVersion != w.state.ZkVersion {
		return -1, fmt.Errorf("write %s at version %d (znode at %d): %w", tp, st.ZkVersion, w.state.ZkVersion, partition.ErrStateConflict)
	}
	st.Isr = slices.Clone(st.Isr)
	st.ZkVersion++
	w.state = st
	return st.ZkVersion, nil
}

func (w *memStateWriter) NotifyIsrChange(cluster.TopicPartition) {}

func (w *memStateWriter) isr() []int32 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.state.Isr)
}

func newReplicaManager(t *testing.T, id int32, lc partition.LeaderClient, sw partition.StateWriter) *partition.Manager {
	t.Helper()
	m, err := partition.NewManager(partition.Config{
		BrokerID: id, LogDirs: []string{filepath.Join(t.TempDir(), "logs")},
		HighWatermarkCheckpointInterval: time.Hour, RecoveryPointCheckpointInterval: time.Hour,
		RetentionCheckInterval: time.Hour,
		ReplicaFetchWaitMax:    50 * time.Millisecond, ReplicaFetchBackoff: 20 * time.Millisecond,
		LeaderClient: lc, StateWriter: sw,
		Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel).With().Int32("broker_id", id).Logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func statusOf(m *partition.Manager, tp cluster.TopicPartition) (partition.ReplicaStatus, bool) {
	for _, st := range m.PartitionStatus() {
		if st.TopicPartition == tp {
			return st, true
		}
	}
	return partition.ReplicaStatus{}, false
}

// TestReplicationFollowerBelowLeaderLogStart (issue 12 A1): a new follower
// with an empty log joins a leader whose log start has moved past 0. Its
// first fetch is out of range, and on the wire that partition answers log
// start -1, so the follower must ask the leader for its earliest offset
// (ListOffsets EARLIEST as a replica, Kafka's
// fetchEarliestOffsetFromLeader), restart its log there, catch up to the
// leader's LEO and join the ISR.
func TestReplicationFollowerBelowLeaderLogStart(t *testing.T) {
	tp := cluster.TopicPartition{Topic: "t", Partition: 0}
	cfg := cluster.DefaultLogConfig()
	cfg.MinInsyncReplicas = 1
	sw := &memStateWriter{state: cluster.LeaderAndIsr{Leader: 1, LeaderEpoch: 1, Isr: []int32{1}, ControllerEpoch: 1}}
	leader := newReplicaManager(t, 1, nil, sw)
	st := partition.PartitionState{TopicPartition: tp, Replicas: []int32{1, 2}, Config: cfg, LeaderAndIsr: sw.state}
	if err := leader.BecomeLeaderOrFollower([]partition.PartitionState{st})[tp].Err; err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := leader.Append(tp, makeBatch(int64(i), "a", "b"), 1); err != nil {
			t.Fatal(err)
		}
	}
	noneAlive := func(int32) bool { return false }
	if _, err := leader.DeleteRecords(context.Background(), tp, 12, noneAlive); err != nil {
		t.Fatal(err)
	}

	b := startBroker(t, func(c *Config) { c.Replicas, c.LeaderEpochs = leader, leader })
	client := newBrokerClient(t, b)
	follower := newReplicaManager(t, 2, client, nil)
	fst := st
	fst.LeaderAndIsr.Isr = []int32{1}
	if err := follower.BecomeLeaderOrFollower([]partition.PartitionState{fst})[tp].Err; err != nil {
		t.Fatal(err)
	}
	follower.Start()

	deadline := time.Now().Add(10 * time.Second)
	for {
		ls, _ := statusOf(leader, tp)
		fs, _ := statusOf(follower, tp)
		if fs.LogEndOffset == ls.LogEndOffset && fs.LogStartOffset == 12 && slices.Contains(sw.isr(), 2) && slices.Contains(ls.Isr, 2) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("follower never caught up: follower log [%d, %d), leader log [%d, %d), leader ISR %v, znode ISR %v",
				fs.LogStartOffset, fs.LogEndOffset, ls.LogStartOffset, ls.LogEndOffset, ls.Isr, sw.isr())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestListEarliestOffsetRoundTrip: the follower's ListOffsets EARLIEST
// goes out with its broker id as replica id (the leader answers it as a
// replica), and comes back as the log start offset or partition's
// sentinel for the partition's error code.
func TestListEarliestOffsetRoundTrip(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "t", 1)
	c := newBrokerClient(t, b)
	tp := cluster.TopicPartition{Topic: "t", Partition: 0}
	b.replicas.mu.Lock()
	b.replicas.parts[tp].start = 5
	b.replicas.askers = nil
	b.replicas.mu.Unlock()
	off, err := c.ListEarliestOffset(context.Background(), 1, tp, 3)
	if err != nil || off != 5 {
		t.Fatalf("earliest offset of %s: %d, %v; want 5", tp, off, err)
	}
	b.replicas.mu.Lock()
	askers := slices.Clone(b.replicas.askers)
	b.replicas.mu.Unlock()
	if !slices.Equal(askers, []partition.OffsetsAsker{partition.AskerReplica}) {
		t.Fatalf("askers %v, want one replica", askers)
	}
	gone := cluster.TopicPartition{Topic: "gone", Partition: 0}
	if _, err := c.ListEarliestOffset(context.Background(), 1, gone, -1); !errors.Is(err, partition.ErrUnknownTopicOrPartition) {
		t.Fatalf("earliest offset of %s: %v, want ErrUnknownTopicOrPartition", gone, err)
	}
	if _, err := c.ListEarliestOffset(context.Background(), 7, tp, -1); !errors.Is(err, cluster.ErrBrokerNotAvailable) {
		t.Fatalf("unknown leader: %v", err)
	}
}
