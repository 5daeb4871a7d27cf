package logstore

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// Tests of what Open and Assign defer to the first flush (syncDeferredLocked):
// a log without data costs no fsync to open, assign an epoch to and
// close, and a crash before its first flush may take it away but never
// anything a recovery point covered.

// countSyncs makes m count its fsyncs (File.Sync and SyncDir) in n.
func countSyncs(m *MemFS, n *atomic.Int64) {
	m.SetInjector(func(op MemOp, _ string) error {
		if op == MemOpSync || op == MemOpSyncDir {
			n.Add(1)
		}
		return nil
	})
}

func deferredConfig(m *MemFS) Config {
	cfg := crashConfig()
	cfg.FS = m
	return cfg
}

func logDir(i int) string { return fmt.Sprintf("/data/t-%d", i) }

// checkEpochsMatchLog checks that the cache of l holds exactly the epoch
// changes of its batches: an entry for the first batch of every epoch,
// none starting at or after the log end.
func checkEpochsMatchLog(t *testing.T, l *Log) {
	t.Helper()
	var want []EpochEntry
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		b, err := l.Read(off, 1, math.MaxInt64)
		if err != nil {
			t.Fatalf("read %d: %v", off, err)
		}
		it := NewBatchIter(b)
		if !it.Next() {
			t.Fatalf("no batch at %d", off)
		}
		h := it.Header()
		if e := h.PartitionLeaderEpoch; len(want) == 0 || e > want[len(want)-1].LeaderEpoch {
			want = append(want, EpochEntry{LeaderEpoch: e, StartOffset: h.BaseOffset})
		}
		off = h.NextOffset()
	}
	if got := l.LeaderEpochs().Entries(); !slices.Equal(got, want) {
		t.Fatalf("leader epochs %v, the batches say %v (LEO %d)", got, want, l.LogEndOffset())
	}
}

// TestCreateEmptyLogsNoFsync: opening new logs, assigning each a leader
// epoch and closing them fsyncs nothing. A crash then may take any of
// them away: each opens again empty, with no epoch.
func TestCreateEmptyLogsNoFsync(t *testing.T) {
	t.Parallel()
	for _, cached := range []bool{false, true} {
		t.Run(fmt.Sprintf("cache=%v", cached), func(t *testing.T) {
			t.Parallel()
			m := NewMemFS()
			mkdirSynced(t, m, "/data")
			var syncs atomic.Int64
			countSyncs(m, &syncs)
			cfg := deferredConfig(m)
			if cached {
				cfg.Files = NewFileCache(4)
			}
			var ls []*Log
			for i := range 10 {
				l, err := Open(logDir(i), cfg, 0)
				if err != nil {
					t.Fatal(err)
				}
				if err := l.LeaderEpochs().Assign(3, 0); err != nil {
					t.Fatal(err)
				}
				if e, ok := l.LeaderEpochs().LatestEpoch(); !ok || e != 3 {
					t.Fatalf("latest epoch %d %v after Assign", e, ok)
				}
				ls = append(ls, l)
			}
			if n := syncs.Load(); n != 0 {
				t.Fatalf("%d fsyncs to open 10 new logs and assign their epochs, want 0", n)
			}
			for _, l := range ls {
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
			}
			if n := syncs.Load(); n != 0 {
				t.Fatalf("%d fsyncs to close 10 logs that never held data, want 0", n)
			}
			// Reopening them, after a clean shutdown or not, fsyncs
			// nothing either.
			for _, clean := range []bool{true, false} {
				c := cfg
				c.CleanShutdown = clean
				for i := range 10 {
					l, err := Open(logDir(i), c, 0)
					if err != nil {
						t.Fatal(err)
					}
					if err := l.Close(); err != nil {
						t.Fatal(err)
					}
				}
			}
			if n := syncs.Load(); n != 0 {
				t.Fatalf("%d fsyncs to reopen 10 empty logs, want 0", n)
			}
			m.Crash()
			for i := range 10 {
				l, err := Open(logDir(i), deferredConfig(m), 0)
				if err != nil {
					t.Fatalf("open %s after a crash: %v", logDir(i), err)
				}
				if l.LogEndOffset() != 0 || len(l.LeaderEpochs().Entries()) != 0 {
					t.Fatalf("%s after a crash: LEO %d, epochs %v; want an empty log", logDir(i), l.LogEndOffset(), l.LeaderEpochs().Entries())
				}
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestCreatedLogCrashAfterAppends: appends to new logs without a flush
// may be lost in a crash, as ever; whatever survives opens with
// contiguous offsets and the epochs of its batches. Crash loses what was
// not fsynced; CrashWith keeps everything, as a kill -9.
func TestCreatedLogCrashAfterAppends(t *testing.T) {
	t.Parallel()
	for _, keepAll := range []bool{false, true} {
		t.Run(fmt.Sprintf("keepAll=%v", keepAll), func(t *testing.T) {
			t.Parallel()
			m := NewMemFS()
			mkdirSynced(t, m, "/data")
			cfg := deferredConfig(m)
			cfg.SegmentBytes = 1 << 20 // no roll: no background flush
			var model [][]byte
			for i := range 4 {
				l, err := Open(logDir(i), cfg, 0)
				if err != nil {
					t.Fatal(err)
				}
				if err := l.LeaderEpochs().Assign(5, 0); err != nil {
					t.Fatal(err)
				}
				for j := range 3 {
					b := simpleBatch(2, int64(j))
					if _, err := l.AppendAsLeader(b, 5, -1); err != nil {
						t.Fatal(err)
					}
					if i == 0 {
						model = append(model, b)
					}
				}
				if l.RecoveryPoint() != 0 {
					t.Fatalf("recovery point %d without a flush", l.RecoveryPoint())
				}
			}
			if keepAll {
				m.CrashWith(func(_ string, _, current []byte) []byte { return current })
			} else {
				m.Crash()
			}
			for i := range 4 {
				l, err := Open(logDir(i), deferredConfig(m), 0)
				if err != nil {
					t.Fatalf("open after a crash: %v", err)
				}
				want := int64(0)
				if keepAll {
					want = 6
				}
				if l.LogEndOffset() != want {
					t.Fatalf("%s: LEO %d after the crash, want %d", logDir(i), l.LogEndOffset(), want)
				}
				if i == 0 && keepAll {
					if got := readAll(t, l); !bytes.Equal(got, bytes.Join(model, nil)) {
						t.Fatal("batches differ after a crash that kept them")
					}
				}
				checkEpochsMatchLog(t, l)
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestCreatedLogFlushIsDurable: the first flush of a new log makes its
// directory, its segments and its leader epochs durable before the
// recovery point covers them: after a crash the log opens with every
// batch below the checkpointed recovery point and its epochs. Also for a
// log reopened empty after a clean shutdown (whose Close made nothing
// durable).
func TestCreatedLogFlushIsDurable(t *testing.T) {
	t.Parallel()
	for _, reopened := range []bool{false, true} {
		t.Run(fmt.Sprintf("reopenedEmpty=%v", reopened), func(t *testing.T) {
			t.Parallel()
			m := NewMemFS()
			mkdirSynced(t, m, "/data")
			cfg := deferredConfig(m)
			cfg.SegmentBytes = 1 << 20
			l, err := Open(crashLogDir, cfg, 0)
			if err != nil {
				t.Fatal(err)
			}
			if reopened {
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				c := cfg
				c.CleanShutdown = true
				if l, err = Open(crashLogDir, c, 0); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.LeaderEpochs().Assign(2, 0); err != nil {
				t.Fatal(err)
			}
			var model []byte
			for j := range 3 {
				b := simpleBatch(2, int64(j))
				if _, err := l.AppendAsLeader(b, 2, -1); err != nil {
					t.Fatal(err)
				}
				model = append(model, b...)
			}
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			rp := l.RecoveryPoint()
			if rp != 6 {
				t.Fatalf("recovery point %d after a flush, want 6", rp)
			}
			// Not flushed: may go.
			if err := l.LeaderEpochs().Assign(3, 6); err != nil {
				t.Fatal(err)
			}
			m.Crash()
			l2, err := Open(crashLogDir, deferredConfig(m), rp)
			if err != nil {
				t.Fatalf("open after a crash: %v", err)
			}
			defer l2.Close()
			if l2.LogEndOffset() != 6 || !bytes.Equal(readAll(t, l2), model) {
				t.Fatalf("LEO %d after a crash, want the 6 flushed offsets back", l2.LogEndOffset())
			}
			if got, want := l2.LeaderEpochs().Entries(), []EpochEntry{{2, 0}}; !slices.Equal(got, want) {
				t.Fatalf("epochs %v after a crash, want %v", got, want)
			}
		})
	}
}

// TestDeferredEpochCrash: a leader epoch assigned on a log with flushed
// data and not flushed itself is lost in a crash with the batches that
// followed it; after Open the cache agrees with the log either way (an
// epoch starting at or after the recovered end is dropped, the epoch of
// every recovered batch is present); a flushed one survives, and the
// file stays whole.
func TestDeferredEpochCrash(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		appendNew  bool // append a batch of the new epoch
		flush      bool
		keepAll    bool // crash keeping every write (kill -9)
		wantLEO    int64
		wantEpochs []EpochEntry
	}{
		{"assign only, crash", false, false, false, 4, []EpochEntry{{1, 0}}},
		{"assign only, kill", false, false, true, 4, []EpochEntry{{1, 0}}},
		{"assign and append, crash", true, false, false, 4, []EpochEntry{{1, 0}}},
		{"assign and append, kill", true, false, true, 6, []EpochEntry{{1, 0}, {2, 4}}},
		{"assign, append and flush, crash", true, true, false, 6, []EpochEntry{{1, 0}, {2, 4}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := NewMemFS()
			mkdirSynced(t, m, "/data")
			cfg := deferredConfig(m)
			cfg.SegmentBytes = 1 << 20
			l, err := Open(crashLogDir, cfg, 0)
			if err != nil {
				t.Fatal(err)
			}
			for j := range 2 {
				if _, err := l.AppendAsLeader(simpleBatch(2, int64(j)), 1, -1); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			var syncs atomic.Int64
			countSyncs(m, &syncs)
			if err := l.LeaderEpochs().Assign(2, 4); err != nil {
				t.Fatal(err)
			}
			if n := syncs.Load(); n != 0 {
				t.Fatalf("Assign fsynced %d times, want 0", n)
			}
			if tc.appendNew {
				if _, err := l.AppendAsLeader(simpleBatch(2, 9), 2, -1); err != nil {
					t.Fatal(err)
				}
			}
			if tc.flush {
				if err := l.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			rp := l.RecoveryPoint()
			if tc.keepAll {
				m.CrashWith(func(_ string, _, current []byte) []byte { return current })
			} else {
				m.Crash()
			}
			if _, err := readCheckpointLines(m, filepath.Join(crashLogDir, LeaderEpochCheckpointFile)); err != nil {
				t.Fatalf("leader-epoch-checkpoint after the crash: %v", err)
			}
			l2, err := Open(crashLogDir, deferredConfig(m), rp)
			if err != nil {
				t.Fatalf("open after a crash: %v", err)
			}
			defer l2.Close()
			if l2.LogEndOffset() != tc.wantLEO {
				t.Fatalf("LEO %d after the crash, want %d", l2.LogEndOffset(), tc.wantLEO)
			}
			if got := l2.LeaderEpochs().Entries(); !slices.Equal(got, tc.wantEpochs) {
				t.Fatalf("epochs %v after the crash, want %v", got, tc.wantEpochs)
			}
			checkEpochsMatchLog(t, l2)
		})
	}
}

// TestRollFlushPersistsEpochs: the background flush after a roll moves
// the recovery point past the batches of a new epoch; it writes the
// epoch first, so that a crash, and an Open that trusts everything below
// that recovery point, keep it. The new epoch's batches arrive in one
// append that spans the roll, whose epochs are assigned before the roll.
func TestRollFlushPersistsEpochs(t *testing.T) {
	t.Parallel()
	m := NewMemFS()
	mkdirSynced(t, m, "/data")
	cfg := deferredConfig(m) // rolls every 3 batches
	l, err := Open(crashLogDir, cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendAsLeader(simpleBatch(2, 1), 1, -1); err != nil { // [0,2) epoch 1
		t.Fatal(err)
	}
	// [2,8) from a leader of epoch 4: two batches fill the first segment,
	// the third rolls.
	var batches []byte
	for j := range 3 {
		b := makeBatch(batchSpec{records: 2, valueSize: 10, firstTs: int64(10 + j), baseOffset: 2 + 2*int64(j), leaderEpoch: 4})
		batches = append(batches, b...)
	}
	if _, err := l.AppendAsFollower(batches); err != nil {
		t.Fatal(err)
	}
	l.bg.Wait()
	rp := l.RecoveryPoint()
	if rp != 6 {
		t.Fatalf("recovery point %d after the roll's flush, want 6", rp)
	}
	m.Crash()
	l2, err := Open(crashLogDir, deferredConfig(m), rp)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if l2.LogEndOffset() != 6 {
		t.Fatalf("LEO %d, want 6", l2.LogEndOffset())
	}
	if got, want := l2.LeaderEpochs().Entries(), []EpochEntry{{1, 0}, {4, 2}}; !slices.Equal(got, want) {
		t.Fatalf("epochs %v after the crash, want %v", got, want)
	}
}

// TestTruncateFullyOfNewLogIsDurable: a follower's log created and at once
// emptied to start at the leader's log start (its recovery point) has its
// directory durable, so a crash does not bring it back at offset 0.
func TestTruncateFullyOfNewLogIsDurable(t *testing.T) {
	t.Parallel()
	m := NewMemFS()
	mkdirSynced(t, m, "/data")
	l, err := Open(crashLogDir, deferredConfig(m), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateFullyAndStartAt(500); err != nil {
		t.Fatal(err)
	}
	m.Crash()
	l2, err := Open(crashLogDir, deferredConfig(m), 500)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if l2.LogStartOffset() != 500 || l2.LogEndOffset() != 500 {
		t.Fatalf("log [%d, %d) after a crash, want it to start at 500", l2.LogStartOffset(), l2.LogEndOffset())
	}
}

// TestFailedEmptyLogCloseReportsFailure: a log that never held data but
// whose first flush failed is not closed as one that needs nothing: Close
// returns the failure, so its caller writes no clean-shutdown marker.
func TestFailedEmptyLogCloseReportsFailure(t *testing.T) {
	t.Parallel()
	m := NewMemFS()
	mkdirSynced(t, m, "/data")
	l, err := Open(crashLogDir, deferredConfig(m), 0)
	if err != nil {
		t.Fatal(err)
	}
	m.SetInjector(failSyncs)
	if err := l.Flush(); !errorsIs(err, ErrStorage) {
		t.Fatalf("flush with failing fsyncs: %v, want ErrStorage", err)
	}
	m.SetInjector(nil)
	if err := l.Close(); !errorsIs(err, ErrStorage) {
		t.Fatalf("close after a failed flush: %v, want ErrStorage", err)
	}
}

// TestFreshDirectoryCreatesOnlyTheLog: Open of a log whose directory is
// missing makes the directory and the first segment's .log and nothing
// else (no leader-epoch file read, no empty index files), and the
// directory listing is read once. The index files appear with the first
// write that must be durable, and survive a crash after it: a flush of a
// rolled segment, and Close of the active one. Each would fail if the
// lazy indexes were never created or their entries never fsynced (Open
// would then log "index missing" and rebuild the segment).
func TestFreshDirectoryCreatesOnlyTheLog(t *testing.T) {
	t.Parallel()
	mem := NewMemFS()
	mkdirSynced(t, mem, "/data")
	cnt := newCountFS(mem)
	var ops []string
	mem.SetInjector(func(op MemOp, name string) error {
		ops = append(ops, op.String()+" "+name)
		return nil
	})
	cfg := scaleConfig(t, cnt, NewFileCache(4))
	cfg.IndexIntervalBytes = 4096 // no index entry in a segment of 4 batches: empty indexes
	l, err := Open(crashLogDir, cfg, 0)
	mustNoError(t)(err)
	mem.SetInjector(nil)
	want := []string{"mkdir " + crashLogDir, "create " + segPath(crashLogDir, 0, logSuffix)}
	if !slices.Equal(ops, want) {
		t.Fatalf("Open of a new log: %q, want %q", ops, want)
	}
	if n := cnt.ReadDirs(); n != 1 {
		t.Fatalf("Open of a new log listed directories %d times, want 1 (the probe that finds it missing)", n)
	}
	if n := cnt.Tries("other"); n != 0 {
		t.Fatalf("Open of a new log tried to open %d other files (its leader-epoch-checkpoint), want 0", n)
	}
	exists := func(base int64, suffix string) bool {
		_, err := mem.ReadFile(segPath(crashLogDir, base, suffix))
		return err == nil
	}
	if exists(0, indexSuffix) || exists(0, timeIndexSuffix) {
		t.Fatal("a new log's empty index files were created at Open")
	}
	// Fill segment 0 and roll past it; the flush of the rolled segment
	// creates and fsyncs its (empty) indexes and their entries.
	for i := range 5 {
		mustAppend(t, l, simpleBatch(2, int64(1000+i)))
	}
	l.bg.Wait()
	mustNoError(t)(l.Flush())
	if len(l.segments) != 2 {
		t.Fatalf("%d segments after 5 batches, want 2", len(l.segments))
	}
	rp := l.RecoveryPoint()
	mem.Crash()
	for _, s := range []string{indexSuffix, timeIndexSuffix} {
		if !exists(0, s) {
			t.Fatalf("after a flush and a crash, the rolled segment's %s is missing", s)
		}
	}
	l2, err := Open(crashLogDir, deferredConfig(mem), rp)
	mustNoError(t)(err)
	if l2.LogEndOffset() != rp {
		t.Fatalf("log end %d after the crash, want the recovery point %d", l2.LogEndOffset(), rp)
	}
	mustNoError(t)(l2.Close())
	// The same after a restart of a log that never held data: its
	// directory holds only the .log, whose indexes the flush of its roll
	// creates and whose directory entries it must fsync too.
	memR := NewMemFS()
	mkdirSynced(t, memR, "/data")
	cfgR := scaleConfig(t, memR, nil)
	cfgR.IndexIntervalBytes = 4096
	mustNoError(t)(openLog(t, crashLogDir, cfgR, 0).Close())
	mustNoError(t)(memR.SyncDir("/data"))
	mustNoError(t)(memR.SyncDir(crashLogDir)) // the directory and its .log survive, as after any restart
	lr := openLog(t, crashLogDir, cfgR, 0)
	for i := range 5 {
		mustAppend(t, lr, simpleBatch(2, int64(1000+i)))
	}
	lr.bg.Wait() // the roll's background flush: recovery point past segment 0
	if lr.RecoveryPoint() < 8 {
		t.Fatalf("recovery point %d after the roll's flush, want past segment 0 (8)", lr.RecoveryPoint())
	}
	memR.Crash()
	for _, sfx := range []string{indexSuffix, timeIndexSuffix} {
		if _, err := memR.ReadFile(segPath(crashLogDir, 0, sfx)); err != nil {
			t.Fatalf("reopened empty log: after a flush and a crash the rolled segment's %s is missing: %v", sfx, err)
		}
	}
	// Close of a new log with data and no index entry leaves its
	// indexes on disk, durable.
	mem2 := NewMemFS()
	mkdirSynced(t, mem2, "/data")
	cfg2 := scaleConfig(t, mem2, nil)
	cfg2.IndexIntervalBytes = 4096
	l3, err := Open(crashLogDir, cfg2, 0)
	mustNoError(t)(err)
	mustAppend(t, l3, simpleBatch(2, 1000))
	mustNoError(t)(l3.Close())
	mem2.Crash()
	for _, s := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
		if _, err := mem2.ReadFile(segPath(crashLogDir, 0, s)); err != nil {
			t.Fatalf("after Close and a crash: %s: %v", s, err)
		}
	}
}

// TestCloseLeavingParent: a new log's Close fsyncs everything but its
// parent directory, and says so; once the caller fsyncs the parent the
// log survives a crash, and a log whose creation an earlier flush made
// durable owes nothing.
func TestCloseLeavingParent(t *testing.T) {
	t.Parallel()
	for _, syncParentToo := range []bool{false, true} {
		mem := NewMemFS()
		mkdirSynced(t, mem, "/data")
		l := openLog(t, crashLogDir, deferredConfig(mem), 0)
		mustAppend(t, l, simpleBatch(2, 1000))
		owed, err := l.CloseLeavingParent()
		mustNoError(t)(err)
		if !owed {
			t.Fatal("a new log's CloseLeavingParent owes no fsync of its parent")
		}
		if syncParentToo {
			mustNoError(t)(mem.SyncDir("/data"))
		}
		mem.Crash()
		_, err = mem.ReadFile(segPath(crashLogDir, 0, logSuffix))
		if survived := err == nil; survived != syncParentToo {
			t.Fatalf("parent fsynced %t: the log survived the crash %t", syncParentToo, survived)
		}
	}
	mem := NewMemFS()
	mkdirSynced(t, mem, "/data")
	l := openLog(t, crashLogDir, deferredConfig(mem), 0)
	mustAppend(t, l, simpleBatch(2, 1000))
	mustNoError(t)(l.Flush())
	mustAppend(t, l, simpleBatch(2, 1001))
	owed, err := l.CloseLeavingParent()
	mustNoError(t)(err)
	if owed {
		t.Fatal("a log flushed before owes an fsync of its parent at close")
	}
	mem.Crash()
	l2 := openLog(t, crashLogDir, deferredConfig(mem), 0)
	defer l2.Close()
	if l2.LogEndOffset() != 4 {
		t.Fatalf("log end %d after Close and a crash, want 4", l2.LogEndOffset())
	}
}

// TestCloseUnsynced: CloseUnsynced leaves a log that, once the file
// system is synced, opens with CleanShutdown exactly as one closed by
// Close (same offsets, segments, indexes, epochs, aborted transactions)
// reading no segment data, and fsyncs nothing but the leader epochs'
// temporary file, reading as much (as little) of the .log files. A crash before the sync leaves a log Open recovers
// from its last checkpointed recovery point, never a failed Open; and a
// write-back error is reported by the sync.
func TestCloseUnsynced(t *testing.T) {
	t.Parallel()
	build := func(mem *MemFS) (*Log, Config) {
		mkdirSynced(t, mem, "/data")
		cfg := scaleConfig(t, mem, NewFileCache(2))
		cfg.IndexIntervalBytes = 4096 // the fresh log's rolled segments keep empty (lazy) indexes
		l := openLog(t, cleanLogDir, cfg, 0)
		for i := range 11 {
			mustNoError(t)(l.LeaderEpochs().Assign(int32(i/4), l.LogEndOffset()))
			if _, err := l.AppendAsLeader(simpleBatch(2, int64(1000+10*i)), int32(i/4), -1); err != nil {
				t.Fatal(err)
			}
			if i == 5 {
				mustNoError(t)(l.Flush()) // some of it durable before the close
			}
		}
		mustNoError(t)(l.AppendAbortedTxn(AbortedTxn{ProducerID: 7, FirstOffset: 14, LastOffset: 15, LastStableOffset: 14}))
		l.bg.Wait()
		return l, cfg
	}
	ref := NewMemFS()
	lr, cfg := build(ref)
	mustNoError(t)(lr.Close())
	refCnt := newCountFS(ref)
	want := factsOf(t, openLog(t, cleanLogDir, func() Config { c := cfg; c.FS, c.CleanShutdown = refCnt, true; return c }(), lr.RecoveryPoint()))

	mem := NewMemFS()
	l, cfg := build(mem)
	flushed := l.RecoveryPoint()
	var syncs []string
	mem.SetInjector(func(op MemOp, name string) error {
		if op == MemOpSync || op == MemOpSyncDir {
			syncs = append(syncs, op.String()+" "+name)
		}
		return nil
	})
	mustNoError(t)(l.CloseUnsynced())
	mem.SetInjector(nil)
	for _, s := range syncs {
		if s != "sync "+filepath.Join(cleanLogDir, LeaderEpochCheckpointFile)+".tmp" {
			t.Fatalf("CloseUnsynced fsynced %q, want only the leader epochs' temporary file (all: %q)", s, syncs)
		}
	}
	if l.RecoveryPoint() != l.LogEndOffset() {
		t.Fatalf("recovery point %d after CloseUnsynced, log end %d", l.RecoveryPoint(), l.LogEndOffset())
	}

	// A crash before the sync: recovered from the last checkpointed
	// recovery point (the flush's), which stays readable.
	crashed := NewMemFS()
	lc, _ := build(crashed)
	mustNoError(t)(lc.CloseUnsynced())
	crashed.Crash()
	rec, err := Open(cleanLogDir, cfg, flushed)
	if err != nil {
		t.Fatalf("Open after a crash before the sync: %v", err)
	}
	if rec.LogEndOffset() < flushed {
		t.Fatalf("log end %d after a crash before the sync, below the flushed %d", rec.LogEndOffset(), flushed)
	}
	mustNoError(t)(rec.Close())

	// Synced: a clean open equal to Close's.
	mustNoError(t)(mem.SyncFileSystem("/data"))
	mem.Crash()
	cnt := newCountFS(mem)
	clean := cfg
	clean.FS, clean.CleanShutdown = cnt, true
	got := openLog(t, cleanLogDir, clean, l.RecoveryPoint())
	if g := factsOf(t, got); fmt.Sprint(g) != fmt.Sprint(want) {
		t.Fatalf("after CloseUnsynced and a sync of the file system:\n%+v\nafter Close:\n%+v", g, want)
	}
	if n, ref := cnt.LogBytesRead(), refCnt.LogBytesRead(); n != ref {
		t.Fatalf("the clean open read %d bytes of .log files, the open after Close %d", n, ref)
	}

	// A failed fsync is reported by the sync of the file system.
	bad := NewMemFS()
	lb, _ := build(bad)
	bad.SetInjector(func(op MemOp, name string) error {
		if op == MemOpSync && strings.HasSuffix(name, logSuffix) {
			return ErrInjected
		}
		return nil
	})
	mustAppend(t, lb, simpleBatch(2, 2000))
	if err := lb.Flush(); err == nil {
		t.Fatal("flush with a failing fsync succeeded")
	}
	bad.SetInjector(nil)
	if err := bad.SyncFileSystem("/data"); !errors.Is(err, ErrInjected) {
		t.Fatalf("SyncFileSystem after a failed fsync: %v, want the write-back error", err)
	}
}
