package logstore

import (
	"errors"
	"strings"
	"testing"
)

var errInjected = errors.New("injected")

// TestCloseTwiceAfterFailedClose: a Close whose flush failed returns the
// failure, and so does every later Close, so a caller that closes again
// (a retry, a deferred Close) cannot take the second nil for a clean
// shutdown and write the clean-shutdown marker.
func TestCloseTwiceAfterFailedClose(t *testing.T) {
	t.Parallel()
	mem := NewMemFS()
	mkdirSynced(t, mem, "/data")
	cfg := testConfig(t)
	cfg.FS = mem
	l, err := Open("/data/t-0", cfg, 0)
	mustNoError(t)(err)
	mustAppend(t, l, simpleBatch(2, 1000))
	mem.SetInjector(func(op MemOp, name string) error {
		if op == MemOpSync {
			return errInjected
		}
		return nil
	})
	first := l.Close()
	if !errors.Is(first, ErrStorage) || !errors.Is(first, errInjected) {
		t.Fatalf("Close with a failing fsync = %v, want ErrStorage wrapping the injected error", first)
	}
	mem.SetInjector(nil)
	for i := range 2 {
		if err := l.Close(); err == nil || err.Error() != first.Error() {
			t.Errorf("Close %d after a failed Close = %v, want the first error %v", i+2, err, first)
		}
	}
}

// TestCloseAfterFailedFullTruncation: a TruncateFullyAndStartAt that
// cannot create the new segment leaves the log closed (it has no
// segments); Close then returns that failure, not nil.
func TestCloseAfterFailedFullTruncation(t *testing.T) {
	t.Parallel()
	mem := NewMemFS()
	mkdirSynced(t, mem, "/data")
	cfg := testConfig(t)
	cfg.FS = mem
	l, err := Open("/data/t-0", cfg, 0)
	mustNoError(t)(err)
	mustAppend(t, l, simpleBatch(2, 1000))
	mem.SetInjector(func(op MemOp, name string) error {
		if op == MemOpCreate && strings.HasSuffix(name, logSuffix) {
			return errInjected
		}
		return nil
	})
	if err := l.TruncateFullyAndStartAt(100); !errors.Is(err, errInjected) {
		t.Fatalf("TruncateFullyAndStartAt with a failing create = %v, want the injected error", err)
	}
	mem.SetInjector(nil)
	if _, err := l.AppendAsLeader(simpleBatch(1, 1001), 0, -1); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after the failed full truncation = %v, want ErrClosed", err)
	}
	for i := range 2 {
		if err := l.Close(); !errors.Is(err, errInjected) {
			t.Errorf("Close %d after a failed full truncation = %v, want its error", i+1, err)
		}
	}
}

// TestCloseWithNothingPendingOpensNoIndex: Close persists only what is
// pending: a log reopened after a clean shutdown and closed again at once
// opens no index, time index or transaction index file, while a Close
// after appends, a roll and an aborted transaction opens the active
// segment's two indexes (and nothing of the rolled one, whose indexes
// the roll's flush wrote).
func TestCloseWithNothingPendingOpensNoIndex(t *testing.T) {
	t.Parallel()
	mem := NewMemFS()
	mkdirSynced(t, mem, "/data")
	cfs := newCountFS(mem)
	cfg := testConfig(t)
	cfg.FS = cfs
	cfg.Files = NewFileCache(4)
	cfg.SegmentBytes = 300 // 3 batches
	const dir = "/data/t-0"
	l, err := Open(dir, cfg, 0)
	mustNoError(t)(err)
	for i := range 5 {
		mustAppend(t, l, simpleBatch(2, int64(1000+i)))
	}
	mustNoError(t)(l.AppendAbortedTxn(AbortedTxn{ProducerID: 1, FirstOffset: 6, LastOffset: 7}))
	l.bg.Wait()
	indexOpens := func() int {
		return cfs.Opens(indexSuffix) + cfs.Opens(timeIndexSuffix) + cfs.Opens(txnIndexSuffix)
	}
	before := indexOpens()
	mustNoError(t)(l.Close())
	// The active segment's .index, .timeindex and (unsynced) .txnindex.
	if got := indexOpens() - before; got != 3 {
		t.Errorf("Close after appends opened %d index files, want 3 (the active segment's)", got)
	}
	cfg.CleanShutdown = true
	l2, err := Open(dir, cfg, l.RecoveryPoint())
	mustNoError(t)(err)
	before = indexOpens()
	mustNoError(t)(l2.Close())
	if got := indexOpens() - before; got != 0 {
		t.Errorf("Close with nothing pending opened %d index files, want 0", got)
	}
}
