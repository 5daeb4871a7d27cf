package logstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
)

// Transactional compaction, after Kafka's LogCleanerTest transaction
// cases: aborted data goes, committed data is compacted as any other,
// markers stay while their transaction has data before them and then
// until the delete horizon, and the transaction index follows.

// txnKV is a transactional batch of recs by producer pid.
func txnKV(t testing.TB, pid int64, recs ...kv) []byte {
	t.Helper()
	b := kvBatch(t, kvOpts{producerID: pid, baseSequence: 0, ts: 1}, recs...)
	be := binary.BigEndian
	be.PutUint16(b[offAttributes:], be.Uint16(b[offAttributes:])|attrTransactional)
	be.PutUint32(b[offCRC:], crc32Castagnoli(b[offAttributes:]))
	return b
}

// txnWriter appends to a log as a transactional producer and the
// partition would: data, markers, and an index entry per ABORT.
type txnWriter struct {
	t     testing.TB
	l     *Log
	first map[int64]int64 // producer -> first offset of its open transaction
}

func newTxnWriter(t testing.TB, l *Log) *txnWriter {
	return &txnWriter{t: t, l: l, first: map[int64]int64{}}
}

func (w *txnWriter) data(pid int64, recs ...kv) int64 {
	w.t.Helper()
	info := mustAppend(w.t, w.l, txnKV(w.t, pid, recs...))
	if _, ok := w.first[pid]; !ok {
		w.first[pid] = info.FirstOffset
	}
	return info.FirstOffset
}

func (w *txnWriter) end(pid int64, typ ControlType) int64 {
	w.t.Helper()
	info, err := w.l.AppendControlAsLeader(BuildControlBatch(pid, 0, 0, typ, 1), 0)
	if err != nil {
		w.t.Fatal(err)
	}
	if typ == ControlAbort {
		mustAbort(w.t, w.l, AbortedTxn{ProducerID: pid, FirstOffset: w.first[pid], LastOffset: info.FirstOffset, LastStableOffset: info.FirstOffset + 1})
	}
	delete(w.first, pid)
	return info.FirstOffset
}

// markers returns the offsets of the control batches with records, by type.
func markers(t testing.TB, l *Log) map[int64]ControlType {
	t.Helper()
	out := map[int64]ControlType{}
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		b, err := l.Read(off, 1<<20, math.MaxInt64)
		if err != nil {
			t.Fatal(err)
		}
		it := NewBatchIter(b)
		for it.Next() {
			h := it.Header()
			if h.IsControl() && h.NumRecords > 0 {
				typ, _, err := ParseControlBatch(it.Batch())
				if err != nil {
					t.Fatalf("marker at %d: %v", h.BaseOffset, err)
				}
				out[h.BaseOffset] = typ
			}
			off = h.NextOffset()
		}
	}
	return out
}

func values(recs []gotRecord) map[string][]string {
	out := map[string][]string{}
	for _, r := range recs {
		// Markers' keys start with a zero version byte; fillers with z.
		if r.hasKey && len(r.key) > 0 && r.key[0] >= 'a' && r.key[0] != 'z' {
			out[r.key] = append(out[r.key], r.value)
		}
	}
	return out
}

func TestCleanTransactions(t *testing.T) {
	l := openLog(t, t.TempDir(), smallSegConfig(t, 300), 0)
	const t0 = 1_700_000_000_000
	w := newTxnWriter(t, l)
	mustAppend(t, l, kvBatch(t, kvOpts{ts: 1}, k("a", "0"), k("b", "0"))) // 0-1
	w.data(1, k("a", "c1"), k("c", "c1"))                                 // 2-3
	commit1 := w.end(1, ControlCommit)                                    // 4
	w.data(2, k("c", "x"), k("d", "x"))                                   // 5-6: aborted; would supersede c=c1 if mapped
	abort2 := w.end(2, ControlAbort)                                      // 7
	w.data(1, k("a", "c2"))                                               // 8
	commit1b := w.end(1, ControlCommit)                                   // 9
	w.data(3, k("f", "c3"))                                               // 10: superseded below
	commit3 := w.end(3, ControlCommit)                                    // 11
	w.data(2, k("e", "c2"))                                               // 12
	commit2 := w.end(2, ControlCommit)                                    // 13
	w.data(3, k("g", "c3"))                                               // 14
	commit3b := w.end(3, ControlCommit)                                   // 15
	mustAppend(t, l, kvBatch(t, kvOpts{ts: 1}, k("f", "2")))              // 16
	for i := range 6 {
		mustAppend(t, l, kvBatch(t, kvOpts{ts: 1}, k(fmt.Sprintf("z%d", i), "filler"), k("zz", "filler")))
	}
	setMtimes(t, l, 0, func(i int) int64 { return t0 + int64(i)*1000 })
	if got := mustCollect(t, l, 0, math.MaxInt64); len(got) != 1 || got[0].FirstOffset != 5 || got[0].LastOffset != abort2 {
		t.Fatalf("index before cleaning %+v", got)
	}
	abortEntry := mustCollect(t, l, 0, math.MaxInt64)

	cfg := cleanCfg(NewOffsetMap(1 << 16))
	cfg.DeleteRetentionMs = 60_000
	wantValues := map[string][]string{"a": {"c2"}, "b": {"0"}, "c": {"c1"}, "e": {"c2"}, "f": {"2"}, "g": {"c3"}}
	pass := func(what string, wantMarkers []int64, wantIndex []AbortedTxn) CleanStats {
		t.Helper()
		st, err := l.Clean(cfg)
		if err != nil {
			t.Fatal(err)
		}
		recs, _ := logContents(t, l)
		if got := values(recs); !reflect.DeepEqual(got, wantValues) {
			t.Fatalf("%s: values %v, want %v", what, got, wantValues)
		}
		got := markers(t, l)
		want := map[int64]ControlType{}
		for _, off := range wantMarkers {
			want[off] = ControlCommit
			if off == abort2 {
				want[off] = ControlAbort
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: markers %v, want %v", what, got, want)
		}
		if idx := mustCollect(t, l, 0, math.MaxInt64); !reflect.DeepEqual(idx, wantIndex) {
			t.Fatalf("%s: index %+v, want %+v", what, idx, wantIndex)
		}
		cfg.FirstDirtyOffset = st.EndOffset
		return st
	}
	all := []int64{commit1, abort2, commit1b, commit3, commit2, commit3b}
	// First pass: the aborted batch goes, not mapped, so c keeps c1; every
	// marker stays (their transactions had data in this pass, or the
	// horizon is 0), and the ABORT's entry stays with it.
	st := pass("first pass", all, abortEntry)
	if st.AbortedRecordsDropped != 2 || st.MarkersDropped != 0 {
		t.Fatalf("first pass stats %+v", st)
	}
	appendLater := func() {
		n := len(l.segments) - 1
		for i := range 4 {
			mustAppend(t, l, kvBatch(t, kvOpts{ts: 1}, k(fmt.Sprintf("zl%d", i), "filler"), k("zz", "filler")))
		}
		setMtimes(t, l, n, func(i int) int64 { return t0 + 120_000 })
	}
	appendLater()
	// Second pass, horizon not yet reached: the ABORT has no data left
	// (its entry goes) and the first COMMIT of producer 3 none either, but
	// both stay until the horizon.
	pass("before the horizon", all, nil)
	appendLater()
	// Third pass: past the horizon they go. The others keep data before
	// them (commit1: c=c1; commit1b: a=c2; commit2: e) or are their
	// producer's last batch (commit3b).
	st = pass("past the horizon", []int64{commit1, commit1b, commit2, commit3b}, nil)
	if st.MarkersDropped != 2 {
		t.Fatalf("third pass stats %+v", st)
	}
	// Reopened (recovery point 0: every segment and index re-read), the
	// same.
	dir := l.Dir()
	must(t, l.Close())
	l = openLog(t, dir, smallSegConfig(t, 300), 0)
	if idx := mustCollect(t, l, 0, math.MaxInt64); idx != nil {
		t.Fatalf("index after reopen %+v", idx)
	}
	if got := markers(t, l); len(got) != 4 {
		t.Fatalf("markers after reopen %v", got)
	}
}

// TestCleanAbortedKeepsProducerState: an aborted batch that is its
// producer's last data batch is kept empty (its sequence survives), and
// its ABORT marker and index entry stay with it.
func TestCleanAbortedKeepsProducerState(t *testing.T) {
	l := openLog(t, t.TempDir(), smallSegConfig(t, 300), 0)
	w := newTxnWriter(t, l)
	first := w.data(7, k("a", "x"), k("b", "x"))
	abort := w.end(7, ControlAbort)
	for i := range 6 {
		mustAppend(t, l, kvBatch(t, kvOpts{ts: 1}, k(fmt.Sprintf("z%d", i), "filler")))
	}
	entry := mustCollect(t, l, 0, math.MaxInt64)
	cfg := cleanCfg(NewOffsetMap(1 << 16))
	cfg.DeleteRetentionMs = 0
	for pass := range 3 {
		if _, err := l.Clean(cfg); err != nil {
			t.Fatal(err)
		}
		recs, hdrs := logContents(t, l)
		if v := values(recs); len(v) != 0 {
			t.Fatalf("pass %d: aborted values left %v", pass, v)
		}
		var empty *BatchHeader
		for i := range hdrs {
			if hdrs[i].BaseOffset == first {
				empty = &hdrs[i]
			}
		}
		if empty == nil || empty.NumRecords != 0 || empty.ProducerID != 7 || !empty.IsTransactional() || empty.LastOffset() != first+1 {
			t.Fatalf("pass %d: producer's last batch %+v, want kept empty", pass, empty)
		}
		if m := markers(t, l); m[abort] != ControlAbort {
			t.Fatalf("pass %d: markers %v", pass, m)
		}
		if idx := mustCollect(t, l, 0, math.MaxInt64); !reflect.DeepEqual(idx, entry) {
			t.Fatalf("pass %d: index %+v, want %+v", pass, idx, entry)
		}
	}
}

// TestCleanUpperOffsetHoldsTransactions: nothing at or above UpperOffset
// is dropped, and an aborted transaction whose marker is at or above it
// keeps its data (the marker may yet be truncated) and is not mapped.
func TestCleanUpperOffsetHoldsTransactions(t *testing.T) {
	l := openLog(t, t.TempDir(), smallSegConfig(t, 400), 0)
	w := newTxnWriter(t, l)
	mustAppend(t, l, kvBatch(t, kvOpts{ts: 1}, k("a", "0"), k("b", "0"))) // 0-1
	w.data(4, k("a", "x"))                                                // 2: aborted, marker at 4
	mustAppend(t, l, kvBatch(t, kvOpts{ts: 1}, k("b", "1")))              // 3
	abort := w.end(4, ControlAbort)                                       // 4
	w.data(5, k("c", "y"))                                                // 5
	w.end(5, ControlAbort)                                                // 6
	for i := range 8 {
		mustAppend(t, l, kvBatch(t, kvOpts{ts: 1}, k(fmt.Sprintf("z%d", i), "filler")))
	}
	before, _ := logContents(t, l)
	cfg := cleanCfg(NewOffsetMap(1 << 16))
	cfg.DeleteRetentionMs = 0
	cfg.UpperOffset = abort
	if _, err := l.Clean(cfg); err != nil {
		t.Fatal(err)
	}
	recs, _ := logContents(t, l)
	got := values(recs)
	// b=0 was superseded below the upper offset; a=0 was not (a=x is
	// aborted and not mapped); a=x stays, held; everything from 4 on stays.
	want := map[string][]string{"a": {"0", "x"}, "b": {"1"}, "c": {"y"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("values %v, want %v", got, want)
	}
	var wantTail, gotTail []gotRecord
	for _, r := range before {
		if r.offset >= abort {
			wantTail = append(wantTail, r)
		}
	}
	for _, r := range recs {
		if r.offset >= abort {
			gotTail = append(gotTail, r)
		}
	}
	if !reflect.DeepEqual(gotTail, wantTail) {
		t.Fatalf("records at or above the upper offset changed")
	}
	if m := markers(t, l); len(m) != 2 {
		t.Fatalf("markers %v", m)
	}
	if idx := mustCollect(t, l, 0, math.MaxInt64); len(idx) != 2 {
		t.Fatalf("index %+v", idx)
	}
	// With the upper offset past everything, both transactions go.
	cfg.UpperOffset = math.MaxInt64
	if _, err := l.Clean(cfg); err != nil {
		t.Fatal(err)
	}
	recs, _ = logContents(t, l)
	if got := values(recs); !reflect.DeepEqual(got, map[string][]string{"a": {"0"}, "b": {"1"}}) {
		t.Fatalf("values %v", got)
	}
}

// txnConsistent checks a log's index against its data: every entry of
// the log is one of orig, and every original entry with data of its
// producer left in [first, last) is in the index.
func txnConsistent(t testing.TB, l *Log, orig []AbortedTxn) {
	t.Helper()
	idx := mustCollect(t, l, 0, math.MaxInt64)
	in := map[AbortedTxn]bool{}
	for _, e := range idx {
		if !slicesContains(orig, e) {
			t.Fatalf("index entry %+v is not an original one", e)
		}
		in[e] = true
	}
	_, hdrs := logContents(t, l)
	for _, e := range orig {
		for _, h := range hdrs {
			if !h.IsControl() && h.ProducerID == e.ProducerID && h.BaseOffset >= e.FirstOffset && h.LastOffset() < e.LastOffset && !in[e] {
				t.Fatalf("batch at %d of aborted transaction %+v left without its index entry (index %+v)", h.BaseOffset, e, idx)
			}
		}
	}
}

func slicesContains(s []AbortedTxn, e AbortedTxn) bool {
	for _, x := range s {
		if x == e {
			return true
		}
	}
	return false
}

// TestCleanTxnCrashAtEveryStep is TestCleanCrashAtEveryStep over a log
// with aborted transactions: at every file operation of a pass that
// removes aborted data and writes cleaned transaction indexes, crash
// (or fail) and reopen; the index must match the data left, aborted
// data must never be left without its entry, and nothing may be left
// of the .cleaned and .swap files.
func TestCleanTxnCrashAtEveryStep(t *testing.T) {
	const dir = "/topic-0"
	build := func(fsys *MemFS) (*Log, Config) {
		cfg := smallSegConfig(t, 300)
		cfg.FS = fsys
		l, err := Open(dir, cfg, 0)
		if err != nil {
			t.Fatal(err)
		}
		w := newTxnWriter(t, l)
		for i := range 6 {
			pid := int64(10 + i%2)
			w.data(pid, k(keyName(i), "x"), k(keyName(i+1), "x"))
			mustAppend(t, l, kvBatch(t, kvOpts{ts: 1}, k(keyName(i), "plain")))
			if i%2 == 0 {
				w.end(pid, ControlAbort)
			} else {
				w.end(pid, ControlCommit)
			}
		}
		for i := range 4 {
			mustAppend(t, l, kvBatch(t, kvOpts{ts: 1}, k(fmt.Sprintf("z%d", i), "filler")))
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		return l, cfg
	}
	ref := NewMemFS()
	l, _ := build(ref)
	orig := mustCollect(t, l, 0, math.MaxInt64)
	ops0 := ref.Ops()
	st, err := l.Clean(cleanCfg(NewOffsetMap(1 << 16)))
	if err != nil {
		t.Fatal(err)
	}
	steps := int(ref.Ops() - ops0)
	txnConsistent(t, l, orig)
	if st.AbortedRecordsDropped == 0 || len(mustCollect(t, l, 0, math.MaxInt64)) == 0 {
		t.Fatalf("the reference pass drops no aborted data or keeps no entry: %+v", st)
	}
	_ = l.Close()
	t.Logf("a clean pass takes %d file operations", steps)
	for step := range steps {
		for _, mode := range []string{"crash", "writeback", "fail"} {
			t.Run(fmt.Sprintf("step=%d/%s", step, mode), func(t *testing.T) {
				fsys := NewMemFS()
				l, cfg := build(fsys)
				leo, rp := l.LogEndOffset(), l.RecoveryPoint()
				n := 0
				fsys.SetInjector(func(op MemOp, name string) error {
					n++
					if n == step+1 || (mode != "fail" && n > step+1) {
						return fmt.Errorf("%w: %s %s", ErrInjected, op, name)
					}
					return nil
				})
				_, err := l.Clean(cleanCfg(NewOffsetMap(1 << 16)))
				if err == nil {
					t.Fatalf("Clean succeeded with step %d failing", step)
				}
				if !errors.Is(err, ErrInjected) && !errors.Is(err, ErrStorage) {
					t.Fatalf("Clean: %v", err)
				}
				switch mode {
				case "crash":
					fsys.Crash()
				case "writeback":
					fsys.CrashWith(func(_ string, _, current []byte) []byte { return current })
				default:
					fsys.SetInjector(nil)
					_ = l.Close()
				}
				for _, rp := range []int64{rp, 0} {
					l2, err := Open(dir, cfg, rp)
					if err != nil {
						t.Fatalf("reopen: %v", err)
					}
					if l2.LogEndOffset() != leo {
						t.Fatalf("LEO %d, want %d", l2.LogEndOffset(), leo)
					}
					txnConsistent(t, l2, orig)
					names, err := fsys.ReadDir(dir)
					if err != nil {
						t.Fatal(err)
					}
					for _, n := range names {
						if len(n) > 8 && (n[len(n)-5:] == swapSuffix || n[len(n)-8:] == cleanedSuffix) {
							t.Fatalf("%s left after recovery", n)
						}
					}
					// And it cleans to a consistent result.
					if _, err := l2.Clean(cleanCfg(NewOffsetMap(1 << 16))); err != nil {
						t.Fatalf("clean after recovery: %v", err)
					}
					txnConsistent(t, l2, orig)
					must(t, l2.Close())
				}
			})
		}
	}
}

// TestCleanTxnConcurrent runs a transactional writer (data, markers and
// index entries, rolling segments so the background flush runs), readers
// of the index and clean passes bounded by the writer's stable offset all
// at once; under -race it checks the locking of the index, and at the end
// that no aborted value is left and every key has its last committed value.
func TestCleanTxnConcurrent(t *testing.T) {
	l := openLog(t, t.TempDir(), smallSegConfig(t, 400), 0)
	var stable atomic.Int64
	committed := map[string]string{}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer close(done)
		w := newTxnWriter(t, l)
		for i := range 120 {
			pid := int64(1 + i%3)
			key, val := keyName(i%7), fmt.Sprintf("v%d", i)
			w.data(pid, k(key, val))
			if i%4 == 0 {
				w.end(pid, ControlAbort)
			} else {
				w.end(pid, ControlCommit)
				committed[key] = val
			}
			stable.Store(l.LogEndOffset())
		}
	}()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := l.CollectAbortedTxns(0, math.MaxInt64); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	cfg := cleanCfg(NewOffsetMap(1 << 16))
	cfg.DeleteRetentionMs = 0
	for {
		select {
		case <-done:
		default:
			cfg.UpperOffset = stable.Load()
			if _, err := l.Clean(cfg); err != nil && !errors.Is(err, ErrCleanAborted) {
				t.Fatal(err)
			}
			continue
		}
		break
	}
	wg.Wait()
	// One more pass past the last transaction, after a roll.
	mustAppend(t, l, kvBatch(t, kvOpts{ts: 1}, k("zlast", "x")))
	cfg.UpperOffset = math.MaxInt64
	if _, err := l.Clean(cfg); err != nil {
		t.Fatal(err)
	}
	recs, _ := logContents(t, l)
	got := map[string]string{}
	for k, vs := range values(recs) {
		for _, v := range vs {
			var n int
			if _, err := fmt.Sscanf(v, "v%d", &n); err != nil || n%4 == 0 {
				t.Fatalf("aborted value %s of %s left", v, k)
			}
		}
		got[k] = vs[len(vs)-1]
	}
	for k, v := range committed {
		if got[k] != v {
			t.Fatalf("key %s: %q, want %q", k, got[k], v)
		}
	}
}

// TestCleanMarkersAtUpperOffsetKept: past the delete horizon a marker
// with no data of its transaction goes below UpperOffset, but one at or
// above it stays, though its segment is rewritten; a later pass with a
// higher bound removes it.
func TestCleanMarkersAtUpperOffsetKept(t *testing.T) {
	l := openLog(t, t.TempDir(), smallSegConfig(t, 300), 0)
	commitOfNothing := func(pid int64) int64 {
		info, err := l.AppendControlAsLeader(BuildControlBatch(pid, 0, 0, ControlCommit, 1), 0)
		if err != nil {
			t.Fatal(err)
		}
		return info.FirstOffset
	}
	filler := func(n int) {
		for i := range n {
			mustAppend(t, l, kvBatch(t, kvOpts{ts: 1}, k(fmt.Sprintf("z%d", i), "filler")))
		}
	}
	mustAppend(t, l, kvBatch(t, kvOpts{ts: 1}, k("a", "0")))
	low := commitOfNothing(8)
	filler(6)
	high := commitOfNothing(9)
	filler(8)
	// Later batches of both producers, so that neither marker is its
	// producer's last batch.
	mustAppend(t, l, kvBatch(t, kvOpts{ts: 1, producerID: 8}, k("b", "8")))
	mustAppend(t, l, kvBatch(t, kvOpts{ts: 1, producerID: 9}, k("c", "9")))
	if len(l.segments) < 4 {
		t.Fatalf("%d segments", len(l.segments))
	}
	seg := l.segments[l.segmentFor(high)]
	if seg.baseOffset == high || seg == l.segments[len(l.segments)-1] {
		t.Fatalf("marker at %d must lie inside a non-active segment (base %d)", high, seg.baseOffset)
	}
	const t0 = 1_700_000_000_000
	setMtimes(t, l, 0, func(int) int64 { return t0 })
	cfg := cleanCfg(NewOffsetMap(1 << 16))
	cfg.DeleteRetentionMs = 0
	cfg.FirstDirtyOffset = l.segments[1].baseOffset // a clean section, so a horizon (t0)
	cfg.UpperOffset = high
	st, err := l.Clean(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if st.SegmentsCleaned < 2 || st.MarkersDropped != 1 {
		t.Fatalf("stats %+v", st)
	}
	if m := markers(t, l); len(m) != 1 || m[high] != ControlCommit {
		t.Fatalf("markers %v, want only the one at %d (the one at %d past the horizon)", m, high, low)
	}
	cfg.UpperOffset = math.MaxInt64
	if _, err := l.Clean(cfg); err != nil {
		t.Fatal(err)
	}
	if m := markers(t, l); len(m) != 0 {
		t.Fatalf("markers %v after a pass past them", m)
	}
}

// TestCleanAbortSpanningSegments: an aborted transaction whose batches
// lie in several segments, cleaned in separate groups, loses every batch
// while its marker and entry stay (its data was still there when the
// pass reached the marker; the producer's last data batch is kept empty);
// with the marker in the active segment, the data goes all the same and
// the active segment keeps the entry.
func TestCleanAbortSpanningSegments(t *testing.T) {
	for _, markerActive := range []bool{false, true} {
		t.Run(fmt.Sprintf("marker_in_active=%v", markerActive), func(t *testing.T) {
			l := openLog(t, t.TempDir(), smallSegConfig(t, 250), 0)
			w := newTxnWriter(t, l)
			for i := range 5 {
				w.data(4, k(fmt.Sprintf("a%d", i), "x"))
				mustAppend(t, l, kvBatch(t, kvOpts{ts: 1}, k(fmt.Sprintf("z%d", i), "filler"), k("zz", "f")))
			}
			abort := w.end(4, ControlAbort)
			if !markerActive {
				for i := range 6 {
					mustAppend(t, l, kvBatch(t, kvOpts{ts: 1}, k(fmt.Sprintf("zl%d", i), "filler"), k("zz", "f")))
				}
			}
			if l.segmentFor(abort) == len(l.segments)-1 != markerActive {
				t.Fatalf("marker at %d: active segment %v, want %v", abort, !markerActive, markerActive)
			}
			if n := l.segmentFor(abort); n < 2 {
				t.Fatalf("marker in segment %d: the transaction spans too few segments", n)
			}
			entry := mustCollect(t, l, 0, math.MaxInt64)
			st, err := l.Clean(cleanCfg(NewOffsetMap(1 << 16)))
			if err != nil {
				t.Fatal(err)
			}
			if st.SegmentsWritten < 2 || st.AbortedRecordsDropped != 5 {
				t.Fatalf("stats %+v", st)
			}
			recs, _ := logContents(t, l)
			if v := values(recs); len(v) != 0 {
				t.Fatalf("values %v", v)
			}
			if m := markers(t, l); m[abort] != ControlAbort {
				t.Fatalf("markers %v", m)
			}
			if idx := mustCollect(t, l, 0, math.MaxInt64); !reflect.DeepEqual(idx, entry) {
				t.Fatalf("index %+v, want %+v", idx, entry)
			}
		})
	}
}
