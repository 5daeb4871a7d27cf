package partition

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/logstore"
)

// reopenTwoDirs closes h's Manager and opens a new one on the same dirs,
// with no partition state applied yet.
func reopenTwoDirs(t *testing.T, h *twoDirManager) *Manager {
	t.Helper()
	if err := h.m.Close(); err != nil {
		t.Fatal(err)
	}
	m, err := NewManager(Config{
		BrokerID: 1, LogDirs: []string{h.d0, h.d1},
		HighWatermarkCheckpointInterval: time.Hour, RecoveryPointCheckpointInterval: time.Hour,
		RetentionCheckInterval: time.Hour, Now: (&fakeClock{t: time.Unix(1000, 0)}).Now,
		Log: zerolog.New(zerolog.NewTestWriter(t)), LeaderClient: idleLeader{},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// TestLogDirOfflineStatErrorNoEmptyLog: t-1 (acknowledged records in d1)
// is not created afresh on the online d0 when d1 is offline and its
// disk answers stat with an error other than ENOENT (here ENOTDIR; EIO on
// a failed disk), nor when the offline d1 looks empty (an unmounted
// disk), for a LeaderAndIsr state not new: that would make a leader with
// LEO 0 whose followers truncate to it, as Kafka's getOrCreateLog refuses
// a log not new while a dir is offline. The state answers ErrStorage
// (KAFKA_STORAGE_ERROR), which keeps the replica offline at the
// controller. A new partition (is_new), or a replica a reassignment adds,
// is still placed on d0.
func TestLogDirOfflineStatErrorNoEmptyLog(t *testing.T) {
	for _, tc := range []struct {
		name string
		kill func(t *testing.T, d1 string) // what the failed disk looks like
	}{
		{"ENOTDIR", func(t *testing.T, d1 string) {
			if err := os.Rename(d1, d1+".dead"); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(d1, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"empty", func(t *testing.T, d1 string) {
			if err := os.Rename(d1, d1+".dead"); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(d1, 0o755); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newTwoDirManager(t, "", newFaultFS(), 0)
			for range 3 {
				if _, err := h.produce(tpN(1)); err != nil {
					t.Fatal(err)
				}
			}
			if err := h.m.Close(); err != nil {
				t.Fatal(err)
			}
			// A crash before any checkpoint of d1 named t-1: only the
			// disk knows it is there.
			for _, f := range []string{logstore.RecoveryPointCheckpointFile, logstore.ReplicationCheckpointFile, logstore.LogStartOffsetCheckpointFile} {
				if err := os.Remove(filepath.Join(h.d1, f)); err != nil {
					t.Fatal(err)
				}
			}
			m := reopenTwoDirs(t, h)
			m.maybeAddOfflineLogDir(h.d1, syscall.EIO)
			m.waitLogDirFailures()
			tc.kill(t, h.d1)
			st := PartitionState{TopicPartition: tpN(1), Replicas: []int32{1}, Config: h.cfg,
				LeaderAndIsr: cluster.LeaderAndIsr{Leader: 1, LeaderEpoch: 1, Isr: []int32{1}, ZkVersion: 1}}
			res := m.BecomeLeaderOrFollower([]PartitionState{st})
			if !errors.Is(res[tpN(1)].Err, ErrStorage) {
				t.Fatalf("LeaderAndIsr for t-1 of the offline d1: %+v, want ErrStorage", res[tpN(1)])
			}
			if _, err := os.Stat(filepath.Join(h.d0, "t-1")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("t-1 created on the online dir: stat %v", err)
			}
			if _, err := m.get(tpN(1)); err == nil {
				t.Fatal("t-1 hosted after its LeaderAndIsr failed")
			}
			// A partition created now goes to d0.
			nst := PartitionState{TopicPartition: tpN(7), Replicas: []int32{1}, Config: h.cfg, IsNew: true,
				LeaderAndIsr: cluster.LeaderAndIsr{Leader: 1, LeaderEpoch: 0, Isr: []int32{1}}}
			if err := m.ApplyPartitionStates([]PartitionState{nst}); err != nil {
				t.Fatalf("new partition with d1 offline: %v", err)
			}
			if r, _ := m.get(tpN(7)); r == nil || filepath.Dir(r.dir) != h.d0 {
				t.Fatalf("new partition not placed in %s", h.d0)
			}
			// So does a replica a reassignment adds here.
			ast := PartitionState{TopicPartition: tpN(8), Replicas: []int32{2, 1}, Config: h.cfg, AddingReplicas: []int32{1},
				LeaderAndIsr: cluster.LeaderAndIsr{Leader: 2, LeaderEpoch: 3, Isr: []int32{2}}}
			if err := m.ApplyPartitionStates([]PartitionState{ast}); err != nil {
				t.Fatalf("replica added by a reassignment with d1 offline: %v", err)
			}
		})
	}
}

// TestLogDirCheckpointKeptOnStatError: a checkpoint entry whose partition
// directory cannot be stat'ed (ELOOP here, EIO on a failing disk) is not
// dropped as a deleted log's: when its dir then goes offline the
// partition is known to be there, and even a state marked new answers
// ErrStorage instead of an empty log on the online dir.
func TestLogDirCheckpointKeptOnStatError(t *testing.T) {
	h := newTwoDirManager(t, "", newFaultFS(), 0)
	if _, err := h.produce(tpN(1)); err != nil {
		t.Fatal(err)
	}
	if err := h.m.Close(); err != nil { // writes the checkpoints naming t-1
		t.Fatal(err)
	}
	p := filepath.Join(h.d1, "t-1")
	if err := os.Rename(p, p+".real"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("t-1", p); err != nil { // stat: ELOOP
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err == nil || errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stat %s: %v, want an error other than ENOENT", p, err)
	}
	m := reopenTwoDirs(t, h)
	m.mu.RLock()
	o, ok := m.saved[tpN(1)]
	m.mu.RUnlock()
	if !ok || o.logDir != h.d1 {
		t.Fatalf("checkpoint entry of t-1: %+v %v, want kept for %s", o, ok, h.d1)
	}
	m.maybeAddOfflineLogDir(h.d1, syscall.EIO)
	m.waitLogDirFailures()
	st := PartitionState{TopicPartition: tpN(1), Replicas: []int32{1}, Config: h.cfg, IsNew: true,
		LeaderAndIsr: cluster.LeaderAndIsr{Leader: 1, LeaderEpoch: 1, Isr: []int32{1}, ZkVersion: 1}}
	if res := m.BecomeLeaderOrFollower([]PartitionState{st}); !errors.Is(res[tpN(1)].Err, ErrStorage) {
		t.Fatalf("LeaderAndIsr for t-1: %+v, want ErrStorage", res[tpN(1)])
	}
	if _, err := os.Stat(filepath.Join(h.d0, "t-1")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("t-1 created on the online dir: stat %v", err)
	}
}

// TestLogDirOfflineStopReplicaDelete: StopReplica with delete for a
// partition of an offline log dir answers ErrStorage (KAFKA_STORAGE_ERROR,
// as Kafka's stopReplicas for an offline partition) and leaves its files on
// the failed disk (DeleteRecords answers ErrStorage too); a log on disk but not open there (its topic deleted
// while the broker was down) is not touched either, while the one in the
// online dir goes.
func TestLogDirOfflineStopReplicaDelete(t *testing.T) {
	h := newTwoDirManager(t, "", newFaultFS(), 0)
	if _, err := h.produce(tpN(1)); err != nil {
		t.Fatal(err)
	}
	stray := cluster.TopicPartition{Topic: "gone", Partition: 0}
	for _, d := range []string{h.d0, h.d1} {
		if err := os.MkdirAll(filepath.Join(d, "gone-0"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	h.m.maybeAddOfflineLogDir(h.d1, syscall.EIO)
	h.m.waitLogDirFailures()
	if _, err := h.m.DeleteRecords(context.Background(), tpN(1), -1, func(int32) bool { return true }); !errors.Is(err, ErrStorage) {
		t.Fatalf("DeleteRecords of t-1 in the offline d1: %v, want ErrStorage", err)
	}
	stopped, err := h.m.StopReplica(tpN(1), true, -2)
	if !errors.Is(err, ErrStorage) {
		t.Fatalf("StopReplica(delete) of t-1 in the offline d1: stopped %v, %v; want ErrStorage", stopped, err)
	}
	if _, err := os.Stat(filepath.Join(h.d1, "t-1")); err != nil {
		t.Fatalf("t-1 on the failed disk: %v, want left alone", err)
	}
	if _, err := h.m.StopReplica(stray, true, -2); err != nil {
		t.Fatalf("StopReplica(delete) of a log not open: %v", err)
	}
	if _, err := os.Stat(filepath.Join(h.d1, "gone-0")); err != nil {
		t.Fatalf("gone-0 on the failed disk: %v, want left alone", err)
	}
	if _, err := os.Stat(filepath.Join(h.d0, "gone-0")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("gone-0 on the online dir: %v, want deleted", err)
	}
	// A partition of the online dir is deleted as before.
	if _, err := h.m.StopReplica(tpN(0), true, -2); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(h.d0, "t-0")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("t-0 on the online dir: %v, want deleted", err)
	}
}

// fetched reports whether a fetcher of m holds tp.
func fetched(m *Manager, tp cluster.TopicPartition) bool {
	m.fetchMu.Lock()
	defer m.fetchMu.Unlock()
	for _, f := range m.fetchers {
		f.mu.Lock()
		_, ok := f.parts[tp]
		f.mu.Unlock()
		if ok {
			return true
		}
	}
	return false
}

// TestLogDirClosedReplicaNotFetched: a LeaderAndIsr that made t-1 a
// follower just before its dir's failure handling closed it (applyState
// passed, then the handling ran, then BecomeLeaderOrFollower moves the
// replica to its leader's fetcher) does not put the closed replica back
// into a fetcher, where it would be fetched for with its files closed.
func TestLogDirClosedReplicaNotFetched(t *testing.T) {
	h := newTwoDirManager(t, "", newFaultFS(), 0)
	st := PartitionState{TopicPartition: tpN(1), Replicas: []int32{1, 2}, Config: h.cfg,
		LeaderAndIsr: cluster.LeaderAndIsr{Leader: 2, LeaderEpoch: 1, Isr: []int32{2, 1}, ZkVersion: 1}}
	if err := h.m.ApplyPartitionStates([]PartitionState{st}); err != nil {
		t.Fatal(err)
	}
	if !fetched(h.m, tpN(1)) {
		t.Fatal("follower t-1 not in a fetcher")
	}
	r, _ := h.m.get(tpN(1))
	h.m.maybeAddOfflineLogDir(h.d1, syscall.EIO)
	h.m.waitLogDirFailures()
	if fetched(h.m, tpN(1)) {
		t.Fatal("t-1 of the offline dir still in a fetcher")
	}
	// The rest of the LeaderAndIsr, after the handling closed r.
	h.m.followPartition(r, 2, 1)
	if fetched(h.m, tpN(1)) {
		t.Fatal("the closed replica t-1 put back into a fetcher")
	}
}
