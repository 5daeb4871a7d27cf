package logstore

import (
	"fmt"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
)

// TestRolledIndexesWrittenAfterFlush: when the recovery point has reached
// the roll offset before the roll (flush.messages=1, or a Flush after
// every append), the rolled segment's index entries, which no flush of
// the active segment writes, still reach its index files: by the
// background flush of the roll, and by Close at the latest. A reopen,
// after a clean shutdown or not, then finds every rolled segment's
// entries and largest timestamp, as a reopen that rebuilds every index
// from the .log does, and OffsetForTimestamp finds the first offset.
func TestRolledIndexesWrittenAfterFlush(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"flush.messages=1", "Flush"} {
		for _, files := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/filecache=%v", mode, files), func(t *testing.T) {
				t.Parallel()
				rolledIndexesWrittenAfterFlush(t, mode == "Flush", files)
			})
		}
	}
}

func rolledIndexesWrittenAfterFlush(t *testing.T, explicit, files bool) {
	mem := NewMemFS()
	mkdirSynced(t, mem, "/data")
	cfg := testConfig(t)
	cfg.FS = mem
	if files {
		cfg.Files = NewFileCache(1)
	}
	cfg.SegmentBytes = 4096
	cfg.IndexIntervalBytes = 1
	if !explicit {
		cfg.FlushMessages = 1
	}
	const dir = "/data/t-0"
	l, err := Open(dir, cfg, 0)
	mustNoError(t)(err)
	for i := range 60 { // 2 offsets a batch, ~30 batches a segment
		mustAppend(t, l, simpleBatch(2, int64(1000+i)))
		if explicit {
			mustNoError(t)(l.Flush())
		}
	}
	if len(l.segments) < 2 {
		t.Fatalf("%d segments, want a roll", len(l.segments))
	}
	// What the background flush of the rolls wrote, before Close.
	l.bg.Wait()
	l.fmu.Lock()
	for _, s := range l.segments[:len(l.segments)-1] {
		if s.pending() {
			t.Errorf("segment %d: index files not written and fsynced after its roll's flush (index %+v, time index %+v)",
				s.baseOffset, s.indexFile, s.timeIndexFile)
		}
	}
	l.fmu.Unlock()
	mustNoError(t)(l.Close())
	rp := l.RecoveryPoint()
	mem.Crash() // nothing Close returned for may be lost

	open := func(clean bool, rp int64) logFacts {
		c := cfg
		c.CleanShutdown = clean
		l2, err := Open(dir, c, rp)
		mustNoError(t)(err)
		defer l2.Close()
		// Batch i holds offsets 2i, 2i+1 and has the largest timestamp
		// 1001+i: segment 0 holds the answer.
		off, ts, found, err := l2.OffsetForTimestamp(1002)
		mustNoError(t)(err)
		if !found || off != 2 || ts != 1002 {
			t.Errorf("CleanShutdown=%v, recovery point %d: OffsetForTimestamp(1002) = %d, %d, %v, want 2, 1002, true", clean, rp, off, ts, found)
		}
		return factsOf(t, l2)
	}
	// The opens that trust segment 0's index files, then one that
	// rebuilds every index from the .log (and rewrites the files).
	clean, unclean := open(true, rp), open(false, rp)
	rebuilt := open(false, 0)
	for i, s := range rebuilt.Segments[:len(rebuilt.Segments)-1] {
		if len(s.Index) == 0 || s.MaxTs < 0 {
			t.Fatalf("rebuilt segment %d: %d index entries, largest timestamp %d", i, len(s.Index), s.MaxTs)
		}
	}
	for _, c := range []struct {
		name string
		got  logFacts
	}{{"CleanShutdown", clean}, {"recovery from the recovery point", unclean}} {
		if !reflect.DeepEqual(c.got, rebuilt) {
			t.Errorf("%s: reopen differs from a rebuild of every index:\ngot     %+v\nrebuilt %+v", c.name, c.got, rebuilt)
		}
	}
}

// TestTxnIndexOfRolledSegmentDurable: an aborted transaction's entry
// added to the active segment after a flush took the recovery point to
// the log end, just before the segment rolls (so no flush of the active
// segment follows), is fsynced before Close returns: a crash after Close
// keeps it, and the segment's time index, for a reopen after a clean
// shutdown or not.
func TestTxnIndexOfRolledSegmentDurable(t *testing.T) {
	t.Parallel()
	mem := NewMemFS()
	mkdirSynced(t, mem, "/data")
	cfg := testConfig(t)
	cfg.FS = mem
	cfg.SegmentBytes = 300
	cfg.FlushMessages = 1
	const dir = "/data/t-0"
	l, err := Open(dir, cfg, 0)
	mustNoError(t)(err)
	for i := range 3 { // 3 batches of 95 bytes fill the 300-byte segment
		mustAppend(t, l, simpleBatch(2, int64(1000+i)))
	}
	want := AbortedTxn{ProducerID: 7, FirstOffset: 0, LastOffset: 5, LastStableOffset: 0}
	mustNoError(t)(l.AppendAbortedTxn(want))
	mustAppend(t, l, simpleBatch(2, 1003)) // rolls: no flush of segment 0 follows
	if len(l.segments) != 2 {
		t.Fatalf("%d segments, want the last append to roll", len(l.segments))
	}
	mustNoError(t)(l.Close())
	rp := l.RecoveryPoint()
	mem.Crash()
	for _, clean := range []bool{false, true} {
		c := cfg
		c.CleanShutdown = clean
		l2, err := Open(dir, c, rp)
		mustNoError(t)(err)
		if got := l2.segments[0].txns; !reflect.DeepEqual(got, []AbortedTxn{want}) {
			t.Errorf("CleanShutdown=%v: segment 0's aborted transactions after a crash following Close: %+v, want %+v", clean, got, want)
		}
		if s := l2.segments[0]; len(s.timeIndex) == 0 || s.maxTimestamp != 1003 {
			t.Errorf("CleanShutdown=%v: segment 0 has %d time index entries and largest timestamp %d, want 1003", clean, len(s.timeIndex), s.maxTimestamp)
		}
		mustNoError(t)(l2.Close())
	}
}

// TestTxnEntryBelowRecoveryPointDurable: an aborted transaction's entry
// whose marker is already below the recovery point (the flush policy
// fsynced the marker) is fsynced at once, in the active segment too: the
// caller replays markers only from the recovery point it checkpointed, so
// a crash must not lose the entry even without a Close or a later flush.
func TestTxnEntryBelowRecoveryPointDurable(t *testing.T) {
	t.Parallel()
	mem := NewMemFS()
	mkdirSynced(t, mem, "/data")
	cfg := testConfig(t)
	cfg.FS = mem
	cfg.FlushMessages = 1
	const dir = "/data/t-0"
	l, err := Open(dir, cfg, 0)
	mustNoError(t)(err)
	mustAppend(t, l, simpleBatch(2, 1000))
	mustAppend(t, l, simpleBatch(2, 1001)) // the marker, say
	rp := l.RecoveryPoint()
	if rp != 4 {
		t.Fatalf("recovery point %d with flush.messages=1, want 4", rp)
	}
	want := AbortedTxn{ProducerID: 7, FirstOffset: 0, LastOffset: 3, LastStableOffset: 0}
	mustNoError(t)(l.AppendAbortedTxn(want))
	mem.Crash() // no Close
	l2, err := Open(dir, cfg, rp)
	mustNoError(t)(err)
	defer l2.Close()
	if got := l2.segments[0].txns; !reflect.DeepEqual(got, []AbortedTxn{want}) {
		t.Errorf("aborted transactions after a crash: %+v, want %+v (the marker at 3 is below the recovery point %d, so no replay brings it back)", got, want, rp)
	}
}

// TestRolledIndexesDurableWhenRolledBelowRecoveryPoint: a segment that
// rolls when the recovery point has already reached the roll offset
// (flushed to the log end, then one more append) lies wholly below the
// recovery point at once, so its index files must be durable before the
// append returns, not when the background flush gets to them: a crash in
// between, with that recovery point checkpointed, would have Open trust
// the empty index files (no entries, largest timestamp -1).
func TestRolledIndexesDurableWhenRolledBelowRecoveryPoint(t *testing.T) {
	t.Parallel()
	mem := NewMemFS()
	mkdirSynced(t, mem, "/data")
	cfg := testConfig(t)
	cfg.FS = mem
	cfg.SegmentBytes = 300 // 3 batches
	cfg.IndexIntervalBytes = 1
	const dir = "/data/t-0"
	l, err := Open(dir, cfg, 0)
	mustNoError(t)(err)
	for i := range 3 {
		mustAppend(t, l, simpleBatch(2, int64(1000+i)))
	}
	mustNoError(t)(l.Flush())
	rp := l.RecoveryPoint()
	// Hold any background flush of the roll at its first step (the
	// directory fsync), to crash before it.
	var armed atomic.Bool
	release := make(chan struct{})
	armed.Store(true)
	mem.SetSyncWaiter(func(op MemOp, name string) {
		if op == MemOpSyncDir && name == dir && armed.Load() {
			<-release
		}
	})
	mustAppend(t, l, simpleBatch(2, 1003)) // rolls at the recovery point
	l.mu.RLock()
	s0 := l.segments[0]
	wantIndex, wantTime := slices.Clone(s0.index), slices.Clone(s0.timeIndex)
	l.mu.RUnlock()
	if len(wantTime) == 0 || rp != 6 {
		t.Fatalf("segment 0: %d time index entries, recovery point %d; want some, 6", len(wantTime), rp)
	}
	// Power loss: the directories keep their entries, the files what
	// was fsynced.
	mem.CrashWith(func(_ string, synced, _ []byte) []byte { return synced })
	armed.Store(false)
	l2, err := Open(dir, cfg, rp)
	mustNoError(t)(err)
	s := l2.segments[0]
	if !slices.Equal(s.index, wantIndex) || !slices.Equal(s.timeIndex, wantTime) || s.maxTimestamp != 1003 {
		t.Errorf("segment 0 after a crash right after its roll: index %v, time index %v, largest timestamp %d; want %v, %v, 1003",
			s.index, s.timeIndex, s.maxTimestamp, wantIndex, wantTime)
	}
	mustNoError(t)(l2.Close())
	close(release)
	l.bg.Wait()
}
