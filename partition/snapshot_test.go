package partition

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
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
	producers, _, err := decodeSnapshot(data)
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
	forged := encodeSnapshot(map[int64]*producerState{42: newProducerState(9)}, nil)
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
	damaged := snapshotOffsets(pdir)
	m3 := reopen()
	// A snapshot that fails to decode is removed (one torn by a crash
	// would otherwise stand in for the next snapshot at its offset).
	for _, off := range damaged {
		if data, err := os.ReadFile(snapshotPath(pdir, off)); err == nil && string(data) == "garbage" {
			t.Fatalf("the damaged snapshot at %d is still there after the open", off)
		}
	}
	if dup := mustAppend(t, m3, append([]byte(nil), batches[6]...), -1); dup.BaseOffset != 12 {
		t.Fatalf("with a corrupt snapshot, retried batch got offset %d, want 12", dup.BaseOffset)
	}
}

// TestSnapshotCodecRoundTrip: a version 2 snapshot keeps every field of
// every producer (the transaction's first offset, the coordinator epoch,
// the last timestamp and marker offset included) and the completed
// transactions the HW had not passed; a flipped bit fails the CRC.
func TestSnapshotCodecRoundTrip(t *testing.T) {
	in := map[int64]*producerState{
		1: {epoch: 0, batches: []producerBatch{{0, 4, 10, 14}}, coordinatorEpoch: -1, lastTimestamp: 77, txnFirstOffset: -1, lastMarkerOffset: -1},
		9: {epoch: 7, batches: []producerBatch{{5, 5, 20, 20}, {6, 9, 21, 24}}, coordinatorEpoch: 3, lastTimestamp: 1234, txnFirstOffset: 21, lastMarkerOffset: 15},
		5: {epoch: 2, coordinatorEpoch: 4, lastTimestamp: 99, txnFirstOffset: -1, lastMarkerOffset: 30},
	}
	unrep := []txnMeta{{producerID: 5, firstOffset: 25, lastOffset: 30}}
	out, outUnrep, err := decodeSnapshot(encodeSnapshot(in, unrep))
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) {
		t.Fatalf("%d producers, want %d", len(out), len(in))
	}
	for id, s := range in {
		o := out[id]
		if o == nil || o.epoch != s.epoch || len(o.batches) != len(s.batches) ||
			o.coordinatorEpoch != s.coordinatorEpoch || o.lastTimestamp != s.lastTimestamp ||
			o.txnFirstOffset != s.txnFirstOffset || o.lastMarkerOffset != s.lastMarkerOffset {
			t.Fatalf("producer %d: got %+v want %+v", id, o, s)
		}
		for j := range s.batches {
			if o.batches[j] != s.batches[j] {
				t.Fatalf("producer %d batch %d: got %+v want %+v", id, j, o.batches[j], s.batches[j])
			}
		}
	}
	if len(outUnrep) != 1 || outUnrep[0] != unrep[0] {
		t.Fatalf("completed transactions %+v, want %+v", outUnrep, unrep)
	}
	b := encodeSnapshot(in, unrep)
	b[len(b)-1] ^= 1
	if _, _, err := decodeSnapshot(b); err == nil {
		t.Fatal("a flipped bit must fail the CRC")
	}
}

// encodeSnapshotV1 is the version 1 format, before transactions, as the
// broker wrote it until version 2.
func encodeSnapshotV1(producers map[int64]*producerState) []byte {
	b := binary.BigEndian.AppendUint16(nil, 1)
	b = append(b, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(len(producers)))
	for id, s := range producers {
		b = binary.BigEndian.AppendUint64(b, uint64(id))
		b = binary.BigEndian.AppendUint16(b, uint16(s.epoch))
		b = append(b, byte(len(s.batches)))
		for _, pb := range s.batches {
			b = binary.BigEndian.AppendUint32(b, uint32(pb.firstSeq))
			b = binary.BigEndian.AppendUint32(b, uint32(pb.lastSeq))
			b = binary.BigEndian.AppendUint64(b, uint64(pb.firstOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(pb.lastOffset))
		}
	}
	binary.BigEndian.PutUint32(b[2:], crc32.Checksum(b[6:], castagnoliTable))
	return b
}

// TestSnapshotVersion1StillRead: a version 1 snapshot (written before
// transactions) decodes, its producers with no transaction, coordinator
// epoch or timestamp; a replica opened over one uses it (its retry is a
// duplicate without the batches before the snapshot being read again).
func TestSnapshotVersion1StillRead(t *testing.T) {
	in := map[int64]*producerState{
		3: {epoch: 2, batches: []producerBatch{{0, 1, 0, 1}, {2, 3, 2, 3}}},
	}
	out, unrep, err := decodeSnapshot(encodeSnapshotV1(in))
	if err != nil {
		t.Fatal(err)
	}
	o := out[3]
	if o == nil || o.epoch != 2 || len(o.batches) != 2 || o.batches[1] != in[3].batches[1] ||
		o.txnFirstOffset != -1 || o.coordinatorEpoch != -1 || o.lastTimestamp != -1 || o.lastMarkerOffset != -1 || unrep != nil {
		t.Fatalf("version 1 decoded as %+v, %+v", o, unrep)
	}

	clock := &fakeClock{t: time.Unix(1000, 0)}
	dir := t.TempDir()
	st := leaderState(1, 0, []int32{1}, []int32{1}, cluster.DefaultLogConfig())
	m := newTestManager(t, 1, dir, clock)
	if err := m.ApplyPartitionStates([]PartitionState{st}); err != nil {
		t.Fatal(err)
	}
	var batches [][]byte
	for i := int32(0); i < 3; i++ {
		b := buildBatch(batchSpec{records: 2, producerID: 42, producerEpoch: 3, baseSequence: 2 * i})
		batches = append(batches, b)
		mustAppend(t, m, append([]byte(nil), b...), -1)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	pdir := dir + "/t-0"
	// A version 1 snapshot at 6 naming only the last batch: had the log
	// been read instead, the first batch would be a duplicate too.
	v1 := encodeSnapshotV1(map[int64]*producerState{42: {epoch: 3, batches: []producerBatch{{4, 5, 4, 5}}}})
	for _, off := range snapshotOffsets(pdir) {
		if err := os.Remove(snapshotPath(pdir, off)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(snapshotPath(pdir, 6), v1, 0o644); err != nil {
		t.Fatal(err)
	}
	m2 := newTestManager(t, 1, dir, clock)
	if err := m2.ApplyPartitionStates([]PartitionState{st}); err != nil {
		t.Fatal(err)
	}
	if dup := mustAppend(t, m2, append([]byte(nil), batches[2]...), -1); dup.BaseOffset != 4 {
		t.Fatalf("retry of the snapshot's batch got offset %d, want 4", dup.BaseOffset)
	}
	if _, err := m2.Append(tp0, append([]byte(nil), batches[0]...), -1); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("a batch before the version 1 snapshot: %v, want ErrOutOfOrderSequence (state from the snapshot)", err)
	}
}
