package partition

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/logstore"
)

// Transactions on one replica (Kafka's ProducerStateManager): the LSO, the
// markers, the read_committed bound, fencing and KIP-890 verification,
// driven through Manager with a fake clock. A producer's batches use
// sequences from 0 per epoch; tb builds them.

// txnManager makes broker 1 lead tp0 in leader epoch 0 over replicas and
// isr (min.insync.replicas 1) with transaction.partition.verification.enable
// as verify, over dir ("" for a fresh one).
func txnManager(t *testing.T, dir string, verify bool, replicas, isr []int32) *Manager {
	t.Helper()
	if dir == "" {
		dir = filepath.Join(t.TempDir(), "logs")
	}
	m, err := NewManager(Config{
		BrokerID: 1, LogDirs: []string{dir},
		HighWatermarkCheckpointInterval: time.Second, RecoveryPointCheckpointInterval: time.Second,
		RetentionCheckInterval: time.Minute, Now: (&fakeClock{t: time.Unix(1000, 0)}).Now,
		Log: zerolog.New(zerolog.NewTestWriter(t)), TxnVerification: verify,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	cfg := cluster.DefaultLogConfig()
	cfg.MinInsyncReplicas = 1
	if err := m.ApplyPartitionStates([]PartitionState{leaderState(1, 0, replicas, isr, cfg)}); err != nil {
		t.Fatal(err)
	}
	return m
}

// tb is a batch of n records of producer pid at epoch and sequence seq,
// transactional or not, with timestamp ts.
func tb(pid int64, epoch int16, seq int32, n int, txn bool, ts int64) []byte {
	return buildBatch(batchSpec{records: n, producerID: pid, producerEpoch: epoch, baseSequence: seq,
		transactional: txn, valueSize: 4, timestamp: ts})
}

func mustAppendWith(t *testing.T, m *Manager, b []byte, opts AppendOptions) AppendResult {
	t.Helper()
	res, err := m.AppendWith(tp0, b, opts)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return res
}

func mustMarker(t *testing.T, m *Manager, mk TxnMarker) AppendResult {
	t.Helper()
	res, err := m.WriteTxnMarker(tp0, mk)
	if err != nil {
		t.Fatalf("marker %+v: %v", mk, err)
	}
	return res
}

func statusOf(t *testing.T, m *Manager) ReplicaStatus {
	t.Helper()
	for _, st := range m.PartitionStatus() {
		if st.TopicPartition == tp0 {
			return st
		}
	}
	t.Fatalf("no replica of %s", tp0)
	return ReplicaStatus{}
}

// readAt is a consumer's read of tp0 from offset at isolation level iso.
func readAt(t *testing.T, m *Manager, offset int64, iso int8) ReadResult {
	t.Helper()
	res, err := m.Read(tp0, ReadRequest{FetchOffset: offset, MaxBytes: 1 << 20, ReplicaID: -1, CurrentLeaderEpoch: -1, IsolationLevel: iso})
	if err != nil {
		t.Fatalf("read at %d (isolation %d): %v", offset, iso, err)
	}
	return res
}

// batchBases lists the base offsets of the batches in records.
func batchBases(t *testing.T, records []byte) []int64 {
	t.Helper()
	var out []int64
	if err := forEachBatch(records, func(h logstore.BatchHeader, _ []byte) error {
		out = append(out, h.BaseOffset)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestTxnLSOMovesWithMarkersAndHW: with ISR {1, 2} the LSO stays at an
// ongoing transaction's first offset however far the HW goes, stays there
// after its COMMIT marker until the HW passes the marker (an unreplicated
// transaction), and then jumps to the HW; the move wakes consumers'
// long polls. Every read and the status report it.
func TestTxnLSOMovesWithMarkersAndHW(t *testing.T) {
	m := txnManager(t, "", false, []int32{1, 2}, []int32{1, 2})
	lso := func(want int64, what string) {
		t.Helper()
		if got := readAt(t, m, 0, 0).LastStableOffset; got != want {
			t.Fatalf("%s: read's LSO %d, want %d", what, got, want)
		}
		if got := statusOf(t, m).LastStableOffset; got != want {
			t.Fatalf("%s: status LSO %d, want %d", what, got, want)
		}
	}
	mustAppendWith(t, m, tb(-1, -1, -1, 2, false, 1), AppendOptions{Acks: 1}) // 0-1
	followerFetch(t, m, 2, 0)
	lso(2, "no transaction")

	mustAppendWith(t, m, tb(7, 0, 0, 2, true, 5), AppendOptions{Acks: 1}) // 2-3, txn of 7 from 2
	lso(2, "transaction begun above the HW")
	followerFetch(t, m, 4, 0)
	lso(2, "HW past the transaction's batches")
	if st := statusOf(t, m); len(st.OngoingTxns) != 1 || st.OngoingTxns[0] != (OngoingTxn{ProducerID: 7, ProducerEpoch: 0, FirstOffset: 2, LastTimestamp: 5}) {
		t.Fatalf("ongoing transactions %+v", st.OngoingTxns)
	}
	mustAppendWith(t, m, tb(-1, -1, -1, 1, false, 6), AppendOptions{Acks: 1}) // 4
	followerFetch(t, m, 5, 0)
	lso(2, "other records after the transaction")

	mk := mustMarker(t, m, TxnMarker{ProducerID: 7, ProducerEpoch: 0, CoordinatorEpoch: 1, Commit: true}) // 5
	if mk.BaseOffset != 5 || mk.LastOffset != 5 {
		t.Fatalf("marker at %d-%d, want 5", mk.BaseOffset, mk.LastOffset)
	}
	if st := statusOf(t, m); len(st.OngoingTxns) != 0 {
		t.Fatalf("ongoing after the marker: %+v", st.OngoingTxns)
	}
	lso(2, "marker at the HW, not yet replicated")
	visible := m.Changed(false)
	followerFetch(t, m, 6, 0)
	lso(6, "HW past the marker")
	if !isClosed(visible) {
		t.Fatal("the LSO moved without waking consumers' long polls")
	}

	// A second transaction, aborted, in ISR {1, 2} again.
	mustAppendWith(t, m, tb(8, 0, 0, 1, true, 7), AppendOptions{Acks: 1}) // 6
	followerFetch(t, m, 7, 0)
	lso(6, "second transaction")
	mustMarker(t, m, TxnMarker{ProducerID: 8, ProducerEpoch: 0, CoordinatorEpoch: 1}) // 7
	lso(6, "abort marker not replicated")
	followerFetch(t, m, 8, 0)
	lso(8, "abort marker replicated")
}

// TestTxnLSOTwoProducers: the LSO is held by the oldest unstable
// transaction: the older one's commit does not pass the younger one's
// start, and the aborted-index entry of the younger one records the LSO
// the older one still held (Kafka's lastStableOffset of a completed
// transaction).
func TestTxnLSOTwoProducers(t *testing.T) {
	m := txnManager(t, "", false, []int32{1}, []int32{1})
	mustAppendWith(t, m, tb(1, 0, 0, 1, true, 1), AppendOptions{Acks: 1})             // 0
	mustAppendWith(t, m, tb(2, 0, 0, 1, true, 1), AppendOptions{Acks: 1})             // 1
	mustMarker(t, m, TxnMarker{ProducerID: 2, ProducerEpoch: 0, CoordinatorEpoch: 0}) // 2: abort of 2
	if got := statusOf(t, m).LastStableOffset; got != 0 {
		t.Fatalf("LSO %d with producer 1's transaction open at 0", got)
	}
	r, _ := m.get(tp0)
	txns, err := r.log.CollectAbortedTxns(0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(txns) != 1 || txns[0] != (logstore.AbortedTxn{ProducerID: 2, FirstOffset: 1, LastOffset: 2, LastStableOffset: 0}) {
		t.Fatalf("aborted index %+v", txns)
	}
	mustMarker(t, m, TxnMarker{ProducerID: 1, ProducerEpoch: 0, CoordinatorEpoch: 0, Commit: true}) // 3
	if got := statusOf(t, m).LastStableOffset; got != 4 {
		t.Fatalf("LSO %d after both ended, want 4", got)
	}
}

// TestReadCommittedAbortedTransactions: a read_committed read lists the
// aborted transactions overlapping what it returns (and only those); a
// read_uncommitted one lists none.
func TestReadCommittedAbortedTransactions(t *testing.T) {
	m := txnManager(t, "", false, []int32{1}, []int32{1})
	mustAppendWith(t, m, tb(5, 0, 0, 2, true, 1), AppendOptions{Acks: 1})                           // 0-1 txn of 5
	mustAppendWith(t, m, tb(-1, -1, -1, 1, false, 1), AppendOptions{Acks: 1})                       // 2
	mustMarker(t, m, TxnMarker{ProducerID: 5, ProducerEpoch: 0, CoordinatorEpoch: 3})               // 3 abort
	mustAppendWith(t, m, tb(6, 0, 0, 1, true, 1), AppendOptions{Acks: 1})                           // 4 txn of 6
	mustMarker(t, m, TxnMarker{ProducerID: 6, ProducerEpoch: 0, CoordinatorEpoch: 3, Commit: true}) // 5
	mustAppendWith(t, m, tb(5, 0, 2, 1, true, 1), AppendOptions{Acks: 1})                           // 6 txn of 5 again
	mustMarker(t, m, TxnMarker{ProducerID: 5, ProducerEpoch: 0, CoordinatorEpoch: 3})               // 7 abort

	rc := readAt(t, m, 0, 1)
	if got := batchBases(t, rc.Records); !slices.Equal(got, []int64{0, 2, 3, 4, 5, 6, 7}) {
		t.Fatalf("read_committed batches %v", got)
	}
	want := []AbortedTransaction{{ProducerID: 5, FirstOffset: 0}, {ProducerID: 5, FirstOffset: 6}}
	if !slices.Equal(rc.AbortedTransactions, want) {
		t.Fatalf("aborted transactions %+v, want %+v", rc.AbortedTransactions, want)
	}
	if ru := readAt(t, m, 0, 0); ru.AbortedTransactions != nil || len(batchBases(t, ru.Records)) != 7 {
		t.Fatalf("read_uncommitted: aborted %+v, %d batches", ru.AbortedTransactions, len(batchBases(t, ru.Records)))
	}
	// From 4 on, the first aborted transaction (ended at 3) is behind the read.
	if got := readAt(t, m, 4, 1).AbortedTransactions; !slices.Equal(got, want[1:]) {
		t.Fatalf("read_committed from 4: aborted %+v, want %+v", got, want[1:])
	}
	// A read that returns only the first batch lists only what overlaps it.
	res, err := m.Read(tp0, ReadRequest{FetchOffset: 0, MaxBytes: 1, ReplicaID: -1, CurrentLeaderEpoch: -1, IsolationLevel: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := batchBases(t, res.Records); !slices.Equal(got, []int64{0}) || !slices.Equal(res.AbortedTransactions, want[:1]) {
		t.Fatalf("small read_committed read: batches %v, aborted %+v", got, res.AbortedTransactions)
	}
}

// TestReadCommittedStopsAtLSO: a read_committed read never returns a
// batch at or after the LSO (an open transaction), from any fetch offset,
// while read_uncommitted reads to the HW; ListOffsets latest is the LSO for
// a read_committed consumer and the HW for the others.
func TestReadCommittedStopsAtLSO(t *testing.T) {
	m := txnManager(t, "", false, []int32{1}, []int32{1})
	mustAppendWith(t, m, tb(-1, -1, -1, 2, false, 1), AppendOptions{Acks: 1}) // 0-1
	mustAppendWith(t, m, tb(9, 0, 0, 1, true, 1), AppendOptions{Acks: 1})     // 2 txn
	mustAppendWith(t, m, tb(-1, -1, -1, 1, false, 1), AppendOptions{Acks: 1}) // 3
	mustAppendWith(t, m, tb(9, 0, 1, 1, true, 1), AppendOptions{Acks: 1})     // 4
	st := statusOf(t, m)
	if st.HighWatermark != 5 || st.LastStableOffset != 2 {
		t.Fatalf("hw %d lso %d, want 5 and 2", st.HighWatermark, st.LastStableOffset)
	}
	for from := int64(0); from <= 5; from++ {
		res := readAt(t, m, from, 1)
		for _, b := range batchBases(t, res.Records) {
			if b >= 2 {
				t.Fatalf("read_committed from %d returned the batch at %d, at or after the LSO 2", from, b)
			}
		}
		if res.LastStableOffset != 2 || res.HighWatermark != 5 {
			t.Fatalf("read from %d: lso %d hw %d", from, res.LastStableOffset, res.HighWatermark)
		}
	}
	if got := batchBases(t, readAt(t, m, 0, 0).Records); !slices.Equal(got, []int64{0, 2, 3, 4}) {
		t.Fatalf("read_uncommitted batches %v", got)
	}
	for _, c := range []struct {
		asker OffsetsAsker
		want  int64
	}{{AskerCommittedConsumer, 2}, {AskerConsumer, 5}, {AskerLegacyConsumer, 5}, {AskerReplica, 5}} {
		off, _, _, err := m.ListOffset(tp0, LatestTimestamp, -1, c.asker)
		if err != nil || off != c.want {
			t.Fatalf("latest for asker %d: %d, %v; want %d", c.asker, off, err, c.want)
		}
	}
	mustMarker(t, m, TxnMarker{ProducerID: 9, ProducerEpoch: 0, CoordinatorEpoch: 0, Commit: true}) // 5
	if got := batchBases(t, readAt(t, m, 2, 1).Records); !slices.Equal(got, []int64{2, 3, 4, 5}) {
		t.Fatalf("read_committed after the commit: %v", got)
	}
}

// TestTxnMarkerFencing: a marker with a coordinator epoch below the last
// one seen for the producer is TRANSACTION_COORDINATOR_FENCED and one with
// a producer epoch below the producer's INVALID_PRODUCER_EPOCH; neither is
// appended nor ends the transaction. A marker with a bumped producer epoch
// fences the producer's older batches, and one for a producer with no
// transaction is appended anyway.
func TestTxnMarkerFencing(t *testing.T) {
	m := txnManager(t, "", false, []int32{1}, []int32{1})
	mustAppendWith(t, m, tb(4, 1, 0, 1, true, 1), AppendOptions{Acks: 1})                           // 0
	mustMarker(t, m, TxnMarker{ProducerID: 4, ProducerEpoch: 1, CoordinatorEpoch: 5, Commit: true}) // 1
	mustAppendWith(t, m, tb(4, 1, 1, 1, true, 1), AppendOptions{Acks: 1})                           // 2
	leo := statusOf(t, m).LogEndOffset

	if _, err := m.WriteTxnMarker(tp0, TxnMarker{ProducerID: 4, ProducerEpoch: 1, CoordinatorEpoch: 4}); !errors.Is(err, ErrTransactionCoordinatorFenced) {
		t.Fatalf("marker of an older coordinator epoch: %v, want ErrTransactionCoordinatorFenced", err)
	}
	if _, err := m.WriteTxnMarker(tp0, TxnMarker{ProducerID: 4, ProducerEpoch: 0, CoordinatorEpoch: 6}); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("marker of an older producer epoch: %v, want ErrInvalidProducerEpoch", err)
	}
	st := statusOf(t, m)
	if st.LogEndOffset != leo || len(st.OngoingTxns) != 1 || st.OngoingTxns[0].FirstOffset != 2 {
		t.Fatalf("after fenced markers: leo %d (was %d), ongoing %+v", st.LogEndOffset, leo, st.OngoingTxns)
	}

	// The coordinator fences the producer: abort with epoch 2.
	mustMarker(t, m, TxnMarker{ProducerID: 4, ProducerEpoch: 2, CoordinatorEpoch: 5}) // 3
	if _, err := m.AppendWith(tp0, tb(4, 1, 2, 1, true, 1), AppendOptions{Acks: 1}); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("batch of the fenced epoch: %v, want ErrInvalidProducerEpoch", err)
	}
	mustAppendWith(t, m, tb(4, 2, 0, 1, true, 1), AppendOptions{Acks: 1}) // 4: the new epoch starts at 0
	// A marker for a producer never seen here.
	if res := mustMarker(t, m, TxnMarker{ProducerID: 99, ProducerEpoch: 0, CoordinatorEpoch: 5}); res.BaseOffset != 5 {
		t.Fatalf("marker of an unknown producer at %d, want 5", res.BaseOffset)
	}
	ps, err := m.DescribeProducers(tp0)
	if err != nil {
		t.Fatal(err)
	}
	want := []ProducerInfo{
		{ProducerID: 4, ProducerEpoch: 2, LastSequence: 0, LastTimestamp: 1, CoordinatorEpoch: 5, CurrentTxnStartOffset: 4},
		{ProducerID: 99, ProducerEpoch: 0, LastSequence: -1, LastTimestamp: 1000_000, CoordinatorEpoch: 5, CurrentTxnStartOffset: -1},
	}
	if !slices.Equal(ps, want) {
		t.Fatalf("producers %+v, want %+v", ps, want)
	}
}

// TestTxnVerificationGuard (KIP-890 part 1): with verification on, a
// transactional batch of a producer with no ongoing transaction needs the
// leader's guard; a marker between the guard and the append clears it, so
// the append fails INVALID_TXN_STATE; once the transaction is ongoing no
// guard is needed. A coordinator's write needs none, and with verification
// off neither does a client's.
func TestTxnVerificationGuard(t *testing.T) {
	m := txnManager(t, "", true, []int32{1}, []int32{1})
	if _, err := m.AppendWith(tp0, tb(3, 0, 0, 1, true, 1), AppendOptions{Acks: 1}); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("unverified transactional batch: %v, want ErrInvalidTxnState", err)
	}
	g1, needed, err := m.TxnVerificationGuard(tp0, 3)
	if err != nil || !needed || g1 == 0 {
		t.Fatalf("guard %d needed %v err %v", g1, needed, err)
	}
	if again, _, _ := m.TxnVerificationGuard(tp0, 3); again != g1 {
		t.Fatalf("a second ask before any append got guard %d, want the same %d", again, g1)
	}
	// The coordinator aborts (a timeout) between the verification and the append.
	mustMarker(t, m, TxnMarker{ProducerID: 3, ProducerEpoch: 0, CoordinatorEpoch: 0})
	if _, err := m.AppendWith(tp0, tb(3, 0, 0, 1, true, 1), AppendOptions{Acks: 1, VerificationGuard: g1}); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("append with a guard a marker cleared: %v, want ErrInvalidTxnState", err)
	}
	g2, needed, err := m.TxnVerificationGuard(tp0, 3)
	if err != nil || !needed || g2 == 0 || g2 == g1 {
		t.Fatalf("fresh guard %d (old %d) needed %v err %v", g2, g1, needed, err)
	}
	if _, err := m.AppendWith(tp0, tb(3, 0, 0, 1, true, 1), AppendOptions{Acks: 1, VerificationGuard: g2 + 1}); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("append with a wrong guard: %v, want ErrInvalidTxnState", err)
	}
	mustAppendWith(t, m, tb(3, 0, 0, 1, true, 1), AppendOptions{Acks: 1, VerificationGuard: g2})
	if g, needed, err := m.TxnVerificationGuard(tp0, 3); err != nil || needed || g != 0 {
		t.Fatalf("guard during the transaction: %d needed %v err %v, want 0 false", g, needed, err)
	}
	mustAppendWith(t, m, tb(3, 0, 1, 1, true, 1), AppendOptions{Acks: 1}) // ongoing: no guard needed
	// The guard was consumed by the first append: after the transaction
	// ends it cannot start another.
	mustMarker(t, m, TxnMarker{ProducerID: 3, ProducerEpoch: 0, CoordinatorEpoch: 0, Commit: true})
	if _, err := m.AppendWith(tp0, tb(3, 0, 2, 1, true, 1), AppendOptions{Acks: 1, VerificationGuard: g2}); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("reuse of a consumed guard: %v, want ErrInvalidTxnState", err)
	}
	// A coordinator's transactional write (the group coordinator's
	// TxnOffsetCommit, sequence -1) needs a guard too, as in Kafka: one
	// verified before a marker must not start a transaction after it.
	if _, err := m.AppendWith(tp0, tb(11, 0, -1, 1, true, 1), AppendOptions{Acks: 1, Origin: OriginCoordinator}); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("coordinator's transactional write without a guard: %v, want ErrInvalidTxnState", err)
	}
	g11, needed, err := m.TxnVerificationGuard(tp0, 11)
	if err != nil || !needed || g11 == 0 {
		t.Fatalf("guard for the coordinator's write: %d needed %v err %v", g11, needed, err)
	}
	mustAppendWith(t, m, tb(11, 0, -1, 1, true, 1), AppendOptions{Acks: 1, Origin: OriginCoordinator, VerificationGuard: g11})
	mustAppendWith(t, m, tb(11, 0, -1, 1, true, 1), AppendOptions{Acks: 1, Origin: OriginCoordinator}) // ongoing: no guard needed
	if st := statusOf(t, m); len(st.OngoingTxns) != 1 || st.OngoingTxns[0].ProducerID != 11 {
		t.Fatalf("ongoing %+v, want the coordinator's producer 11", st.OngoingTxns)
	}

	off := txnManager(t, "", false, []int32{1}, []int32{1})
	mustAppendWith(t, off, tb(3, 0, 0, 1, true, 1), AppendOptions{Acks: 1})

	if _, _, err := m.TxnVerificationGuard(cluster.TopicPartition{Topic: "nope"}, 3); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("guard of an unknown partition: %v", err)
	}
}

// TestNonTransactionalBatchInTxnRefused: inside its transaction a producer
// may not write a non-transactional batch (INVALID_TXN_STATE, nothing
// appended), whatever the origin; after the marker it may.
func TestNonTransactionalBatchInTxnRefused(t *testing.T) {
	m := txnManager(t, "", false, []int32{1}, []int32{1})
	mustAppendWith(t, m, tb(2, 0, 0, 1, true, 1), AppendOptions{Acks: 1})
	for _, origin := range []AppendOrigin{OriginClient, OriginCoordinator} {
		if _, err := m.AppendWith(tp0, tb(2, 0, 1, 1, false, 1), AppendOptions{Acks: 1, Origin: origin}); !errors.Is(err, ErrInvalidTxnState) {
			t.Fatalf("origin %d: non-transactional batch in a transaction: %v, want ErrInvalidTxnState", origin, err)
		}
	}
	if leo := statusOf(t, m).LogEndOffset; leo != 1 {
		t.Fatalf("leo %d after refused batches, want 1", leo)
	}
	mustMarker(t, m, TxnMarker{ProducerID: 2, ProducerEpoch: 0, CoordinatorEpoch: 0, Commit: true})
	mustAppendWith(t, m, tb(2, 0, 1, 1, false, 1), AppendOptions{Acks: 1})
	// A transactional batch without a producer id is malformed.
	if _, err := m.AppendWith(tp0, tb(-1, -1, -1, 1, true, 1), AppendOptions{Acks: 1}); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("transactional batch without a producer id: %v, want ErrInvalidRecord", err)
	}
}

// TestFollowerTracksTransactions: a follower replicating transactional
// batches and markers holds the same transactions, LSO and aborted index
// as the leader; elected after the leader dies it keeps refusing a
// non-transactional batch of the open transaction, ends it with the next
// marker and fences a stale coordinator as the old leader would.
func TestFollowerTracksTransactions(t *testing.T) {
	s := newSim(t, 3, cluster.DefaultLogConfig())
	leader := s.mgr(1)
	mustAppendWith(t, leader, tb(1, 0, 0, 2, true, 10), AppendOptions{Acks: -1})                         // 0-1 txn of 1
	mustAppendWith(t, leader, tb(2, 0, 0, 1, true, 11), AppendOptions{Acks: -1})                         // 2 txn of 2
	mustMarker(t, leader, TxnMarker{ProducerID: 1, ProducerEpoch: 0, CoordinatorEpoch: 7})               // 3 abort of 1
	mustAppendWith(t, leader, tb(3, 0, 0, 1, true, 12), AppendOptions{Acks: -1})                         // 4 txn of 3
	mustMarker(t, leader, TxnMarker{ProducerID: 3, ProducerEpoch: 0, CoordinatorEpoch: 7, Commit: true}) // 5
	s.catchUp()
	s.catchUp() // the followers learn the final HW

	lst := s.status(1)
	if lst.LastStableOffset != 2 || len(lst.OngoingTxns) != 1 || lst.OngoingTxns[0].ProducerID != 2 {
		t.Fatalf("leader: lso %d ongoing %+v", lst.LastStableOffset, lst.OngoingTxns)
	}
	lr, _ := leader.get(tp0)
	wantIdx, err := lr.log.CollectAbortedTxns(0, 100)
	if err != nil || len(wantIdx) != 1 {
		t.Fatalf("leader aborted index %+v %v", wantIdx, err)
	}
	for _, id := range []int32{2, 3} {
		st := s.status(id)
		if st.LastStableOffset != lst.LastStableOffset || !slices.Equal(st.OngoingTxns, lst.OngoingTxns) || st.HighWatermark != lst.HighWatermark {
			t.Fatalf("follower %d: lso %d hw %d ongoing %+v; leader lso %d hw %d ongoing %+v", id,
				st.LastStableOffset, st.HighWatermark, st.OngoingTxns, lst.LastStableOffset, lst.HighWatermark, lst.OngoingTxns)
		}
		r, _ := s.mgr(id).get(tp0)
		idx, err := r.log.CollectAbortedTxns(0, 100)
		if err != nil || !slices.Equal(idx, wantIdx) {
			t.Fatalf("follower %d aborted index %+v %v, want %+v", id, idx, err, wantIdx)
		}
	}

	s.kill(1)
	nl := s.elect()
	m := s.mgr(nl)
	ps, err := m.DescribeProducers(tp0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 3 || ps[0].CoordinatorEpoch != 7 || ps[1].CurrentTxnStartOffset != 2 || ps[2].CurrentTxnStartOffset != -1 {
		t.Fatalf("new leader's producers %+v", ps)
	}
	if _, err := m.AppendWith(tp0, tb(2, 0, 1, 1, false, 13), AppendOptions{Acks: 1}); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("new leader took a non-transactional batch inside producer 2's transaction: %v", err)
	}
	if _, err := m.WriteTxnMarker(tp0, TxnMarker{ProducerID: 1, ProducerEpoch: 0, CoordinatorEpoch: 6}); !errors.Is(err, ErrTransactionCoordinatorFenced) {
		t.Fatalf("new leader took a stale coordinator's marker: %v", err)
	}
	mustMarker(t, m, TxnMarker{ProducerID: 2, ProducerEpoch: 0, CoordinatorEpoch: 7, Commit: true}) // 6
	s.catchUp()
	if st := s.status(nl); len(st.OngoingTxns) != 0 || st.LastStableOffset != st.HighWatermark || st.HighWatermark != 7 {
		t.Fatalf("new leader after the commit: %+v", st)
	}
}

// TestTruncationRewindsTransactions: a follower truncated below a
// transaction's start forgets it; truncated between its start and its
// marker, it has it ongoing again and its aborted-index entry is gone;
// replicating the marker again restores both.
func TestTruncationRewindsTransactions(t *testing.T) {
	s := newSim(t, 2, cluster.DefaultLogConfig())
	leader := s.mgr(1)
	mustAppendWith(t, leader, tb(-1, -1, -1, 2, false, 1), AppendOptions{Acks: -1})        // 0-1
	mustAppendWith(t, leader, tb(5, 0, 0, 1, true, 2), AppendOptions{Acks: -1})            // 2 txn of 5
	mustAppendWith(t, leader, tb(5, 0, 1, 1, true, 2), AppendOptions{Acks: -1})            // 3
	mustMarker(t, leader, TxnMarker{ProducerID: 5, ProducerEpoch: 0, CoordinatorEpoch: 1}) // 4 abort
	mustAppendWith(t, leader, tb(6, 0, 0, 1, true, 3), AppendOptions{Acks: -1})            // 5 txn of 6
	s.catchUp()
	s.catchUp()
	r, _ := s.mgr(2).get(tp0)
	follower := func() (ReplicaStatus, []logstore.AbortedTxn) {
		t.Helper()
		idx, err := r.log.CollectAbortedTxns(0, 100)
		if err != nil {
			t.Fatal(err)
		}
		return s.status(2), idx
	}
	truncate := func(end int64) {
		t.Helper()
		r.mu.Lock()
		err := r.truncateLocked(end)
		r.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
	}
	if st, idx := follower(); len(st.OngoingTxns) != 1 || st.OngoingTxns[0].FirstOffset != 5 || len(idx) != 1 {
		t.Fatalf("before truncation: ongoing %+v, index %+v", st.OngoingTxns, idx)
	}
	truncate(5) // producer 6's transaction goes
	if st, idx := follower(); len(st.OngoingTxns) != 0 || len(idx) != 1 || st.LastStableOffset != 5 {
		t.Fatalf("truncated to 5: ongoing %+v, index %+v, lso %d", st.OngoingTxns, idx, st.LastStableOffset)
	}
	for _, end := range []int64{4, 3} { // the marker alone goes, then a batch of the transaction too
		truncate(end)
		st, idx := follower()
		if len(st.OngoingTxns) != 1 || st.OngoingTxns[0] != (OngoingTxn{ProducerID: 5, ProducerEpoch: 0, FirstOffset: 2, LastTimestamp: 2}) || len(idx) != 0 {
			t.Fatalf("truncated to %d: ongoing %+v, index %+v", end, st.OngoingTxns, idx)
		}
		if st.LastStableOffset != 2 {
			t.Fatalf("truncated to %d: lso %d, want 2", end, st.LastStableOffset)
		}
	}
	truncate(2) // below the transaction's start
	if st, idx := follower(); len(st.OngoingTxns) != 0 || len(idx) != 0 || st.LastStableOffset != 2 {
		t.Fatalf("truncated to 2: ongoing %+v, index %+v, lso %d", st.OngoingTxns, idx, st.LastStableOffset)
	}
	s.catchUp() // fetches from the new end again
	s.catchUp()
	s.catchUp()
	if st, idx := follower(); len(st.OngoingTxns) != 1 || st.OngoingTxns[0].ProducerID != 6 || len(idx) != 1 || idx[0].FirstOffset != 2 {
		t.Fatalf("after fetching again: ongoing %+v, index %+v", st.OngoingTxns, idx)
	}
}

// TestTxnStateSurvivesRestart: after a close and open (from the version 2
// snapshot, and again from the log alone with the snapshots removed) the
// ongoing transaction, the producers' coordinator epochs and the aborted
// index are as before, replaying the markers adds no index entry twice,
// and the open transaction still holds the LSO.
func TestTxnStateSurvivesRestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs")
	m := txnManager(t, dir, false, []int32{1}, []int32{1})
	mustAppendWith(t, m, tb(1, 0, 0, 1, true, 1), AppendOptions{Acks: 1})             // 0
	mustMarker(t, m, TxnMarker{ProducerID: 1, ProducerEpoch: 0, CoordinatorEpoch: 2}) // 1 abort
	mustAppendWith(t, m, tb(2, 0, 0, 1, true, 2), AppendOptions{Acks: 1})             // 2 open
	mustAppendWith(t, m, tb(-1, -1, -1, 1, false, 3), AppendOptions{Acks: 1})         // 3
	before := statusOf(t, m)
	beforeProducers, err := m.DescribeProducers(tp0)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	pdir := filepath.Join(dir, "t-0")
	for _, fromSnapshot := range []bool{true, false} {
		if !fromSnapshot {
			offs := snapshotOffsets(pdir)
			if len(offs) == 0 {
				t.Fatal("no producer snapshot written at close")
			}
			for _, off := range offs {
				if err := os.Remove(snapshotPath(pdir, off)); err != nil {
					t.Fatal(err)
				}
			}
		}
		m2 := txnManager(t, dir, false, []int32{1}, []int32{1})
		st := statusOf(t, m2)
		if st.LastStableOffset != 2 || !slices.Equal(st.OngoingTxns, before.OngoingTxns) {
			t.Fatalf("snapshot %v: lso %d ongoing %+v, before %d %+v", fromSnapshot, st.LastStableOffset, st.OngoingTxns,
				before.LastStableOffset, before.OngoingTxns)
		}
		ps, err := m2.DescribeProducers(tp0)
		if err != nil || !slices.Equal(ps, beforeProducers) {
			t.Fatalf("snapshot %v: producers %+v %v, before %+v", fromSnapshot, ps, err, beforeProducers)
		}
		if got := readAt(t, m2, 0, 1); !slices.Equal(got.AbortedTransactions, []AbortedTransaction{{ProducerID: 1, FirstOffset: 0}}) {
			t.Fatalf("snapshot %v: aborted %+v", fromSnapshot, got.AbortedTransactions)
		}
		r, _ := m2.get(tp0)
		if idx, err := r.log.CollectAbortedTxns(0, 100); err != nil || len(idx) != 1 {
			t.Fatalf("snapshot %v: index %+v %v after replay", fromSnapshot, idx, err)
		}
		if err := m2.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStorageErrorOnMarker: an fsync failing under a marker's append
// (flush.messages=1) answers ErrStorage; the open transaction is not ended
// (the LSO stays), every record acknowledged before is still read back,
// and later appends and markers fail with the storage error too.
func TestStorageErrorOnMarker(t *testing.T) {
	m := txnManager(t, "", false, []int32{1}, []int32{1})
	r, err := m.get(tp0)
	if err != nil {
		t.Fatal(err)
	}
	fs := logstore.NewMemFS()
	r.mu.Lock()
	lc := logstoreConfig(r.cfg, zerolog.New(zerolog.NewTestWriter(t)))
	lc.FS, lc.FlushMessages = fs, 1
	l, err := logstore.Open("/logs/t-0", lc, 0)
	if err == nil {
		err = l.LeaderEpochs().Assign(0, 0)
	}
	if err != nil {
		r.mu.Unlock()
		t.Fatal(err)
	}
	old := r.log
	r.log = l
	r.mu.Unlock()
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	acked := []AppendResult{
		mustAppendWith(t, m, tb(-1, -1, -1, 1, false, 1), AppendOptions{Acks: -1}),
		mustAppendWith(t, m, tb(4, 0, 0, 2, true, 1), AppendOptions{Acks: -1}),
	}
	for _, a := range acked {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := m.WaitCommitted(ctx, tp0, a.LastOffset, a.LeaderEpoch)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	fs.SetInjector(func(op logstore.MemOp, _ string) error {
		if op == logstore.MemOpSync {
			return logstore.ErrInjected
		}
		return nil
	})
	if _, err := m.WriteTxnMarker(tp0, TxnMarker{ProducerID: 4, ProducerEpoch: 0, CoordinatorEpoch: 0}); !errors.Is(err, ErrStorage) {
		t.Fatalf("marker with a failing fsync: %v, want ErrStorage", err)
	}
	st := r.status() // its log dir went offline: the replica's last state
	if len(st.OngoingTxns) != 1 || st.LastStableOffset != 1 {
		t.Fatalf("after the failed marker: ongoing %+v lso %d", st.OngoingTxns, st.LastStableOffset)
	}
	m.waitLogDirFailures()
	// Read back from the disk, as a restart would.
	fs.SetInjector(nil)
	reopened, err := logstore.Open("/logs/t-0", lc, 0)
	if err != nil {
		t.Fatal(err)
	}
	data, err := reopened.Read(0, 1<<20, reopened.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	_ = reopened.Close()
	got := batchBases(t, data)
	for _, a := range acked {
		if !slices.Contains(got, a.BaseOffset) {
			t.Fatalf("acknowledged batch at %d lost after the failed marker (read %v)", a.BaseOffset, got)
		}
	}
	if _, err := m.WriteTxnMarker(tp0, TxnMarker{ProducerID: 4, ProducerEpoch: 0, CoordinatorEpoch: 0}); !errors.Is(err, ErrStorage) {
		t.Fatalf("marker after the log failed: %v, want ErrStorage", err)
	}
	if _, err := m.AppendWith(tp0, tb(4, 0, 2, 1, true, 1), AppendOptions{Acks: 1}); !errors.Is(err, ErrStorage) {
		t.Fatalf("append after the log failed: %v, want ErrStorage", err)
	}
}

// TestTxnMarkerLeadershipAndISR: only the leader writes markers, with
// min.insync.replicas checked as for acks=all.
func TestTxnMarkerLeadershipAndISR(t *testing.T) {
	m := txnManager(t, "", false, []int32{1, 2}, []int32{1})
	r, _ := m.get(tp0)
	r.mu.Lock()
	r.cfg.MinInsyncReplicas = 2
	r.mu.Unlock()
	if _, err := m.WriteTxnMarker(tp0, TxnMarker{ProducerID: 1}); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("marker with isr below min.insync.replicas: %v", err)
	}
	cfg := cluster.DefaultLogConfig()
	if err := m.ApplyPartitionStates([]PartitionState{leaderState(2, 1, []int32{1, 2}, []int32{1, 2}, cfg)}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.WriteTxnMarker(tp0, TxnMarker{ProducerID: 1}); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("marker on a follower: %v", err)
	}
	if _, _, err := m.TxnVerificationGuard(tp0, 1); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("guard on a follower: %v", err)
	}
	if _, err := m.DescribeProducers(tp0); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("describe producers on a follower: %v", err)
	}
	if _, err := m.WriteTxnMarker(cluster.TopicPartition{Topic: "x"}, TxnMarker{ProducerID: 1}); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("marker of an unknown partition: %v", err)
	}
}

// txnKVBatch is kvBatch as a transactional batch of producer pid (epoch 0)
// at sequence seq.
func txnKVBatch(ts int64, pid int64, seq int32, recs ...kv) []byte {
	b := kvBatch(ts, recs...)
	binary.BigEndian.PutUint16(b[21:], 0x10)
	binary.BigEndian.PutUint64(b[43:], uint64(pid))
	binary.BigEndian.PutUint16(b[51:], 0)
	binary.BigEndian.PutUint32(b[53:], uint32(seq))
	return recrc(b)
}

// TestCleanerStopsAtLSO: the cleaner cleans a compacted log only below
// the LSO (Kafka's: the outcome of a transaction above it is unknown), so
// with a transaction open its checkpoint stays at or below the
// transaction's first offset and the duplicate keys above it stay; once
// the transaction commits and the LSO moves, they are cleaned.
func TestCleanerStopsAtLSO(t *testing.T) {
	clock := &fakeClock{t: time.Unix(100000, 0)}
	cfg := compactConfig()
	m := newCleanerManager(t, filepath.Join(t.TempDir(), "logs"), clock, DefaultCleanerConfig(), cfg)
	produceKeyed(t, m, 0, 100, 5, 0, 1)
	txnStart := mustAppendWith(t, m, txnKVBatch(2000, 77, 0, kv{key: []byte("t"), value: []byte("x")}), AppendOptions{Acks: 1}).BaseOffset
	want := produceKeyed(t, m, 100, 200, 5, 0, 1)
	want["t"] = "x"
	if st := statusOf(t, m); st.LastStableOffset != txnStart || st.HighWatermark <= txnStart+100 {
		t.Fatalf("lso %d hw %d, want lso at the transaction's start %d", st.LastStableOffset, st.HighWatermark, txnStart)
	}
	if cleanAll(t, m) == 0 {
		t.Fatal("nothing cleaned below the LSO")
	}
	if end := m.cleaner.checkpoint(tp0); end > txnStart {
		t.Fatalf("cleaner checkpoint %d past the LSO %d", end, txnStart)
	}
	above := 0
	for _, r := range logRecords(t, m) {
		if r.offset > txnStart {
			above++
		}
	}
	if above != 200 {
		t.Fatalf("%d records above the open transaction, want all 200 kept", above)
	}
	marker := mustMarker(t, m, TxnMarker{ProducerID: 77, ProducerEpoch: 0, CoordinatorEpoch: 0, Commit: true}).BaseOffset
	if cleanAll(t, m) == 0 {
		t.Fatal("nothing cleaned once the transaction committed")
	}
	if end := m.cleaner.checkpoint(tp0); end <= txnStart {
		t.Fatalf("cleaner checkpoint %d still at or below the committed transaction's start %d", end, txnStart)
	}
	data := slices.DeleteFunc(logRecords(t, m), func(r logRecord) bool { return r.offset == marker })
	checkCompacted(t, "after the commit", data, want, m.cleaner.checkpoint(tp0))
}

// TestUncleanOpenReplaysFromRecoveryPoint: after an unclean shutdown (the
// checkpointed recovery point below the LEO) the state is rebuilt from a
// snapshot at or below the recovery point, not from a newer one, so an
// ABORT's .txnindex entry that had not reached the disk is added again by
// the replay and read_committed consumers still learn of the abort.
func TestUncleanOpenReplaysFromRecoveryPoint(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs")
	m := txnManager(t, dir, false, []int32{1}, []int32{1})
	mustAppendWith(t, m, tb(1, 0, 0, 1, true, 1), AppendOptions{Acks: 1})             // 0
	mustMarker(t, m, TxnMarker{ProducerID: 1, ProducerEpoch: 0, CoordinatorEpoch: 0}) // 1 abort
	mustAppendWith(t, m, tb(-1, -1, -1, 1, false, 1), AppendOptions{Acks: 1})         // 2
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	pdir := filepath.Join(dir, "t-0")
	if offs := snapshotOffsets(pdir); !slices.Contains(offs, 3) {
		t.Fatalf("snapshots %v, want one at the LEO 3", offs)
	}
	// The crash: the index entry never reached the disk, and the last
	// recovery-point checkpoint was written before the marker was flushed.
	if err := os.Remove(filepath.Join(pdir, "00000000000000000000.txnindex")); err != nil {
		t.Fatal(err)
	}
	if err := logstore.WriteOffsetCheckpoint(filepath.Join(dir, logstore.RecoveryPointCheckpointFile),
		[]logstore.CheckpointEntry{{Topic: tp0.Topic, Partition: tp0.Partition, Offset: 0}}); err != nil {
		t.Fatal(err)
	}
	m2 := txnManager(t, dir, false, []int32{1}, []int32{1})
	if got := readAt(t, m2, 0, 1).AbortedTransactions; !slices.Equal(got, []AbortedTransaction{{ProducerID: 1, FirstOffset: 0}}) {
		t.Fatalf("aborted transactions after an unclean open: %+v, want producer 1's from 0", got)
	}
}

// TestSnapshotBelowRecoveryPointKept: beside the newest snapshots, the
// newest one at or below the log's recovery point is kept, so that an
// unclean open need not read the whole log.
func TestSnapshotBelowRecoveryPointKept(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs")
	m := txnManager(t, dir, false, []int32{1}, []int32{1})
	r, _ := m.get(tp0)
	for i := 0; i < 4; i++ {
		m.writeCheckpoints(true)
		mustAppendWith(t, m, tb(-1, -1, -1, 1, false, 1), AppendOptions{Acks: 1})
	}
	m.writeCheckpoints(true)
	if rp := r.log.RecoveryPoint(); rp != 0 {
		t.Fatalf("recovery point %d, want 0 (nothing flushed)", rp)
	}
	if offs := snapshotOffsets(r.dir); !slices.Equal(offs, []int64{0, 3, 4}) {
		t.Fatalf("snapshots %v, want [0 3 4]: the newest two and the one at the recovery point", offs)
	}
}
