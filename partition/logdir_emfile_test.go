package partition

import (
	"errors"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/logstore"
)

// TestReplicaEMFILEFailsReplicaOnly: an ABORT marker whose aborted-index
// entry cannot be written because the process ran out of descriptors
// (EMFILE at the .txnindex create) fails that replica's log for good, as
// any other storage failure (logstore takes no more writes), though its
// dir stays online: the replica sets storageErr, so the false producer
// state (the transaction still ongoing in memory) is never saved in a
// snapshot, and it answers ErrStorage (KAFKA_STORAGE_ERROR) to appends,
// reads and LeaderAndIsr states, the last of which makes the controller
// take it offline and move its leadership; the handler is told
// (ReplicaOnly) so that the controller asks. After a restart the marker
// is replayed and its entry written: no hanging transaction.
func TestReplicaEMFILEFailsReplicaOnly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs")
	ffs := newFaultFS()
	m, err := NewManager(Config{
		BrokerID: 1, LogDirs: []string{dir},
		HighWatermarkCheckpointInterval: time.Second, RecoveryPointCheckpointInterval: time.Second,
		RetentionCheckInterval: time.Minute, Now: (&fakeClock{t: time.Unix(1000, 0)}).Now,
		Log: zerolog.New(zerolog.NewTestWriter(t)),
	})
	if err != nil {
		t.Fatal(err)
	}
	m.cfg.logFS = ffs
	failures := make(chan LogDirFailure, 2)
	m.SetLogDirFailureHandler(func(f LogDirFailure) { failures <- f })
	cfg := cluster.DefaultLogConfig()
	cfg.MinInsyncReplicas = 1
	if err := m.ApplyPartitionStates([]PartitionState{leaderState(1, 0, []int32{1}, []int32{1}, cfg)}); err != nil {
		t.Fatal(err)
	}
	r, _ := m.get(tp0)
	mustAppendWith(t, m, tb(5, 0, 0, 1, true, 1), AppendOptions{Acks: 1})
	ffs.arm(r.dir, syscall.EMFILE, logstore.MemOpCreate)
	if _, err := m.WriteTxnMarker(tp0, TxnMarker{ProducerID: 5, ProducerEpoch: 0, CoordinatorEpoch: 1}); !errors.Is(err, ErrStorage) {
		t.Fatalf("marker with EMFILE at the index create: %v, want ErrStorage", err)
	}
	ffs.arm(r.dir, nil)
	r.mu.Lock()
	storageErr := r.storageErr
	r.mu.Unlock()
	if !errors.Is(storageErr, syscall.EMFILE) {
		t.Fatalf("storageErr %v, want the EMFILE failure", storageErr)
	}
	m.waitLogDirFailures()
	if off := m.OfflineLogDirs(); len(off) != 0 {
		t.Fatalf("offline dirs %v: a shortage of descriptors takes no dir offline", off)
	}
	select {
	case f := <-failures:
		if !f.ReplicaOnly || !slices.Equal(f.Partitions, []cluster.TopicPartition{tp0}) || len(f.Online) != 1 || !errors.Is(f.Err, syscall.EMFILE) {
			t.Fatalf("handler told %+v, want ReplicaOnly for %s with its dir online", f, tp0)
		}
	default:
		t.Fatal("the handler was not told of the failed replica")
	}
	if _, err := m.AppendWith(tp0, tb(-1, -1, -1, 1, false, 1), AppendOptions{Acks: 1}); !errors.Is(err, ErrStorage) {
		t.Fatalf("append after: %v, want ErrStorage", err)
	}
	if _, err := m.Read(tp0, ReadRequest{FetchOffset: 0, MaxBytes: 1 << 20, ReplicaID: -1, CurrentLeaderEpoch: -1}); !errors.Is(err, ErrStorage) {
		t.Fatalf("read after: %v, want ErrStorage", err)
	}
	res := m.BecomeLeaderOrFollower([]PartitionState{leaderState(2, 1, []int32{1, 2}, []int32{2}, cfg)})
	if !errors.Is(res[tp0].Err, ErrStorage) {
		t.Fatalf("LeaderAndIsr for the failed replica: %+v, want ErrStorage (KAFKA_STORAGE_ERROR)", res[tp0])
	}
	m.writeCheckpoints(true)
	if offs := snapshotOffsets(r.dir); slices.Contains(offs, 2) {
		t.Fatalf("producer snapshots %v: the false state (transaction ongoing) saved at 2", offs)
	}
	_ = m.Close()
	m2 := txnManager(t, dir, false, []int32{1}, []int32{1})
	st := statusOf(t, m2)
	if len(st.OngoingTxns) != 0 || st.LastStableOffset != 2 {
		t.Fatalf("after restart: ongoing %+v, LSO %d; want none ongoing, LSO 2", st.OngoingTxns, st.LastStableOffset)
	}
}
