package logstore

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// scaleConfig is a test config on fsys with a FileCache (nil: none) and
// small segments (roll every 4 batches of simpleBatch(2, _)).
func scaleConfig(t testing.TB, fsys FS, files *FileCache) Config {
	cfg := testConfig(t)
	cfg.FS = fsys
	cfg.Files = files
	cfg.SegmentBytes = 4 * int64(len(simpleBatch(2, 0)))
	cfg.IndexIntervalBytes = 1
	return cfg
}

// TestIndexFilesNotHeldOpen: whatever the log does (appends that roll,
// flushes, a truncation, aborted transactions, retention, a reopen), no
// index file stays open after the call, and without a FileCache each
// segment holds just its .log.
func TestIndexFilesNotHeldOpen(t *testing.T) {
	t.Parallel()
	m := newCountFS(NewMemFS())
	dir := "/data/t-0"
	cfg := scaleConfig(t, m, nil)
	check := func(l *Log, what string) {
		t.Helper()
		l.bg.Wait()
		for _, k := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix} {
			if n := m.Open(k); n != 0 {
				t.Fatalf("after %s: %d %s files open, want 0", what, n, k)
			}
		}
		if n, segs := m.Open(logSuffix), len(l.segments); n != segs {
			t.Fatalf("after %s: %d .log files open for %d segments", what, n, segs)
		}
	}
	l := openLog(t, dir, cfg, 0)
	check(l, "open")
	for i := range 10 {
		mustAppend(t, l, simpleBatch(2, int64(1000+i)))
	}
	check(l, "appends that roll")
	mustNoError(t)(l.AppendAbortedTxn(AbortedTxn{ProducerID: 1, FirstOffset: 1, LastOffset: 3, LastStableOffset: 1}))
	mustNoError(t)(l.AppendAbortedTxn(AbortedTxn{ProducerID: 1, FirstOffset: 17, LastOffset: 18, LastStableOffset: 17}))
	check(l, "aborted transactions")
	mustNoError(t)(l.Flush())
	check(l, "flush")
	mustNoError(t)(l.TruncateTo(12))
	check(l, "truncation")
	if _, err := l.DeleteOldSegmentsBelow(math.MaxInt64, 8); err != nil {
		t.Fatal(err)
	}
	check(l, "retention")
	mustNoError(t)(l.Close())
	if n := m.Open(logSuffix) + m.Open(indexSuffix) + m.Open(timeIndexSuffix) + m.Open(txnIndexSuffix); n != 0 {
		t.Fatalf("%d segment files open after Close", n)
	}
	l = openLog(t, dir, cfg, 12)
	check(l, "reopen")
	mustAppend(t, l, simpleBatch(2, 2000))
	check(l, "append after reopen")
}

// TestFileCacheBoundsDescriptors: 20 logs of several segments each, on a
// FileCache of 5, appended to, read, flushed and reopened: never more
// than 5 .log files are open at once, and everything reads back.
func TestFileCacheBoundsDescriptors(t *testing.T) {
	t.Parallel()
	const logs, capacity = 20, 5
	m := newCountFS(NewMemFS())
	files := NewFileCache(capacity)
	cfg := scaleConfig(t, m, files)
	open := func() []*Log {
		ls := make([]*Log, logs)
		for i := range ls {
			ls[i] = openLog(t, fmt.Sprintf("/data/t-%d", i), cfg, 0)
		}
		return ls
	}
	ls := open()
	want := make([][]byte, logs)
	for round := range 9 {
		for i, l := range ls {
			b := simpleBatch(2, int64(1000+round))
			mustAppend(t, l, b)
			want[i] = append(want[i], b...)
		}
	}
	for i, l := range ls {
		if len(l.segments) < 3 {
			t.Fatalf("log %d has %d segments", i, len(l.segments))
		}
		if got := readAll(t, l); !bytes.Equal(got, want[i]) {
			t.Fatalf("log %d reads back %d bytes, want %d", i, len(got), len(want[i]))
		}
		mustNoError(t)(l.Flush())
	}
	for _, l := range ls {
		l.bg.Wait()
		mustNoError(t)(l.Close())
	}
	if n := files.OpenFiles(); n != 0 {
		t.Fatalf("the cache holds %d files after every log closed", n)
	}
	ls = open()
	for i, l := range ls {
		if got := readAll(t, l); !bytes.Equal(got, want[i]) {
			t.Fatalf("log %d reads back %d bytes after reopening, want %d", i, len(got), len(want[i]))
		}
	}
	if got := m.MaxOpen(logSuffix); got > capacity {
		t.Fatalf("%d .log files open at once with a FileCache of %d", got, capacity)
	}
	if got := m.Opens(logSuffix); got <= logs {
		t.Fatalf("only %d opens of .log files: the cache never evicted", got)
	}
	if n := files.OpenFiles(); n != m.Open(logSuffix) || n > capacity {
		t.Fatalf("OpenFiles %d, %d .log files open", n, m.Open(logSuffix))
	}
}

// TestFileCacheConcurrentReadsAndAppends: readers and writers of several
// logs share a FileCache of 2, so descriptors are evicted under reads and
// appends all the time; every read returns whole, valid batches at the
// offset asked for. Run it with -race.
func TestFileCacheConcurrentReadsAndAppends(t *testing.T) {
	t.Parallel()
	const logs, capacity, appends = 4, 2, 150
	m := newCountFS(NewMemFS())
	files := NewFileCache(capacity)
	cfg := scaleConfig(t, m, files)
	ls := make([]*Log, logs)
	for i := range ls {
		ls[i] = openLog(t, fmt.Sprintf("/data/t-%d", i), cfg, 0)
		mustAppend(t, ls[i], simpleBatch(2, 1))
	}
	var wg sync.WaitGroup
	var done atomic.Bool
	errs := make(chan error, 2*logs)
	for i, l := range ls {
		wg.Add(2)
		go func() { // the writer
			defer wg.Done()
			for j := range appends {
				if _, err := l.AppendAsLeader(simpleBatch(2, int64(2+j)), 0, -1); err != nil {
					errs <- fmt.Errorf("log %d: append: %w", i, err)
					return
				}
				if j%50 == 49 {
					if err := l.Flush(); err != nil {
						errs <- fmt.Errorf("log %d: flush: %w", i, err)
						return
					}
				}
			}
		}()
		go func() { // a reader
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			for !done.Load() {
				leo := l.LogEndOffset()
				off := rng.Int64N(leo)
				b, err := l.Read(off, 256, math.MaxInt64)
				if err != nil {
					errs <- fmt.Errorf("log %d: read at %d: %w", i, off, err)
					return
				}
				it := NewBatchIter(b)
				if !it.Next() || it.Header().BaseOffset > off || it.Header().LastOffset() < off {
					errs <- fmt.Errorf("log %d: read at %d returned no batch holding it", i, off)
					return
				}
				if _, err := ValidateBatch(it.Batch()); err != nil {
					errs <- fmt.Errorf("log %d: read at %d: %w", i, off, err)
					return
				}
			}
		}()
	}
	go func() {
		for _, l := range ls {
			for l.LogEndOffset() < 2*(appends+1) {
				if len(errs) > 0 {
					break
				}
				runtime.Gosched()
			}
		}
		done.Store(true)
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Every user pins at most one descriptor: at most one per goroutine
	// beyond the bound, and the bound again once they are done.
	if got := m.MaxOpen(logSuffix); got > capacity+2*logs {
		t.Errorf("%d .log files open at once, capacity %d and %d goroutines", got, capacity, 2*logs)
	}
	if n := files.OpenFiles(); n > capacity {
		t.Errorf("OpenFiles %d after the goroutines ended, capacity %d", n, capacity)
	}
	for _, l := range ls {
		l.bg.Wait()
	}
	if got := m.Opens(logSuffix); got <= logs {
		t.Errorf("only %d opens of .log files: nothing was evicted", got)
	}
}

// TestFileCacheReopenFailure: when the cache closed a segment's .log and
// reopening it fails, the read returns that I/O error and the append
// fails the log (ErrStorage), as any failed write the log cannot undo.
func TestFileCacheReopenFailure(t *testing.T) {
	t.Parallel()
	m := newCountFS(NewMemFS())
	files := NewFileCache(1)
	cfg := scaleConfig(t, m, files)
	a := openLog(t, "/data/a-0", cfg, 0)
	b := openLog(t, "/data/b-0", cfg, 0)
	mustAppend(t, a, simpleBatch(2, 1))
	mustAppend(t, b, simpleBatch(2, 1)) // evicts a's .log
	if n := m.Open(logSuffix); n != 1 {
		t.Fatalf("%d .log files open, want 1", n)
	}
	errEMFILE := errors.New("too many open files")
	aLog := segPath("/data/a-0", 0, logSuffix)
	m.SetFailOpen(func(name string, flag int) error {
		if name == aLog && isReopen(flag) {
			return errEMFILE
		}
		return nil
	})
	if _, err := a.Read(0, 1<<20, math.MaxInt64); !errors.Is(err, errEMFILE) {
		t.Fatalf("Read after a failed reopen: %v, want the open error", err)
	}
	_, err := a.AppendAsLeader(simpleBatch(2, 2), 0, -1)
	if !errors.Is(err, errEMFILE) || !errors.Is(err, ErrStorage) {
		t.Fatalf("append after a failed reopen: %v, want ErrStorage wrapping the open error", err)
	}
	if _, err := a.AppendAsLeader(simpleBatch(2, 3), 0, -1); !errors.Is(err, ErrStorage) {
		t.Fatalf("append to a failed log: %v, want ErrStorage", err)
	}
	m.SetFailOpen(nil)
	// The other log is unaffected.
	mustAppend(t, b, simpleBatch(2, 4))
	if got := readAll(t, b); len(got) == 0 {
		t.Fatal("b reads nothing")
	}
}

// TestFileCacheEvictionSyncs: a .log evicted with unsynced writes is
// fsynced first, so a crash keeps them; and if that fsync fails, the
// log's next flush reports it (ErrStorage) instead of advancing the
// recovery point over data that may be lost.
func TestFileCacheEvictionSyncs(t *testing.T) {
	t.Parallel()
	t.Run("synced", func(t *testing.T) {
		t.Parallel()
		mem := NewMemFS()
		mkdirSynced(t, mem, "/data")
		cfg := scaleConfig(t, mem, NewFileCache(1))
		a := openLog(t, "/data/a-0", cfg, 0)
		b := openLog(t, "/data/b-0", cfg, 0)
		mustNoError(t)(a.Flush()) // a new log's directory is durable from its first flush on
		batch := simpleBatch(2, 1)
		mustAppend(t, a, batch)
		mustAppend(t, b, simpleBatch(2, 1)) // evicts a's .log, fsyncing it
		data, err := mem.ReadFile(segPath("/data/a-0", 0, logSuffix))
		mustNoError(t)(err)
		mem.Crash()
		after, err := mem.ReadFile(segPath("/data/a-0", 0, logSuffix))
		mustNoError(t)(err)
		if !bytes.Equal(after, data) || len(after) != len(batch) {
			t.Fatalf("after a crash the evicted .log holds %d bytes, want the %d written", len(after), len(batch))
		}
	})
	t.Run("sync fails", func(t *testing.T) {
		t.Parallel()
		mem := NewMemFS()
		mkdirSynced(t, mem, "/data")
		cfg := scaleConfig(t, mem, NewFileCache(1))
		a := openLog(t, "/data/a-0", cfg, 0)
		b := openLog(t, "/data/b-0", cfg, 0)
		mustNoError(t)(a.Flush())
		mustAppend(t, a, simpleBatch(2, 1))
		aLog := segPath("/data/a-0", 0, logSuffix)
		mem.SetInjector(func(op MemOp, name string) error {
			if op == MemOpSync && name == aLog {
				return ErrInjected
			}
			return nil
		})
		mustAppend(t, b, simpleBatch(2, 1)) // evicts a's .log: its fsync fails
		mem.SetInjector(nil)
		rp := a.RecoveryPoint()
		if err := a.Flush(); !errors.Is(err, ErrStorage) || !errors.Is(err, ErrInjected) {
			t.Fatalf("flush after a failed fsync on eviction: %v, want ErrStorage wrapping it", err)
		}
		if a.RecoveryPoint() != rp {
			t.Fatalf("recovery point moved from %d to %d over a failed fsync", rp, a.RecoveryPoint())
		}
	})
}

// cleanLogDir is where the clean-shutdown tests keep their log.
const cleanLogDir = "/data/t-0"

// buildCleanLog writes a log of several segments with leader epochs,
// timestamps out of order and aborted transactions, closes it, and
// returns its recovery point (its log end offset).
func buildCleanLog(t *testing.T, fsys FS, cfg Config) int64 {
	t.Helper()
	l, err := Open(cleanLogDir, cfg, 0)
	mustNoError(t)(err)
	for i := range 11 {
		ts := int64(1000 + 10*i)
		if i%3 == 2 {
			ts -= 25 // a batch older than the one before
		}
		if _, err := l.AppendAsLeader(simpleBatch(2, ts), int32(i/4), -1); err != nil {
			t.Fatal(err)
		}
	}
	mustNoError(t)(l.AppendAbortedTxn(AbortedTxn{ProducerID: 7, FirstOffset: 2, LastOffset: 5, LastStableOffset: 2}))
	mustNoError(t)(l.AppendAbortedTxn(AbortedTxn{ProducerID: 7, FirstOffset: 18, LastOffset: 19, LastStableOffset: 18}))
	leo := l.LogEndOffset()
	mustNoError(t)(l.Close())
	if l.RecoveryPoint() != leo {
		t.Fatalf("recovery point %d after Close, log end %d", l.RecoveryPoint(), leo)
	}
	return leo
}

// logFacts is what two opens of the same log must agree on.
type logFacts struct {
	LSO, LEO, RP int64
	Segments     []segFacts
	Epochs       []EpochEntry
	MaxTsOffset  int64
	MaxTs        int64
	ForTs        [][2]int64
}

type segFacts struct {
	Base, Size, Next, MaxTs, MaxTsOffset int64
	Index                                []indexEntry
	TimeIndex                            []timeIndexEntry
	Txns                                 []AbortedTxn
}

func factsOf(t *testing.T, l *Log) logFacts {
	t.Helper()
	f := logFacts{LSO: l.LogStartOffset(), LEO: l.LogEndOffset(), RP: l.RecoveryPoint(), Epochs: l.LeaderEpochs().Entries()}
	for _, s := range l.segments {
		f.Segments = append(f.Segments, segFacts{Base: s.baseOffset, Size: s.size, Next: s.nextOffset, MaxTs: s.maxTimestamp,
			MaxTsOffset: s.offsetOfMaxTimestamp, Index: s.index, TimeIndex: s.timeIndex, Txns: s.txns})
	}
	var err error
	f.MaxTsOffset, f.MaxTs, _, err = l.OffsetOfMaxTimestamp()
	mustNoError(t)(err)
	for ts := int64(990); ts <= 1110; ts += 7 {
		off, got, _, err := l.OffsetForTimestamp(ts)
		mustNoError(t)(err)
		f.ForTs = append(f.ForTs, [2]int64{off, got})
	}
	return f
}

// TestCleanShutdownReadsNoSegmentData: after a clean Close, an Open with
// CleanShutdown reads one batch header of the last segment and nothing
// else of any .log, and gets the same log end offset, indexes, largest
// timestamps, transaction index and leader epochs as an Open that
// recovers the last segment by scanning it. The log then takes appends
// that roll on segment.ms from the first batch's timestamp it never read
// at open.
func TestCleanShutdownReadsNoSegmentData(t *testing.T) {
	t.Parallel()
	// An index entry for every batch, and (Kafka's default interval)
	// none but those Close adds.
	for _, interval := range []int64{1, 4096} {
		t.Run(fmt.Sprintf("index.interval.bytes=%d", interval), func(t *testing.T) {
			t.Parallel()
			cleanShutdownReadsNoSegmentData(t, interval)
		})
	}
}

func cleanShutdownReadsNoSegmentData(t *testing.T, interval int64) {
	mem := NewMemFS()
	mkdirSynced(t, mem, "/data")
	m := newCountFS(mem)
	cfg := scaleConfig(t, m, NewFileCache(2))
	cfg.IndexIntervalBytes = interval
	rp := buildCleanLog(t, m, cfg)

	m.Reset()
	cleanCfg := cfg
	cleanCfg.CleanShutdown = true
	var changes []string
	mem.SetInjector(func(op MemOp, name string) error {
		changes = append(changes, op.String()+" "+name)
		return nil
	})
	l, err := Open(cleanLogDir, cleanCfg, rp)
	mustNoError(t)(err)
	mem.SetInjector(nil)
	if len(changes) > 0 {
		t.Fatalf("clean-shutdown Open wrote or fsynced: %q", changes)
	}
	segs := len(l.segments)
	lastLog := segPath(cleanLogDir, l.segments[segs-1].baseOffset, logSuffix)
	if got := m.LogBytesRead(); got != BatchHeaderSize || m.LogBytesReadFrom(lastLog) != BatchHeaderSize {
		t.Fatalf("clean-shutdown Open of %d segments read %d bytes of .log files (%d of the last), want one header (%d) of the last",
			segs, got, m.LogBytesReadFrom(lastLog), BatchHeaderSize)
	}
	if segs < 3 {
		t.Fatalf("only %d segments", segs)
	}
	clean := factsOf(t, l)
	mustNoError(t)(l.Close())

	m.Reset()
	l, err = Open(cleanLogDir, cfg, rp) // no CleanShutdown: the last segment is scanned
	mustNoError(t)(err)
	if m.LogBytesRead() < l.segments[len(l.segments)-1].size {
		t.Fatalf("recovering Open read only %d bytes", m.LogBytesRead())
	}
	recovered := factsOf(t, l)
	mustNoError(t)(l.Close())
	if c, r := fmt.Sprintf("%+v", clean), fmt.Sprintf("%+v", recovered); c != r {
		t.Fatalf("clean-shutdown Open:\n%s\nrecovering Open:\n%s", c, r)
	}

	// segment.ms counts from the first batch of the active segment (its
	// max timestamp), which the clean open did not read.
	rollCfg := cleanCfg
	rollCfg.SegmentBytes = 1 << 20
	rollCfg.SegmentMs = 100
	l, err = Open(cleanLogDir, rollCfg, rp)
	mustNoError(t)(err)
	active := l.segments[len(l.segments)-1]
	if active.firstBatchTimestamp != firstTsUnknown {
		t.Fatalf("first batch timestamp %d known after a clean open whose last segment has %d index entries",
			active.firstBatchTimestamp, len(active.index))
	}
	var hdr [BatchHeaderSize]byte
	h, err := active.readHeaderAt(0, &hdr)
	mustNoError(t)(err)
	n := len(l.segments)
	mustAppend(t, l, simpleBatch(2, h.MaxTimestamp+50)) // within segment.ms of it
	if len(l.segments) != n {
		t.Fatalf("rolled %d ms after the first batch, segment.ms 100", 50)
	}
	mustAppend(t, l, simpleBatch(2, h.MaxTimestamp+100))
	if len(l.segments) != n+1 {
		t.Fatalf("no roll 100 ms after the first batch, segment.ms 100")
	}
	mustNoError(t)(l.Close())
}

// TestCleanShutdownDamagedIndexFallsBack: after a clean Close, damage to
// an index (a torn file, an entry outside the segment, or a last entry
// that does not name the last batch) makes a CleanShutdown Open rebuild
// that segment from its .log rather than trust it, and the log opens as a
// recovering Open would.
func TestCleanShutdownDamagedIndexFallsBack(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, mem *MemFS, lastBase, midBase int64)
	}{
		{"torn last index", func(t *testing.T, mem *MemFS, lastBase, _ int64) {
			name := segPath(cleanLogDir, lastBase, indexSuffix)
			data, err := mem.ReadFile(name)
			mustNoError(t)(err)
			mustNoError(t)(mem.WriteFile(name, data[:len(data)-3]))
		}},
		{"last index entry not the last batch", func(t *testing.T, mem *MemFS, lastBase, _ int64) {
			name := segPath(cleanLogDir, lastBase, indexSuffix)
			data, err := mem.ReadFile(name)
			mustNoError(t)(err)
			mustNoError(t)(mem.WriteFile(name, data[:len(data)-indexEntrySize])) // drop the final entry
			// ... and claim the previous batch ends one offset later.
			if len(data) >= 2*indexEntrySize {
				d := bytes.Clone(data[:len(data)-indexEntrySize])
				d[len(d)-5]++
				mustNoError(t)(mem.WriteFile(name, d))
			} else {
				mustNoError(t)(mem.WriteFile(name, nil))
			}
		}},
		{"missing last index", func(t *testing.T, mem *MemFS, lastBase, _ int64) {
			mustNoError(t)(mem.Remove(segPath(cleanLogDir, lastBase, indexSuffix)))
		}},
		{"earlier index entry outside its segment", func(t *testing.T, mem *MemFS, _, midBase int64) {
			name := segPath(cleanLogDir, midBase, indexSuffix)
			data, err := mem.ReadFile(name)
			mustNoError(t)(err)
			d := bytes.Clone(data)
			d[len(d)-4] = 0x7f // position far past the end
			mustNoError(t)(mem.WriteFile(name, d))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mem := NewMemFS()
			mkdirSynced(t, mem, "/data")
			m := newCountFS(mem)
			cfg := scaleConfig(t, m, nil)
			rp := buildCleanLog(t, m, cfg)
			ref := openLog(t, cleanLogDir, cfg, rp)
			want := factsOf(t, ref)
			wantData := readAll(t, ref)
			lastBase, midBase := ref.segments[len(ref.segments)-1].baseOffset, ref.segments[1].baseOffset
			mustNoError(t)(ref.Close())
			tc.damage(t, mem, lastBase, midBase)

			m.Reset()
			cleanCfg := cfg
			cleanCfg.CleanShutdown = true
			l := openLog(t, cleanLogDir, cleanCfg, rp)
			if m.LogBytesRead() <= BatchHeaderSize {
				t.Fatalf("read %d .log bytes: the damaged segment was trusted", m.LogBytesRead())
			}
			got := factsOf(t, l)
			if g, w := fmt.Sprintf("%+v", got), fmt.Sprintf("%+v", want); g != w {
				t.Fatalf("after the fallback:\n%s\nwant:\n%s", g, w)
			}
			if !bytes.Equal(readAll(t, l), wantData) {
				t.Fatal("the log reads back different bytes")
			}
			mustAppend(t, l, simpleBatch(1, 5000))
		})
	}
}

// TestCrashThenOpenWithoutCleanShutdown: with a FileCache, a crash to the
// last synced state and an Open without CleanShutdown still recover
// everything below the recovery point, and drop the unsynced tail.
func TestCrashThenOpenWithoutCleanShutdown(t *testing.T) {
	t.Parallel()
	mem := NewMemFS()
	mkdirSynced(t, mem, "/data")
	cfg := scaleConfig(t, mem, NewFileCache(1))
	l, err := Open(cleanLogDir, cfg, 0)
	mustNoError(t)(err)
	other := openLog(t, "/data/u-0", cfg, 0)
	var want []byte
	for i := range 7 {
		b := simpleBatch(2, int64(1000+i))
		mustAppend(t, l, b)
		want = append(want, b...)
		mustAppend(t, other, simpleBatch(1, 1)) // evict l's .log now and then
	}
	mustNoError(t)(l.Flush())
	rp := l.RecoveryPoint()
	for i := range 3 {
		mustAppend(t, l, simpleBatch(2, int64(2000+i))) // not flushed
	}
	l.bg.Wait()
	mem.Crash()
	l2 := openLog(t, cleanLogDir, scaleConfig(t, mem, NewFileCache(1)), rp)
	if l2.LogEndOffset() < rp {
		t.Fatalf("log end %d after the crash, below the recovery point %d", l2.LogEndOffset(), rp)
	}
	got := readAll(t, l2)
	if len(got) < len(want) || !bytes.Equal(got[:len(want)], want) {
		t.Fatalf("after the crash the log reads back %d bytes, not the %d flushed", len(got), len(want))
	}
	mustAppend(t, l2, simpleBatch(1, 3000))
}
