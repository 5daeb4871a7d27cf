package logstore

import (
	"encoding/binary"
	"slices"
	"testing"
	"time"
)

// TestRollFlushAdvancesRecoveryPoint: appends that roll segments, with no
// Flush and no flush policy, leave the rolled segments fsynced in the
// background, and RecoveryPoint reaches the base of the active segment
// (Kafka's roll schedules flushUptoOffsetExclusive(newSegment.baseOffset)).
func TestRollFlushAdvancesRecoveryPoint(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	batchSize := int64(len(simpleBatch(2, 0)))
	cfg.SegmentBytes = 3 * batchSize
	l := openLog(t, t.TempDir(), cfg, 0)
	for i := range 10 { // segments of 6 offsets: 0, 6, 12, 18 (active)
		mustAppend(t, l, simpleBatch(2, int64(1000+i)))
	}
	const activeBase = 18
	deadline := time.Now().Add(5 * time.Second)
	for l.RecoveryPoint() < activeBase && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if rp := l.RecoveryPoint(); rp != activeBase {
		t.Fatalf("RecoveryPoint %d after rolling to segment %d with no Flush, want %d", rp, activeBase, activeBase)
	}
}

// TestFlushingAppendAllocations: with an fsync after every append, which
// also writes the new index entries, an append still allocates only
// AppendInfo.Batches (an index buffer made per flush would escape through
// the File interface).
func TestFlushingAppendAllocations(t *testing.T) { // not parallel: AllocsPerRun
	cfg := testConfig(t)
	cfg.IndexIntervalBytes = 1 // an index entry for every batch
	cfg.FlushMessages = 1
	l := openLog(t, t.TempDir(), cfg, 0)
	batch := simpleBatch(2, 1)
	mustAppend(t, l, slices.Clone(batch))
	allocs := testing.AllocsPerRun(50, func() {
		binary.BigEndian.PutUint64(batch, 0)
		if _, err := l.AppendAsLeader(batch, 1, -1); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 {
		t.Fatalf("an fsyncing append allocates %v times, want 1", allocs)
	}
}

// TestIndexesWrittenInChunks: indexes longer than the scratch buffer they
// are written through come back whole when a trusted segment loads them.
func TestIndexesWrittenInChunks(t *testing.T) {
	t.Parallel()
	const n = 1200 // > indexScratchBytes/8 and /12 entries
	cfg := testConfig(t)
	cfg.IndexIntervalBytes = 1
	cfg.SegmentBytes = n * int64(len(simpleBatch(1, 0))) // batch n+1 rolls
	dir := t.TempDir()
	l := openLog(t, dir, cfg, 0)
	for i := range n + 1 {
		mustAppend(t, l, simpleBatch(1, int64(1000+i)))
	}
	want := slices.Clone(l.segments[0].index)
	wantTime := slices.Clone(l.segments[0].timeIndex)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if len(want) < n-1 || len(wantTime) < n-1 {
		t.Fatalf("only %d index and %d time index entries", len(want), len(wantTime))
	}
	// Segment 0 is below the recovery point: its indexes are loaded.
	l2 := openLog(t, dir, cfg, n+1)
	s := l2.segments[0]
	if len(l2.segments) != 2 || !slices.Equal(s.index, want) || !slices.Equal(s.timeIndex, wantTime) {
		t.Fatalf("index of %d entries (time index %d) read back as %d (%d)", len(want), len(wantTime), len(s.index), len(s.timeIndex))
	}
}
