package logstore

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"slices"
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
