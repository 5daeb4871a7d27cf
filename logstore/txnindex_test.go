package logstore

import (
	"encoding/binary"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
)

// Tests of the transaction index, after Kafka's TransactionIndexTest: the
// file format, append order, collection over a fetch range, truncation,
// recovery and deletion with the segments.

// appendTxn appends n data batches of one record, a transactional
// producer's, then its marker, and returns the offsets of the first batch
// and of the marker.
func appendTxn(t testing.TB, l *Log, pid int64, n int, typ ControlType, ts int64) (first, marker int64) {
	t.Helper()
	first = -1
	for range n {
		b := makeBatch(batchSpec{records: 1, valueSize: 10, firstTs: ts, attributes: attrTransactional})
		binary.BigEndian.PutUint64(b[offProducerID:], uint64(pid))
		binary.BigEndian.PutUint16(b[offProducerEpoch:], 0)
		binary.BigEndian.PutUint32(b[offBaseSequence:], 0)
		binary.BigEndian.PutUint32(b[offCRC:], crc32Castagnoli(b[offAttributes:]))
		info := mustAppend(t, l, b)
		if first < 0 {
			first = info.FirstOffset
		}
	}
	info, err := l.AppendControlAsLeader(BuildControlBatch(pid, 0, 0, typ, ts), 0)
	if err != nil {
		t.Fatal(err)
	}
	return first, info.FirstOffset
}

func mustAbort(t testing.TB, l *Log, a AbortedTxn) {
	t.Helper()
	if err := l.AppendAbortedTxn(a); err != nil {
		t.Fatalf("AppendAbortedTxn(%+v): %v", a, err)
	}
}

func mustCollect(t testing.TB, l *Log, from, to int64) []AbortedTxn {
	t.Helper()
	got, err := l.CollectAbortedTxns(from, to)
	if err != nil {
		t.Fatalf("CollectAbortedTxns(%d, %d): %v", from, to, err)
	}
	return got
}

func TestAbortedTxnFormat(t *testing.T) {
	t.Parallel()
	a := AbortedTxn{ProducerID: 0x0102030405060708, FirstOffset: 9, LastOffset: 10, LastStableOffset: 11}
	b := encodeAbortedTxns([]AbortedTxn{a})
	want := []byte{0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0, 11}
	if !reflect.DeepEqual(b, want) {
		t.Fatalf("encoded %x, want %x", b, want)
	}
	got, v, ok := parseAbortedTxn(b)
	if !ok || v != 0 || got != a {
		t.Fatalf("parsed %+v v%d %v", got, v, ok)
	}
}

// txnLog is a log with a few segments of 10 offsets each (one-record
// batches of 78 bytes, 780-byte segments).
func txnLog(t testing.TB, dir string) (*Log, Config) {
	cfg := testConfig(t)
	cfg.SegmentBytes = 780
	return openLog(t, dir, cfg, 0), cfg
}

func fill(t testing.TB, l *Log, n int) {
	t.Helper()
	for range n {
		mustAppend(t, l, simpleBatch(1, 0))
	}
}

func TestAppendAndCollectAbortedTxns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, _ := txnLog(t, dir)
	fill(t, l, 40)
	// As TransactionIndexTest's collect test, here spread over segments.
	txns := []AbortedTxn{
		{ProducerID: 0, FirstOffset: 0, LastOffset: 10, LastStableOffset: 11},
		{ProducerID: 1, FirstOffset: 5, LastOffset: 15, LastStableOffset: 13},
		{ProducerID: 2, FirstOffset: 18, LastOffset: 35, LastStableOffset: 25},
		{ProducerID: 3, FirstOffset: 32, LastOffset: 39, LastStableOffset: 40},
	}
	for _, a := range txns {
		mustAbort(t, l, a)
	}
	for _, c := range []struct {
		from, to int64
		want     []AbortedTxn
	}{
		{0, 8, txns[:1]},    // LSO 11 >= 8 ends the search
		{0, 12, txns[:2]},   // LSO 13 >= 12 ends it
		{0, 14, txns[:2]},   // the third starts at 18; its LSO 25 ends it
		{0, 19, txns[:3]},   // now it overlaps
		{11, 14, txns[1:2]}, // from the segment holding 11
		{16, 30, txns[2:3]},
		{36, 41, txns[3:]},
		{40, 41, nil},
		{0, math.MaxInt64, txns},
	} {
		if got := mustCollect(t, l, c.from, c.to); !reflect.DeepEqual(got, c.want) {
			t.Errorf("collect [%d, %d) = %+v, want %+v", c.from, c.to, got, c.want)
		}
	}
	// Idempotent replay: entries at or below the last one are ignored.
	mustAbort(t, l, txns[1])
	mustAbort(t, l, AbortedTxn{ProducerID: 7, FirstOffset: 30, LastOffset: 39, LastStableOffset: 40})
	if got := mustCollect(t, l, 0, math.MaxInt64); !reflect.DeepEqual(got, txns) {
		t.Fatalf("after replay %+v", got)
	}
	// Each entry is in the .txnindex of the segment holding its marker,
	// in Kafka's bytes; segments without one have no file.
	for base, want := range map[int64][]AbortedTxn{0: nil, 10: txns[:2], 20: nil, 30: txns[2:]} {
		raw, err := os.ReadFile(segPath(dir, base, txnIndexSuffix))
		if want == nil {
			if !os.IsNotExist(err) {
				t.Errorf("segment %d has a .txnindex: %v", base, err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(raw, encodeAbortedTxns(want)) {
			t.Errorf("segment %d .txnindex %x, %v; want %x", base, raw, err, encodeAbortedTxns(want))
		}
	}
	// Reopening loads them.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, _ := txnLog(t, dir)
	if got := mustCollect(t, l2, 0, math.MaxInt64); !reflect.DeepEqual(got, txns) {
		t.Fatalf("after reopen %+v", got)
	}
}

func TestAppendAbortedTxnRejects(t *testing.T) {
	t.Parallel()
	l, _ := txnLog(t, t.TempDir())
	fill(t, l, 5)
	for _, a := range []AbortedTxn{
		{ProducerID: 1, FirstOffset: 0, LastOffset: 5, LastStableOffset: 0}, // marker not in the log
		{ProducerID: 1, FirstOffset: 3, LastOffset: 2, LastStableOffset: 0}, // first after last
	} {
		if err := l.AppendAbortedTxn(a); !errorsIs(err, ErrOffsetOutOfRange) {
			t.Errorf("AppendAbortedTxn(%+v) = %v", a, err)
		}
	}
	if got := mustCollect(t, l, 0, math.MaxInt64); got != nil {
		t.Fatalf("entries %+v", got)
	}
}

func TestTxnIndexEndToEnd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, _ := txnLog(t, dir)
	first, marker := appendTxn(t, l, 5, 3, ControlAbort, 0)
	mustAbort(t, l, AbortedTxn{ProducerID: 5, FirstOffset: first, LastOffset: marker, LastStableOffset: marker + 1})
	got := mustCollect(t, l, 0, l.LogEndOffset())
	if len(got) != 1 || got[0].FirstOffset != 0 || got[0].LastOffset != 3 {
		t.Fatalf("collected %+v", got)
	}
	if !strings.HasSuffix(segPath(dir, 0, txnIndexSuffix), "00000000000000000000.txnindex") {
		t.Fatal("file name")
	}
}

// abortAt adds an entry with marker at off and first offset first.
func abortAt(t testing.TB, l *Log, pid, first, off int64) AbortedTxn {
	t.Helper()
	a := AbortedTxn{ProducerID: pid, FirstOffset: first, LastOffset: off, LastStableOffset: off + 1}
	mustAbort(t, l, a)
	return a
}

func fileExists(t testing.TB, fsys FS, name string) bool {
	t.Helper()
	names, err := fsys.ReadDir(dirOf(name))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if n == baseOf(name) {
			return true
		}
	}
	return false
}

func dirOf(p string) string  { i := strings.LastIndexByte(p, '/'); return p[:max(i, 1)] }
func baseOf(p string) string { return p[strings.LastIndexByte(p, '/')+1:] }

func TestTxnIndexTruncateTo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, cfg := txnLog(t, dir)
	fill(t, l, 40)
	a := abortAt(t, l, 1, 0, 5)
	b := abortAt(t, l, 2, 3, 8)
	abortAt(t, l, 3, 9, 12)
	abortAt(t, l, 4, 20, 33)
	// Into the segment of b: b's marker goes, a stays; the later segments
	// go with their files.
	if err := l.TruncateTo(8); err != nil {
		t.Fatal(err)
	}
	if got := mustCollect(t, l, 0, math.MaxInt64); !reflect.DeepEqual(got, []AbortedTxn{a}) {
		t.Fatalf("after TruncateTo(8): %+v", got)
	}
	for _, base := range []int64{10, 30} {
		if fileExists(t, OSFS, segPath(dir, base, txnIndexSuffix)) {
			t.Errorf("segment %d's .txnindex survived the truncation", base)
		}
	}
	raw, err := os.ReadFile(segPath(dir, 0, txnIndexSuffix))
	if err != nil || !reflect.DeepEqual(raw, encodeAbortedTxns([]AbortedTxn{a})) {
		t.Fatalf("truncated file %x, %v", raw, err)
	}
	// New entries append after the cut, and a replay of b is taken again.
	fill(t, l, 5)
	mustAbort(t, l, b)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, cfg, l.RecoveryPoint())
	if got := mustCollect(t, l, 0, math.MaxInt64); !reflect.DeepEqual(got, []AbortedTxn{a, b}) {
		t.Fatalf("after reopen: %+v", got)
	}
	// A full truncation removes every file.
	if err := l.TruncateFullyAndStartAt(100); err != nil {
		t.Fatal(err)
	}
	if got := mustCollect(t, l, 0, math.MaxInt64); got != nil {
		t.Fatalf("after full truncation: %+v", got)
	}
	if fileExists(t, OSFS, segPath(dir, 0, txnIndexSuffix)) {
		t.Fatal(".txnindex survived the full truncation")
	}
}

func TestTxnIndexDeletedWithSegments(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, cfg := txnLog(t, dir)
	fill(t, l, 40)
	abortAt(t, l, 1, 0, 5)
	b := abortAt(t, l, 2, 3, 15)
	c := abortAt(t, l, 3, 18, 25)
	// DeleteRecords moving the start into segment 10 deletes segment 0.
	if _, err := l.IncrementLogStartOffset(12); err != nil {
		t.Fatal(err)
	}
	if fileExists(t, OSFS, segPath(dir, 0, txnIndexSuffix)) {
		t.Fatal("segment 0's .txnindex survived DeleteRecords")
	}
	if got := mustCollect(t, l, 12, math.MaxInt64); !reflect.DeepEqual(got, []AbortedTxn{b, c}) {
		t.Fatalf("after start moved: %+v", got)
	}
	// Retention by size down to the active segment.
	cfg.RetentionBytes = 0
	l.SetConfig(cfg)
	if _, err := l.DeleteOldSegments(0); err != nil {
		t.Fatal(err)
	}
	for _, base := range []int64{10, 20} {
		if fileExists(t, OSFS, segPath(dir, base, txnIndexSuffix)) {
			t.Errorf("segment %d's .txnindex survived retention", base)
		}
	}
	if got := mustCollect(t, l, 0, math.MaxInt64); got != nil {
		t.Fatalf("after retention: %+v", got)
	}
}

// memTxnLog is txnLog on a MemFS.
func memTxnLog(t testing.TB, m *MemFS, rp int64) (*Log, error) {
	cfg := testConfig(t)
	cfg.SegmentBytes = 780
	cfg.FS = m
	return Open("/p-0", cfg, rp)
}

func TestTxnIndexFlushedWithSegment(t *testing.T) {
	t.Parallel()
	m := NewMemFS()
	mkdirSynced(t, m, "/p-0")
	l, err := memTxnLog(t, m, 0)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, l, 15)
	a := abortAt(t, l, 1, 0, 12) // in the active segment
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	// Its marker is below the recovery point (15), from which alone the
	// caller replays markers: fsynced at once.
	b := abortAt(t, l, 2, 13, 14)
	fill(t, l, 1)
	abortAt(t, l, 3, 15, 15) // not flushed: may be lost, the caller replays it
	rp := l.RecoveryPoint()
	m.Crash()
	l2, err := memTxnLog(t, m, rp)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if got := mustCollect(t, l2, 0, math.MaxInt64); !reflect.DeepEqual(got, []AbortedTxn{a, b}) {
		t.Fatalf("after crash: %+v (the flushed entry and the one below the recovery point must survive, the last one is lost)", got)
	}
}

func TestTxnIndexRollFlushAndOldSegment(t *testing.T) {
	t.Parallel()
	m := NewMemFS()
	mkdirSynced(t, m, "/p-0")
	l, err := memTxnLog(t, m, 0)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, l, 9)
	a := abortAt(t, l, 1, 0, 8) // segment 0, still active
	fill(t, l, 12)              // rolls twice: segment 0 is flushed in the background
	waitRecoveryPoint(t, l, 10)
	// An entry replayed into segment 10, below the recovery point once it
	// reaches 20, is fsynced at once.
	waitRecoveryPoint(t, l, 20)
	b := abortAt(t, l, 2, 9, 15)
	rp := l.RecoveryPoint()
	m.Crash()
	l2, err := memTxnLog(t, m, rp)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if got := mustCollect(t, l2, 0, math.MaxInt64); !reflect.DeepEqual(got, []AbortedTxn{a, b}) {
		t.Fatalf("after crash: %+v", got)
	}
}

// waitRecoveryPoint waits for the background flush to move the recovery
// point to at least off. It flushes no more than the roll asked for:
// Flush would sync everything.
func waitRecoveryPoint(t testing.TB, l *Log, off int64) {
	t.Helper()
	l.bg.Wait()
	if rp := l.RecoveryPoint(); rp < off {
		t.Fatalf("recovery point %d, want >= %d", rp, off)
	}
}

func TestTxnIndexRecovery(t *testing.T) {
	t.Parallel()
	t.Run("entries past the recovered end", func(t *testing.T) {
		t.Parallel()
		m := NewMemFS()
		mkdirSynced(t, m, "/p-0")
		l, err := memTxnLog(t, m, 0)
		if err != nil {
			t.Fatal(err)
		}
		fill(t, l, 5)
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		fill(t, l, 3)
		a := abortAt(t, l, 1, 0, 2)
		abortAt(t, l, 2, 5, 7)
		// The kernel wrote back the index but not the segment's tail.
		m.CrashWith(func(name string, synced, current []byte) []byte {
			if strings.HasSuffix(name, logSuffix) {
				return synced
			}
			return current
		})
		l2, err := memTxnLog(t, m, 5)
		if err != nil {
			t.Fatal(err)
		}
		defer l2.Close()
		if l2.LogEndOffset() != 5 {
			t.Fatalf("LEO %d", l2.LogEndOffset())
		}
		if got := mustCollect(t, l2, 0, math.MaxInt64); !reflect.DeepEqual(got, []AbortedTxn{a}) {
			t.Fatalf("entries %+v, want only the one below 5", got)
		}
		raw, _ := m.ReadFile(segPath("/p-0", 0, txnIndexSuffix))
		if !reflect.DeepEqual(raw, encodeAbortedTxns([]AbortedTxn{a})) {
			t.Fatalf("file %x", raw)
		}
		// Appending again works from the cut.
		fill(t, l2, 3)
		b := abortAt(t, l2, 2, 5, 7)
		if got := mustCollect(t, l2, 0, math.MaxInt64); !reflect.DeepEqual(got, []AbortedTxn{a, b}) {
			t.Fatalf("entries %+v", got)
		}
	})
	t.Run("torn last entry", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		l, cfg := txnLog(t, dir)
		fill(t, l, 5)
		a := abortAt(t, l, 1, 0, 2)
		abortAt(t, l, 2, 3, 4)
		must(t, l.Close())
		name := segPath(dir, 0, txnIndexSuffix)
		raw, err := os.ReadFile(name)
		must(t, err)
		must(t, os.WriteFile(name, raw[:abortedTxnSize+20], 0o644))
		l2 := openLog(t, dir, cfg, l.RecoveryPoint())
		if got := mustCollect(t, l2, 0, math.MaxInt64); !reflect.DeepEqual(got, []AbortedTxn{a}) {
			t.Fatalf("entries %+v", got)
		}
		b := abortAt(t, l2, 2, 3, 4)
		must(t, l2.Close())
		raw, err = os.ReadFile(name)
		if err != nil || !reflect.DeepEqual(raw, encodeAbortedTxns([]AbortedTxn{a, b})) {
			t.Fatalf("file %x, %v", raw, err)
		}
	})
	// Kafka's sanity check, and ours: a bad entry is an error naming the
	// file, never a panic nor a silent drop.
	for name, c := range map[string]struct {
		entries []AbortedTxn
		mutate  func([]byte)
		why     string
	}{
		"bad version":  {[]AbortedTxn{{ProducerID: 1, LastOffset: 12}}, func(b []byte) { b[1] = 1 }, "version 1"},
		"below base":   {[]AbortedTxn{{ProducerID: 1, LastOffset: 5}}, nil, "below the segment base"},
		"out of order": {[]AbortedTxn{{ProducerID: 1, LastOffset: 14}, {ProducerID: 2, LastOffset: 13}}, nil, "not above"},
		"first > last": {[]AbortedTxn{{ProducerID: 1, FirstOffset: 15, LastOffset: 14}}, nil, "above the last offset"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			l, cfg := txnLog(t, dir)
			fill(t, l, 20)
			must(t, l.Close())
			name := segPath(dir, 10, txnIndexSuffix)
			raw := encodeAbortedTxns(c.entries)
			if c.mutate != nil {
				c.mutate(raw)
			}
			must(t, os.WriteFile(name, raw, 0o644))
			_, err := Open(dir, cfg, l.RecoveryPoint())
			if !errorsIs(err, ErrCorrupt) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), c.why) {
				t.Fatalf("Open = %v, want ErrCorrupt naming %s (%s)", err, name, c.why)
			}
		})
	}
	t.Run("orphan removed", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		l, cfg := txnLog(t, dir)
		fill(t, l, 5)
		must(t, l.Close())
		orphan := segPath(dir, 50, txnIndexSuffix)
		must(t, os.WriteFile(orphan, encodeAbortedTxns([]AbortedTxn{{LastOffset: 55}}), 0o644))
		openLog(t, dir, cfg, 0)
		if _, err := os.Stat(orphan); !os.IsNotExist(err) {
			t.Fatalf("orphan .txnindex kept: %v", err)
		}
	})
}

// TestTxnIndexReplayAfterCrash: the marker survives a crash above the
// recovery point but its unsynced entry does not; replaying the markers
// from the recovery point (as the caller does) restores it, and entries
// that did survive are not doubled.
func TestTxnIndexReplayAfterCrash(t *testing.T) {
	t.Parallel()
	m := NewMemFS()
	mkdirSynced(t, m, "/p-0")
	l, err := memTxnLog(t, m, 0)
	if err != nil {
		t.Fatal(err)
	}
	first, marker := appendTxn(t, l, 3, 2, ControlAbort, 0)
	a := AbortedTxn{ProducerID: 3, FirstOffset: first, LastOffset: marker, LastStableOffset: marker + 1}
	mustAbort(t, l, a)
	must(t, l.Flush())
	first, marker = appendTxn(t, l, 4, 2, ControlAbort, 0)
	b := AbortedTxn{ProducerID: 4, FirstOffset: first, LastOffset: marker, LastStableOffset: marker + 1}
	mustAbort(t, l, b)
	rp := l.RecoveryPoint()
	// The kernel wrote back the segment but not the index.
	m.CrashWith(func(name string, synced, current []byte) []byte {
		if strings.HasSuffix(name, txnIndexSuffix) {
			return synced
		}
		return current
	})
	l2, err := memTxnLog(t, m, rp)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if got := mustCollect(t, l2, 0, math.MaxInt64); !reflect.DeepEqual(got, []AbortedTxn{a}) {
		t.Fatalf("after the crash %+v", got)
	}
	// The caller's replay from below the recovery point.
	mustAbort(t, l2, a)
	mustAbort(t, l2, b)
	if got := mustCollect(t, l2, 0, math.MaxInt64); !reflect.DeepEqual(got, []AbortedTxn{a, b}) {
		t.Fatalf("after the replay %+v", got)
	}
}
