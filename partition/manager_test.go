package partition

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/logstore"
)

// TestStoppedReplicaKeepsCheckpoints: a replica stopped without delete (a
// followed partition in a controlled shutdown) keeps its entries in all
// three checkpoint files, as Kafka's LogManager keeps its log, so that its
// HW and a log start moved by DeleteRecords inside a segment survive the
// restart; a deleted one loses them.
func TestStoppedReplicaKeepsCheckpoints(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	dir := filepath.Join(t.TempDir(), "logs")
	m := newTestManager(t, 1, dir, clock)
	st := leaderState(1, 0, []int32{1}, []int32{1}, cluster.DefaultLogConfig())
	tp1 := cluster.TopicPartition{Topic: "t", Partition: 1}
	st1 := st
	st1.TopicPartition = tp1
	if err := m.ApplyPartitionStates([]PartitionState{st, st1}); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		mustAppend(t, m, buildBatch(batchSpec{records: 3, valueSize: 4}), -1)
	}
	if _, err := m.Append(tp1, buildBatch(batchSpec{records: 2}), -1); err != nil {
		t.Fatal(err)
	}
	if lw, err := m.DeleteRecords(context.Background(), tp0, 5, nil); err != nil || lw != 5 {
		t.Fatalf("DeleteRecords = %d, %v", lw, err)
	}
	if err := m.StopReplicas([]cluster.TopicPartition{tp0}, false); err != nil {
		t.Fatal(err)
	}
	if err := m.StopReplicas([]cluster.TopicPartition{tp1}, true); err != nil {
		t.Fatal(err)
	}
	m.writeCheckpoints(true)
	for file, want := range map[string]int64{
		logstore.ReplicationCheckpointFile:    12,
		logstore.RecoveryPointCheckpointFile:  12,
		logstore.LogStartOffsetCheckpointFile: 5,
	} {
		entries, err := logstore.ReadOffsetCheckpoint(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		var got []logstore.CheckpointEntry
		for _, e := range entries {
			got = append(got, e)
		}
		if len(got) != 1 || got[0].Topic != tp0.Topic || got[0].Partition != tp0.Partition || got[0].Offset != want {
			t.Errorf("%s = %+v, want only %s at %d", file, got, tp0, want)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m2 := newTestManager(t, 1, dir, clock)
	if err := m2.ApplyPartitionStates([]PartitionState{st}); err != nil {
		t.Fatal(err)
	}
	if off, _, _, err := m2.ListOffset(tp0, EarliestTimestamp, -1, AskerConsumer); err != nil || off != 5 {
		t.Fatalf("earliest offset after stop and restart %d, %v; want 5", off, err)
	}
	if _, err := m2.Read(tp0, ReadRequest{FetchOffset: 0, MaxBytes: 1 << 20, ReplicaID: -1, CurrentLeaderEpoch: -1}); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below the deleted records: %v, want ErrOffsetOutOfRange", err)
	}
}

// TestSlowOpenBlocksNoOtherPartition: while one partition's log opens
// (recovery, fsync), appends and reads of other partitions go on; two
// concurrent opens of one partition open its log once and share the
// replica.
func TestSlowOpenBlocksNoOtherPartition(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	m := newTestManager(t, 1, "", clock)
	cfg := cluster.DefaultLogConfig()
	if err := m.ApplyPartitionStates([]PartitionState{leaderState(1, 0, []int32{1}, []int32{1}, cfg)}); err != nil {
		t.Fatal(err)
	}
	slow := cluster.TopicPartition{Topic: "slow", Partition: 0}
	entered, release := make(chan struct{}), make(chan struct{})
	var opens atomic.Int32
	m.openHook = func(tp cluster.TopicPartition) {
		if tp != slow {
			return
		}
		if opens.Add(1) == 1 {
			close(entered)
		}
		<-release
	}
	waiting := make(chan struct{}, 2)
	m.openWaitHook = func(tp cluster.TopicPartition) {
		if tp == slow {
			waiting <- struct{}{}
		}
	}
	st := leaderState(1, 0, []int32{1}, []int32{1}, cfg)
	st.TopicPartition = slow
	opened := make(chan error, 2)
	for range 2 {
		go func() { opened <- m.ApplyPartitionStates([]PartitionState{st}) }()
	}
	<-entered
	appended := make(chan error, 1)
	go func() {
		_, err := m.Append(tp0, buildBatch(batchSpec{}), 1)
		if err == nil {
			_, err = m.Read(tp0, ReadRequest{FetchOffset: 0, MaxBytes: 1 << 20, ReplicaID: -1, CurrentLeaderEpoch: -1})
		}
		appended <- err
	}()
	blocked := false
	select {
	case err := <-appended:
		if err != nil {
			t.Errorf("append to %s while %s opens: %v", tp0, slow, err)
		}
	case <-time.After(5 * time.Second):
		blocked = true
		t.Errorf("append to %s blocked while %s opens", tp0, slow)
	}
	// The second open must wait on the first's placeholder before the
	// first finishes, or the test would not show that they share it.
	parked := true
	select {
	case <-waiting:
	case <-time.After(5 * time.Second):
		parked = false
	}
	close(release)
	if !parked {
		t.Fatalf("the second open of %s never waited for the first", slow)
	}
	if blocked {
		<-appended
	}
	for range 2 {
		if err := <-opened; err != nil {
			t.Fatalf("open %s: %v", slow, err)
		}
	}
	if n := opens.Load(); n != 1 {
		t.Fatalf("%s opened %d times, want once", slow, n)
	}
	if _, err := m.Append(slow, buildBatch(batchSpec{}), 1); err != nil {
		t.Fatalf("append to %s after its open: %v", slow, err)
	}
}

// TestBecomeLeaderOrFollowerReportsApplied: the result says what the
// replica applied (role and epoch, whether the epoch is new), and a stale
// state reports nothing applied; a StopReplica of an older leader epoch
// stops nothing.
func TestBecomeLeaderOrFollowerReportsApplied(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	m := newTestManager(t, 1, "", clock)
	cfg := cluster.DefaultLogConfig()
	apply := func(leader, epoch, zkVersion int32) Transition {
		t.Helper()
		st := leaderState(leader, epoch, []int32{1, 2}, []int32{1, 2}, cfg)
		st.LeaderAndIsr.ZkVersion = zkVersion
		res := m.BecomeLeaderOrFollower([]PartitionState{st})
		if len(res) != 1 {
			t.Fatalf("results %v, want one for %s", res, tp0)
		}
		return res[tp0]
	}
	for _, c := range []struct {
		name                  string
		leader, epoch, zkVers int32
		want                  Transition
	}{
		{"leader", 1, 5, 0, Transition{Applied: true, Role: RoleLeader, LeaderEpoch: 5, NewEpoch: true}},
		{"same epoch, new ISR", 1, 5, 1, Transition{Applied: true, Role: RoleLeader, LeaderEpoch: 5}},
		{"stale zkVersion", 1, 5, 0, Transition{}},
		{"stale epoch naming another leader", 2, 4, 2, Transition{}},
		{"follower", 2, 6, 3, Transition{Applied: true, Role: RoleFollower, LeaderEpoch: 6, NewEpoch: true}},
		{"stale epoch naming this broker", 1, 5, 4, Transition{}},
	} {
		if got := apply(c.leader, c.epoch, c.zkVers); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
	if stopped, err := m.StopReplica(tp0, false, 5); stopped || !errors.Is(err, ErrFencedLeaderEpoch) {
		t.Fatalf("StopReplica in epoch 5 of a replica in 6: stopped %v, %v; want ErrFencedLeaderEpoch", stopped, err)
	}
	if len(m.Hosted()) != 1 {
		t.Fatalf("a stale stop stopped the replica: hosted %v", m.Hosted())
	}
	if stopped, err := m.StopReplica(tp0, false, 6); !stopped || err != nil {
		t.Fatalf("StopReplica in the replica's epoch: stopped %v, %v", stopped, err)
	}
	if len(m.Hosted()) != 0 {
		t.Fatalf("hosted after stop: %v", m.Hosted())
	}
}

// TestDeleteUnopenedReplica: a StopReplica with delete for a partition
// whose log is on disk but not open here (the topic was deleted while this
// broker was down) deletes the log and its checkpoint entries, so a topic
// created again under the name starts empty.
func TestDeleteUnopenedReplica(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	dir := filepath.Join(t.TempDir(), "logs")
	m := newTestManager(t, 1, dir, clock)
	st := leaderState(1, 0, []int32{1}, []int32{1}, cluster.DefaultLogConfig())
	if err := m.ApplyPartitionStates([]PartitionState{st}); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, m, buildBatch(batchSpec{records: 3}), -1)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m2 := newTestManager(t, 1, dir, clock)
	if stopped, err := m2.StopReplica(tp0, true, -2); !stopped || err != nil {
		t.Fatalf("StopReplica with delete: stopped %v, %v", stopped, err)
	}
	if _, err := os.Stat(filepath.Join(dir, partitionDirName(tp0))); !os.IsNotExist(err) {
		t.Fatalf("log directory after delete: %v, want it gone", err)
	}
	m2.writeCheckpoints(true)
	if entries, err := logstore.ReadOffsetCheckpoint(filepath.Join(dir, logstore.ReplicationCheckpointFile)); err != nil || len(entries) != 0 {
		t.Fatalf("HW checkpoint after delete: %v, %v; want empty", entries, err)
	}
	if err := m2.ApplyPartitionStates([]PartitionState{st}); err != nil {
		t.Fatal(err)
	}
	if off, _, _, err := m2.ListOffset(tp0, LatestTimestamp, -1, AskerConsumer); err != nil || off != 0 {
		t.Fatalf("recreated partition's end %d, %v; want 0", off, err)
	}
}
