package partition

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/logstore"
)

// segmentedTxnManager is a Manager of one broker leading tp0 with
// segments of segBytes, on dir.
func segmentedTxnManager(t *testing.T, dir string, segBytes int64) *Manager {
	m, err := NewManager(Config{
		BrokerID: 1, LogDirs: []string{dir},
		HighWatermarkCheckpointInterval: time.Second, RecoveryPointCheckpointInterval: time.Second,
		RetentionCheckInterval: time.Minute, Now: (&fakeClock{t: time.Unix(1000, 0)}).Now,
		Log: zerolog.New(zerolog.NewTestWriter(t)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	cfg := cluster.DefaultLogConfig()
	cfg.MinInsyncReplicas = 1
	cfg.SegmentBytes = segBytes
	if err := m.ApplyPartitionStates([]PartitionState{leaderState(1, 0, []int32{1}, []int32{1}, cfg)}); err != nil {
		t.Fatal(err)
	}
	return m
}

// The older segment's .txnindex is lost in the crash while the newer
// segment's survived (from a review: the replay's entry for the older
// marker was dropped as "at or below the last entry of the log", so
// read_committed never learnt of that abort). The replay adds it again.
func TestUncleanOpenLostOlderTxnIndex(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs")
	m := segmentedTxnManager(t, dir, 300)
	mustAppendWith(t, m, tb(1, 0, 0, 1, true, 1), AppendOptions{Acks: 1})             // 0 txn of 1
	mustMarker(t, m, TxnMarker{ProducerID: 1, ProducerEpoch: 0, CoordinatorEpoch: 0}) // 1 abort
	for i := 0; i < 6; i++ {
		mustAppendWith(t, m, tb(-1, -1, -1, 1, false, 1), AppendOptions{Acks: 1})
	}
	b := mustAppendWith(t, m, tb(2, 0, 0, 1, true, 1), AppendOptions{Acks: 1}).BaseOffset // txn of 2
	mk := mustMarker(t, m, TxnMarker{ProducerID: 2, ProducerEpoch: 0, CoordinatorEpoch: 0}).BaseOffset
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	pdir := filepath.Join(dir, "t-0")
	t.Logf("second txn %d..%d", b, mk)
	if err := os.Remove(filepath.Join(pdir, "00000000000000000000.txnindex")); err != nil {
		t.Fatal(err)
	}
	if err := logstore.WriteOffsetCheckpoint(filepath.Join(dir, logstore.RecoveryPointCheckpointFile),
		[]logstore.CheckpointEntry{{Topic: tp0.Topic, Partition: tp0.Partition, Offset: 0}}); err != nil {
		t.Fatal(err)
	}
	m2 := segmentedTxnManager(t, dir, 300)
	got := readAt(t, m2, 0, 1)
	t.Logf("batches %v aborted %+v", batchBases(t, got.Records), got.AbortedTransactions)
	r, _ := m2.get(tp0)
	idx, _ := r.log.CollectAbortedTxns(0, 1000)
	t.Logf("index %+v", idx)
	found := false
	for _, a := range idx {
		if a.ProducerID == 1 {
			found = true
		}
	}
	if !found {
		t.Errorf("producer 1's aborted transaction is gone from the index after the replay")
	}
	if !slices.Equal(got.AbortedTransactions, []AbortedTransaction{{ProducerID: 1, FirstOffset: 0}}) {
		t.Errorf("read_committed from 0: aborted %+v, want producer 1's from 0", got.AbortedTransactions)
	}
}
