package logstore

import (
	"errors"
	"sync/atomic"
	"syscall"
	"testing"
)

// totalOpen is the number of files of every kind c has open.
func (c *countFS) totalOpen() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.open {
		n += v
	}
	return n
}

// TestDescriptorShortageShedsFileCache: with a FileCache as large as the
// process's whole descriptor budget (no headroom at all), the index and
// transaction index opens of flushes, rolls, Close and a clean-shutdown
// Open find EMFILE; each sheds idle .log descriptors from the cache and
// retries, so no operation fails and the log never goes offline
// (ErrStorage), where one EMFILE failed it.
func TestDescriptorShortageShedsFileCache(t *testing.T) {
	t.Parallel()
	const limit = 2
	mem := NewMemFS()
	mkdirSynced(t, mem, "/data")
	cfs := newCountFS(mem)
	cache := NewFileCache(limit)
	cfg := testConfig(t)
	cfg.FS = cfs
	cfg.Files = cache
	cfg.SegmentBytes = 300 // 3 batches
	a, err := Open("/data/a-0", cfg, 0)
	mustNoError(t)(err)
	b, err := Open("/data/b-0", cfg, 0)
	mustNoError(t)(err)
	mustAppend(t, a, simpleBatch(2, 1000))
	mustAppend(t, b, simpleBatch(2, 1000))
	var shortages atomic.Int64
	cfs.SetFailOpen(func(string, int) error {
		if cfs.totalOpen() >= limit {
			shortages.Add(1)
			return syscall.EMFILE
		}
		return nil
	})
	if n := cache.OpenFiles(); n != limit {
		t.Fatalf("%d .log descriptors open, want the cache full (%d)", n, limit)
	}
	mustNoError(t)(a.AppendAbortedTxn(AbortedTxn{ProducerID: 1, FirstOffset: 0, LastOffset: 1}))
	for i := range 7 { // two rolls of a, each creating index files
		mustAppend(t, a, simpleBatch(2, int64(1001+i)))
		mustAppend(t, b, simpleBatch(2, int64(1001+i)))
	}
	mustNoError(t)(a.Flush())
	mustNoError(t)(b.Flush())
	mustNoError(t)(a.Close())
	mustNoError(t)(b.Close())
	if shortages.Load() == 0 {
		t.Fatal("no open met EMFILE: the test does not test the shortage")
	}
	cfg.CleanShutdown = true
	a2, err := Open("/data/a-0", cfg, a.RecoveryPoint())
	mustNoError(t)(err)
	defer a2.Close()
	if len(a2.segments) != 3 || len(a2.segments[0].txns) != 1 || a2.LogEndOffset() != 16 {
		t.Fatalf("reopened: %d segments, %d aborted txns in the first, log end %d; want 3, 1, 16", len(a2.segments), len(a2.segments[0].txns), a2.LogEndOffset())
	}
	t.Logf("%d opens met EMFILE", shortages.Load())
}

// TestDescriptorShortageRetried: without a FileCache, an open that meets
// a brief EMFILE or ENFILE is retried and succeeds; a shortage that
// outlasts the retries fails the operation with the error (a
// transaction index write then fails the log, ErrStorage), after
// 1+fdRetries tries.
func TestDescriptorShortageRetried(t *testing.T) {
	t.Parallel()
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE} {
		mem := NewMemFS()
		mkdirSynced(t, mem, "/data")
		cfs := newCountFS(mem)
		cfg := testConfig(t)
		cfg.FS = cfs
		l, err := Open("/data/t-0", cfg, 0)
		mustNoError(t)(err)
		mustAppend(t, l, simpleBatch(4, 1000))
		var fails, tries atomic.Int64
		cfs.SetFailOpen(func(string, int) error {
			tries.Add(1)
			if fails.Add(-1) >= 0 {
				return errno
			}
			return nil
		})
		fails.Store(fdRetries) // the last retry succeeds
		mustNoError(t)(l.AppendAbortedTxn(AbortedTxn{ProducerID: 1, FirstOffset: 0, LastOffset: 1}))
		if got := tries.Load(); got != 1+fdRetries {
			t.Errorf("%v: %d tries, want %d", errno, got, 1+fdRetries)
		}
		tries.Store(0)
		fails.Store(1 << 30) // never over
		err = l.AppendAbortedTxn(AbortedTxn{ProducerID: 2, FirstOffset: 2, LastOffset: 3})
		if !errors.Is(err, ErrStorage) || !errors.Is(err, errno) {
			t.Errorf("%v: AppendAbortedTxn during a lasting shortage = %v, want ErrStorage wrapping it", errno, err)
		}
		if got := tries.Load(); got != 1+fdRetries {
			t.Errorf("%v: %d tries during a lasting shortage, want %d", errno, got, 1+fdRetries)
		}
		_ = l.Close()
	}
}
