package partition

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kafkazk/broker/cluster"
)

// Tests of a replica whose aborted-index write fails after the marker is
// in the log (from a review: the transaction stayed open in memory, the
// batches after the marker in the same fetch were appended but not
// recorded, the fetcher went on past it and snapshots saved the false
// state). The log and the replica now go offline at the marker until the
// broker restarts, whose replay writes the entry.

// failTxnIndex makes the creation of broker id's first .txnindex fail
// (EISDIR) and returns the function that lifts it.
func failTxnIndex(t *testing.T, s *sim, id int32) (r *Replica, lift func()) {
	t.Helper()
	r, err := s.mgr(id).get(tp0)
	if err != nil {
		t.Fatal(err)
	}
	idx := filepath.Join(r.dir, "00000000000000000000.txnindex")
	if err := os.Mkdir(idx, 0o755); err != nil {
		t.Fatal(err)
	}
	return r, func() {
		if err := os.Remove(idx); err != nil {
			t.Fatal(err)
		}
	}
}

// killFailed stops broker id, whose log failed: the failure took its log
// dir offline (the log closed unflushed, the replica gone), and the rest
// is what s.kill does.
func killFailed(t *testing.T, s *sim, id int32) {
	t.Helper()
	m := s.mgr(id)
	m.waitLogDirFailures()
	if len(m.OfflineLogDirs()) == 0 {
		t.Fatalf("broker %d: its log dir is not offline after the failure", id)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("close of broker %d: %v", id, err)
	}
	s.mu.Lock()
	s.brokers[id].m = nil
	s.mu.Unlock()
}

// The follower stops at the marker whose entry it could not write: no
// batch after it is appended, not even by later fetches, no producer
// snapshot is written; after a restart it replays the marker, writes the
// entry and catches up with the leader's transactions.
func TestFollowerIndexFailureStopsAtMarker(t *testing.T) {
	s := newSim(t, 2, cluster.DefaultLogConfig())
	leader := s.mgr(1)
	mustAppendWith(t, leader, tb(5, 0, 0, 1, true, 1), AppendOptions{Acks: 1}) // 0 txn of 5
	s.catchUp()
	s.catchUp()
	r2, lift := failTxnIndex(t, s, 2)
	mustMarker(t, leader, TxnMarker{ProducerID: 5, ProducerEpoch: 0, CoordinatorEpoch: 1}) // 1 abort of 5
	mustAppendWith(t, leader, tb(6, 0, 0, 1, true, 1), AppendOptions{Acks: 1})             // 2 txn of 6, open
	mustAppendWith(t, leader, tb(-1, -1, -1, 1, false, 1), AppendOptions{Acks: 1})         // 3
	s.fetch(2)
	lift()
	s.fetch(2)
	fst := r2.status() // the replica is offline: its last state
	if fst.LogEndOffset != 2 {
		t.Fatalf("follower log end offset %d, want 2: nothing after the marker whose entry failed", fst.LogEndOffset)
	}
	if len(fst.OngoingTxns) != 1 || fst.OngoingTxns[0].ProducerID != 5 || fst.LastStableOffset != 0 {
		t.Fatalf("follower ongoing %+v lso %d, want producer 5's still holding the LSO at 0", fst.OngoingTxns, fst.LastStableOffset)
	}
	r2.mu.Lock()
	err := r2.writeProducerSnapshotLocked()
	r2.mu.Unlock()
	if !errors.Is(err, ErrStorage) {
		t.Fatalf("producer snapshot after the failure: %v, want ErrStorage", err)
	}
	s.mgr(2).writeCheckpoints(true)
	if offs := snapshotOffsets(r2.dir); slices.Contains(offs, 2) {
		t.Fatalf("snapshots %v: the failed replica's state was saved at its LEO 2", offs)
	}

	killFailed(t, s, 2)
	s.restart(2)
	s.catchUp()
	lst, fst := s.status(1), s.status(2)
	if fst.LogEndOffset != lst.LogEndOffset {
		t.Fatalf("after the restart follower LEO %d, leader %d", fst.LogEndOffset, lst.LogEndOffset)
	}
	if len(fst.OngoingTxns) != 1 || fst.OngoingTxns[0].ProducerID != 6 || fst.OngoingTxns[0].FirstOffset != 2 {
		t.Fatalf("after the restart follower ongoing %+v, leader %+v", fst.OngoingTxns, lst.OngoingTxns)
	}
	r2, _ = s.mgr(2).get(tp0)
	if got, _ := r2.log.CollectAbortedTxns(0, 100); len(got) != 1 || got[0].ProducerID != 5 || got[0].LastOffset != 1 {
		t.Fatalf("follower's index after the restart %+v, want producer 5's abort at 1", got)
	}
}

// A follower that failed so and then becomes leader refuses markers and
// appends (KAFKA_STORAGE_ERROR) and never shows read_committed an aborted
// batch without its entry; after a restart it serves the transaction as
// aborted.
func TestFollowerIndexFailureThenLeader(t *testing.T) {
	s := newSim(t, 2, cluster.DefaultLogConfig())
	leader := s.mgr(1)
	mustAppendWith(t, leader, tb(5, 0, 0, 1, true, 1), AppendOptions{Acks: 1}) // 0 txn of 5
	s.catchUp()
	s.catchUp()
	r2, lift := failTxnIndex(t, s, 2)
	mustMarker(t, leader, TxnMarker{ProducerID: 5, ProducerEpoch: 0, CoordinatorEpoch: 1}) // 1 abort of 5
	mustAppendWith(t, leader, tb(6, 0, 0, 1, true, 1), AppendOptions{Acks: 1})             // 2 txn of 6
	s.fetch(2)
	lift()
	s.kill(1)
	if nl := s.elect(); nl != 2 {
		t.Fatalf("elected %d", nl)
	}
	m := s.mgr(2)
	if _, err := m.WriteTxnMarker(tp0, TxnMarker{ProducerID: 6, ProducerEpoch: 0, CoordinatorEpoch: 1}); !errors.Is(err, ErrStorage) {
		t.Fatalf("marker on the failed replica: %v, want ErrStorage", err)
	}
	if _, err := m.AppendWith(tp0, tb(7, 0, 0, 1, true, 1), AppendOptions{Acks: 1}); !errors.Is(err, ErrStorage) {
		t.Fatalf("append on the failed replica: %v, want ErrStorage", err)
	}
	if _, err := m.DeleteRecords(t.Context(), tp0, 1, s.alive); !errors.Is(err, ErrStorage) {
		t.Fatalf("delete records on the failed replica: %v, want ErrStorage", err)
	}
	st := r2.status() // offline: its last state
	if st.LogEndOffset != 2 || st.LastStableOffset != 0 {
		t.Fatalf("failed leader leo %d lso %d, want 2 and 0", st.LogEndOffset, st.LastStableOffset)
	}
	if _, err := m.Read(tp0, ReadRequest{FetchOffset: 0, MaxBytes: 1 << 20, ReplicaID: -1, CurrentLeaderEpoch: -1, IsolationLevel: 1}); !errors.Is(err, ErrStorage) {
		t.Fatalf("read_committed on the failed replica: %v, want ErrStorage (its log dir is offline)", err)
	}

	killFailed(t, s, 2)
	s.restart(2)
	m = s.mgr(2)
	st = s.status(2)
	if len(st.OngoingTxns) != 0 || st.LastStableOffset != 2 {
		t.Fatalf("after the restart ongoing %+v lso %d, want none and 2", st.OngoingTxns, st.LastStableOffset)
	}
	rc := readAt(t, m, 0, 1)
	if !slices.Equal(rc.AbortedTransactions, []AbortedTransaction{{ProducerID: 5, FirstOffset: 0}}) {
		t.Fatalf("read_committed after the restart: batches %v aborted %+v, want producer 5's from 0",
			batchBases(t, rc.Records), rc.AbortedTransactions)
	}
	mustMarker(t, m, TxnMarker{ProducerID: 6, ProducerEpoch: 0, CoordinatorEpoch: 1})
}

// A leader whose aborted-index write fails after its marker was appended
// refuses every later append and marker and writes no producer snapshot;
// the transaction still holds the LSO. A restart replays the marker.
func TestLeaderIndexFailureTakesReplicaOffline(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs")
	m := txnManager(t, dir, false, []int32{1}, []int32{1})
	r, _ := m.get(tp0)
	mustAppendWith(t, m, tb(5, 0, 0, 1, true, 1), AppendOptions{Acks: 1}) // 0 txn of 5
	idx := filepath.Join(r.dir, "00000000000000000000.txnindex")
	if err := os.Mkdir(idx, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := m.WriteTxnMarker(tp0, TxnMarker{ProducerID: 5, ProducerEpoch: 0, CoordinatorEpoch: 1}); !errors.Is(err, ErrStorage) {
		t.Fatalf("marker whose index write fails: %v, want ErrStorage", err)
	}
	if err := os.Remove(idx); err != nil {
		t.Fatal(err)
	}
	if _, err := m.AppendWith(tp0, tb(-1, -1, -1, 1, false, 1), AppendOptions{Acks: 1}); !errors.Is(err, ErrStorage) {
		t.Fatalf("append after the failed index write: %v, want ErrStorage", err)
	}
	if _, err := m.WriteTxnMarker(tp0, TxnMarker{ProducerID: 5, ProducerEpoch: 0, CoordinatorEpoch: 1}); !errors.Is(err, ErrStorage) {
		t.Fatalf("marker after the failed index write: %v, want ErrStorage", err)
	}
	st := r.status() // offline: its last state
	if st.LogEndOffset != 2 || st.LastStableOffset != 0 || len(st.OngoingTxns) != 1 {
		t.Fatalf("after the failure leo %d lso %d ongoing %+v, want 2, 0 and producer 5's", st.LogEndOffset, st.LastStableOffset, st.OngoingTxns)
	}
	m.writeCheckpoints(true)
	if offs := snapshotOffsets(r.dir); slices.Contains(offs, 2) {
		t.Fatalf("snapshots %v: the failed replica's state was saved", offs)
	}
	m.waitLogDirFailures()
	if len(m.OfflineLogDirs()) != 1 {
		t.Fatal("the failed log's dir is not offline")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m2 := txnManager(t, dir, false, []int32{1}, []int32{1})
	if st := statusOf(t, m2); len(st.OngoingTxns) != 0 || st.LastStableOffset != 2 {
		t.Fatalf("after the restart ongoing %+v lso %d, want none and 2", st.OngoingTxns, st.LastStableOffset)
	}
	if got := readAt(t, m2, 0, 1).AbortedTransactions; !slices.Equal(got, []AbortedTransaction{{ProducerID: 5, FirstOffset: 0}}) {
		t.Fatalf("aborted transactions after the restart %+v", got)
	}
	mustAppendWith(t, m2, tb(-1, -1, -1, 1, false, 1), AppendOptions{Acks: 1})
}
