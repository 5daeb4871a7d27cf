package partition

import (
	"slices"
	"testing"
	"time"

	"github.com/kafkazk/broker/cluster"
)

// TestTxnVerificationGuardOff: with transaction.partition.verification.enable
// off no guard is needed, and none is handed out or kept.
func TestTxnVerificationGuardOff(t *testing.T) {
	m := txnManager(t, "", false, []int32{1}, []int32{1})
	for range 2 {
		g, needed, err := m.TxnVerificationGuard(tp0, 7)
		if err != nil || needed || g != 0 {
			t.Fatalf("guard with verification off: (%d, %v, %v), want (0, false, nil)", g, needed, err)
		}
	}
	r, _ := m.get(tp0)
	r.mu.Lock()
	n := len(r.guards)
	r.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d guards kept with verification off", n)
	}
}

// TestRetentionMovingLSOWakesConsumers: retention deleting the segment
// where an open transaction began moves the log start and with it the
// LSO the transaction held; read_committed long polls are woken.
func TestRetentionMovingLSOWakesConsumers(t *testing.T) {
	clock := &fakeClock{t: time.Unix(100000, 0)}
	m := newTestManager(t, 1, "", clock)
	cfg := cluster.DefaultLogConfig()
	cfg.MinInsyncReplicas = 1
	cfg.SegmentBytes, cfg.RetentionMs = 200, 1000
	if err := m.ApplyPartitionStates([]PartitionState{leaderState(1, 0, []int32{1}, []int32{1}, cfg)}); err != nil {
		t.Fatal(err)
	}
	mustAppendWith(t, m, tb(3, 0, 0, 1, true, 1), AppendOptions{Acks: 1}) // 0: open transaction of 3
	for range 6 {
		mustAppendWith(t, m, tb(-1, -1, -1, 1, false, 1), AppendOptions{Acks: 1})
	}
	if st := statusOf(t, m); st.LastStableOffset != 0 {
		t.Fatalf("LSO %d before retention, want 0", st.LastStableOffset)
	}
	visible := m.Changed(false)
	r, _ := m.get(tp0)
	n, err := r.applyRetention(clock.Now().UnixMilli())
	if err != nil || n == 0 {
		t.Fatalf("retention deleted %d segments: %v", n, err)
	}
	st := statusOf(t, m)
	if st.LogStartOffset == 0 || st.LastStableOffset != st.LogStartOffset {
		t.Fatalf("after retention log start %d LSO %d, want the LSO at the new log start", st.LogStartOffset, st.LastStableOffset)
	}
	if !isClosed(visible) {
		t.Fatal("retention moved the LSO without waking consumers' long polls")
	}
}

// TestSnapshotAtCheckpointedRecoveryPointKept: the log's recovery point
// runs ahead of the last recovery-point checkpoint (flushed since); the
// newest snapshot at or below the checkpointed one, where an open after a
// crash would start, is kept as well as the newest below the log's.
func TestSnapshotAtCheckpointedRecoveryPointKept(t *testing.T) {
	m := txnManager(t, "", false, []int32{1}, []int32{1})
	r, _ := m.get(tp0)
	snap := func() {
		t.Helper()
		r.mu.Lock()
		err := r.writeProducerSnapshotLocked()
		r.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
	}
	appendFlushed := func(flush bool) {
		t.Helper()
		mustAppendWith(t, m, tb(-1, -1, -1, 1, false, 1), AppendOptions{Acks: 1})
		if flush {
			if err := r.log.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendFlushed(false)
	appendFlushed(true)
	m.writeCheckpoints(true) // snapshot at 2, recovery point 2 checkpointed
	if got := r.checkpointedRP.Load(); got != 2 {
		t.Fatalf("checkpointed recovery point %d, want 2", got)
	}
	appendFlushed(true) // the log's recovery point is 3, the checkpoint's 2
	snap()
	appendFlushed(false)
	snap()
	appendFlushed(false)
	snap()
	if offs := snapshotOffsets(r.dir); !slices.Equal(offs, []int64{2, 3, 4, 5}) {
		t.Fatalf("snapshots %v, want [2 3 4 5]: the newest two, the one at the log's recovery point 3 and at the checkpointed 2", offs)
	}
}
