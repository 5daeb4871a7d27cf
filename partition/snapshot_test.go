package partition

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/kafkazk/broker/cluster"
)

// TestProducerSnapshot: a clean close writes a producer state snapshot at
// the LEO; reopening reads the state from it (a forged snapshot shows it is
// used rather than the log), a retried batch is still a duplicate, and a
// corrupt snapshot falls back to reading the log.
func TestProducerSnapshot(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	dir := t.TempDir()
	st := leaderState(1, 0, []int32{1}, []int32{1}, cluster.DefaultLogConfig())
	m := newTestManager(t, 1, dir, clock)
	if err := m.ApplyPartitionStates([]PartitionState{st}); err != nil {
		t.Fatal(err)
	}
	var batches [][]byte
	for i := int32(0); i < 7; i++ {
		b := buildBatch(batchSpec{records: 2, producerID: 42, producerEpoch: 3, baseSequence: 2 * i})
		batches = append(batches, b)
		mustAppend(t, m, append([]byte(nil), b...), -1)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	pdir := dir + "/t-0"
	offs := snapshotOffsets(pdir)
	if len(offs) != 1 || offs[0] != 14 {
		t.Fatalf("snapshots after close: %v, want [14]", offs)
	}
	data, err := os.ReadFile(snapshotPath(pdir, 14))
	if err != nil {
		t.Fatal(err)
	}
	producers, err := decodeSnapshot(data)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if s := producers[42]; s == nil || s.epoch != 3 || len(s.batches) != producerBatchesKept || s.batches[4].lastOffset != 13 {
		t.Fatalf("snapshot state %+v", producers[42])
	}

	reopen := func() *Manager {
		m := newTestManager(t, 1, dir, clock)
		if err := m.ApplyPartitionStates([]PartitionState{st}); err != nil {
			t.Fatal(err)
		}
		return m
	}
	m2 := reopen()
	if dup := mustAppend(t, m2, append([]byte(nil), batches[5]...), -1); dup.BaseOffset != 10 {
		t.Fatalf("after reopen from the snapshot, retried batch got offset %d, want 10", dup.BaseOffset)
	}
	if err := m2.Close(); err != nil {
		t.Fatal(err)
	}

	// The state comes from the snapshot, not from re-reading the log: a
	// snapshot saying producer 42 is at epoch 9 makes its epoch-3 retry stale.
	forged := encodeSnapshot(map[int64]*producerState{42: {epoch: 9}})
	for _, off := range snapshotOffsets(pdir) {
		if err := os.WriteFile(snapshotPath(pdir, off), forged, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mf := reopen()
	if _, err := mf.Append(tp0, append([]byte(nil), batches[6]...), -1); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("with a snapshot at epoch 9, an epoch-3 batch got %v, want ErrInvalidProducerEpoch", err)
	}
	if err := mf.Close(); err != nil {
		t.Fatal(err)
	}

	// Damage the snapshot: the state is rebuilt from the log instead.
	for _, off := range snapshotOffsets(pdir) {
		if err := os.WriteFile(snapshotPath(pdir, off), []byte("garbage"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m3 := reopen()
	if dup := mustAppend(t, m3, append([]byte(nil), batches[6]...), -1); dup.BaseOffset != 12 {
		t.Fatalf("with a corrupt snapshot, retried batch got offset %d, want 12", dup.BaseOffset)
	}
}

func TestSnapshotCodecRoundTrip(t *testing.T) {
	in := map[int64]*producerState{
		1: {epoch: 0, batches: []producerBatch{{0, 4, 10, 14}}},
		9: {epoch: 7, batches: []producerBatch{{5, 5, 20, 20}, {6, 9, 21, 24}}},
	}
	out, err := decodeSnapshot(encodeSnapshot(in))
	if err != nil {
		t.Fatal(err)
	}
	for id, s := range in {
		o := out[id]
		if o == nil || o.epoch != s.epoch || len(o.batches) != len(s.batches) || o.batches[len(o.batches)-1] != s.batches[len(s.batches)-1] {
			t.Fatalf("producer %d: got %+v want %+v", id, o, s)
		}
	}
	b := encodeSnapshot(in)
	b[len(b)-1] ^= 1
	if _, err := decodeSnapshot(b); err == nil {
		t.Fatal("a flipped bit must fail the CRC")
	}
}
