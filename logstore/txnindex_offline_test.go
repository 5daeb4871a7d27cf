package logstore

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

// A .txnindex that cannot be created or written fails the log: the ABORT
// marker is in the log and its entry is not, so nothing may be appended
// after it (Kafka takes the log directory offline).
func TestAppendAbortedTxnIOFailureFailsLog(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		op   MemOp
		err  error
	}{
		{"create", MemOpCreate, syscall.EMFILE},
		{"write", MemOpWrite, syscall.ENOSPC},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			m := NewMemFS()
			mkdirSynced(t, m, "/p-0")
			l, err := memTxnLog(t, m, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close() })
			first, marker := appendTxn(t, l, 5, 2, ControlAbort, 0)
			m.SetInjector(func(op MemOp, name string) error {
				if op == c.op && strings.HasSuffix(name, txnIndexSuffix) {
					return c.err
				}
				return nil
			})
			err = l.AppendAbortedTxn(AbortedTxn{ProducerID: 5, FirstOffset: first, LastOffset: marker, LastStableOffset: marker + 1})
			if !errors.Is(err, ErrStorage) || !errors.Is(err, c.err) {
				t.Fatalf("AppendAbortedTxn = %v, want ErrStorage wrapping %v", err, c.err)
			}
			m.SetInjector(nil)
			if _, err := l.AppendAsLeader(simpleBatch(1, 0), 0, -1); !errors.Is(err, ErrStorage) {
				t.Errorf("append after the failure = %v, want ErrStorage", err)
			}
			if _, err := l.AppendControlAsLeader(BuildControlBatch(6, 0, 0, ControlCommit, 0), 0); !errors.Is(err, ErrStorage) {
				t.Errorf("marker after the failure = %v, want ErrStorage", err)
			}
			if err := l.AppendAbortedTxn(AbortedTxn{ProducerID: 5, FirstOffset: first, LastOffset: marker, LastStableOffset: marker + 1}); !errors.Is(err, ErrStorage) {
				t.Errorf("retried index write = %v, want ErrStorage", err)
			}
			if got := l.LogEndOffset(); got != marker+1 {
				t.Errorf("log end offset %d, want %d", got, marker+1)
			}
		})
	}
}

// After an unclean shutdown an older segment's .txnindex may be lost
// while a newer one survived: the replay's entry for the older marker must
// still be added (the duplicate check is per segment), and one that falls
// before entries of its own segment goes in marker order, durably.
func TestAppendAbortedTxnPerSegmentDuplicates(t *testing.T) {
	t.Parallel()
	m := NewMemFS()
	mkdirSynced(t, m, "/p-0")
	l, err := memTxnLog(t, m, 0)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, l, 40) // segments 0, 10, 20, 30
	newer := abortAt(t, l, 2, 31, 35)
	older := AbortedTxn{ProducerID: 1, FirstOffset: 2, LastOffset: 5, LastStableOffset: 6}
	mustAbort(t, l, older) // segment 0, below the last entry of the log
	if got := mustCollect(t, l, 0, math.MaxInt64); !reflect.DeepEqual(got, []AbortedTxn{older, newer}) {
		t.Fatalf("entries %+v, want the older one too", got)
	}
	// Inside one segment: 32 goes before 35.
	mid := AbortedTxn{ProducerID: 3, FirstOffset: 30, LastOffset: 32, LastStableOffset: 31}
	mustAbort(t, l, mid)
	want := []AbortedTxn{older, mid, newer}
	// Replays of any of them change nothing.
	for _, a := range want {
		mustAbort(t, l, a)
	}
	if got := mustCollect(t, l, 0, math.MaxInt64); !reflect.DeepEqual(got, want) {
		t.Fatalf("entries %+v, want %+v", got, want)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	m.Crash()
	l2, err := memTxnLog(t, m, l.LogEndOffset())
	if err != nil {
		t.Fatalf("reopen after the rewrite: %v", err)
	}
	t.Cleanup(func() { _ = l2.Close() })
	if got := mustCollect(t, l2, 0, math.MaxInt64); !reflect.DeepEqual(got, want) {
		t.Fatalf("after a crash %+v, want %+v", got, want)
	}
	if !fileExists(t, m, segPath("/p-0", 30, txnIndexSuffix)) || fileExists(t, m, segPath("/p-0", 30, txnIndexSuffix)+".tmp") {
		t.Fatal("segment 30's index not in place")
	}
}

// A rewrite of an index that fails fails the log, and the entries stay
// as they were.
func TestAppendAbortedTxnInsertFailureFailsLog(t *testing.T) {
	t.Parallel()
	m := NewMemFS()
	mkdirSynced(t, m, "/p-0")
	l, err := memTxnLog(t, m, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	fill(t, l, 10)
	last := abortAt(t, l, 2, 6, 8)
	m.SetInjector(func(op MemOp, name string) error {
		if op == MemOpRename {
			return syscall.EIO
		}
		return nil
	})
	err = l.AppendAbortedTxn(AbortedTxn{ProducerID: 1, FirstOffset: 1, LastOffset: 3, LastStableOffset: 4})
	if !errors.Is(err, ErrStorage) {
		t.Fatalf("insert = %v, want ErrStorage", err)
	}
	m.SetInjector(nil)
	if got := mustCollect(t, l, 0, math.MaxInt64); !reflect.DeepEqual(got, []AbortedTxn{last}) {
		t.Fatalf("entries %+v", got)
	}
	if _, err := l.AppendAsLeader(simpleBatch(1, 0), 0, -1); !errors.Is(err, ErrStorage) {
		t.Errorf("append after the failure = %v, want ErrStorage", err)
	}
}

// A read_committed fetch of a log without aborted transactions looks at
// no segment; the count of entries follows appends, truncation, retention
// and a reopen.
func TestCollectAbortedTxnsFastPath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, cfg := txnLog(t, dir)
	fill(t, l, 40)
	collect := func(want int) {
		t.Helper()
		before := l.txnScans.Load()
		got := mustCollect(t, l, l.LogStartOffset(), math.MaxInt64)
		if len(got) != want {
			t.Fatalf("collected %+v, want %d", got, want)
		}
		if scanned := l.txnScans.Load() > before; scanned != (want > 0) {
			t.Fatalf("scanned segments %v with %d entries", scanned, want)
		}
	}
	collect(0)
	abortAt(t, l, 1, 3, 5)
	abortAt(t, l, 2, 33, 35)
	collect(2)
	if err := l.TruncateTo(30); err != nil {
		t.Fatal(err)
	}
	collect(1)
	if _, err := l.IncrementLogStartOffset(20); err != nil {
		t.Fatal(err)
	}
	collect(0)
	fill(t, l, 10)
	abortAt(t, l, 3, 38, 39)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, cfg, 0)
	collect(1)
	if err := l.TruncateFullyAndStartAt(100); err != nil {
		t.Fatal(err)
	}
	collect(0)
}
