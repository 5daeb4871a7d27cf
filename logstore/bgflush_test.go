package logstore

import (
	"errors"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// Tests of the background flush of rolled segments, and of truncation's
// crash ordering, on MemFS.

// syncBlocker holds the first File.Sync of one file (a MemFS sync waiter)
// until released, as a slow fsync of a large segment.
type syncBlocker struct {
	blocked     chan struct{} // closed once that Sync is held
	release     chan struct{}
	once, rOnce sync.Once
}

func blockFirstSync(m *MemFS, name string) *syncBlocker {
	b := &syncBlocker{blocked: make(chan struct{}), release: make(chan struct{})}
	m.SetSyncWaiter(func(op MemOp, n string) {
		if op != MemOpSync || n != name {
			return
		}
		first := false
		b.once.Do(func() { first = true; close(b.blocked) })
		if first {
			<-b.release
		}
	})
	return b
}

func (b *syncBlocker) waitBlocked(t *testing.T) {
	t.Helper()
	select {
	case <-b.blocked:
	case <-time.After(10 * time.Second):
		t.Fatal("the background flush never reached the blocked fsync")
	}
}

func (b *syncBlocker) unblock() { b.rOnce.Do(func() { close(b.release) }) }

func goErr(f func() error) chan error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	return done
}

// newCrashRun opens a log on a fresh MemFS for a hand-driven crash test.
func newCrashRun(t *testing.T) *crashRun {
	t.Helper()
	m := NewMemFS()
	mkdirSynced(t, m, "/data")
	return openCrashRun(t, m)
}

// openCrashRun opens a log on m for a hand-driven crash test.
func openCrashRun(t *testing.T, m *MemFS) *crashRun {
	t.Helper()
	r := &crashRun{fs: m, cfg: crashConfig(), model: map[int64][]byte{}}
	r.cfg.FS = m
	l, err := Open(crashLogDir, r.cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	r.l = l
	return r
}

func (r *crashRun) mustAppend(t *testing.T, n int) {
	t.Helper()
	for _, step := range appendSteps(n) {
		if err := step.do(r); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTruncateBelowRecoveryPointCrashKeepingData: TruncateTo into a
// segment below the recovery point, crashed at each of its file
// operations on a file system that persisted the file changes made so
// far but not the directory's (ext4 and XFS can: a truncation may reach
// the journal before the unlinks). The log must never open with a hole
// between the cut segment and the later ones coming back.
func TestTruncateBelowRecoveryPointCrashKeepingData(t *testing.T) {
	t.Parallel()
	setup := func(t *testing.T) *crashRun {
		r := newCrashRun(t)
		r.mustAppend(t, 7) // [0,14): segments 0, 6, 12 (active)
		r.l.bg.Wait()
		if err := r.checkpoint(); err != nil || r.l.RecoveryPoint() != 12 {
			t.Fatalf("checkpoint of recovery point %d: %v", r.l.RecoveryPoint(), err)
		}
		return r
	}
	truncate := truncateStep(4) // into segment 0, at a batch boundary
	counter := setup(t)
	before := counter.fs.Ops()
	if err := truncate.do(counter); err != nil {
		t.Fatal(err)
	}
	ops := counter.fs.Ops() - before
	_ = counter.l.Close()
	for n := int64(1); n <= ops+1; n++ {
		r := setup(t)
		var seen int64
		r.fs.SetInjector(func(MemOp, string) error {
			if seen++; seen >= n {
				return ErrInjected
			}
			return nil
		})
		_ = truncate.do(r)
		r.fs.CrashKeepingData()
		if msg := verifyAfterCrash(r); msg != "" {
			t.Errorf("crash at operation %d of %d of the truncation, keeping file data: %s", n, ops, msg)
		}
		_ = r.l.Close()
	}
}

// TestOpenTrustedSegmentEndingShort: a segment below the recovery point
// whose data ends before the next segment begins is not trusted as it
// is: Open cuts the log there instead of opening with a hole.
func TestOpenTrustedSegmentEndingShort(t *testing.T) {
	t.Parallel()
	r := newCrashRun(t)
	r.mustAppend(t, 7) // segments 0, 6, 12 (active)
	if err := r.l.Close(); err != nil {
		t.Fatal(err)
	}
	seg0 := segmentFileName(crashLogDir, 0, logSuffix)
	data, err := r.fs.ReadFile(seg0)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.fs.WriteFile(seg0, data[:2*len(simpleBatch(2, 0))]); err != nil { // [0,4)
		t.Fatal(err)
	}
	cfg := crashConfig()
	cfg.FS = r.fs
	l, err := Open(crashLogDir, cfg, 14)
	if err != nil {
		return // refusing to open is safe too
	}
	defer l.Close()
	if l.LogEndOffset() != 4 || len(l.segments) != 1 {
		t.Fatalf("opened with LEO %d and %d segments, want 4 and 1 (a hole at [4,6) otherwise)", l.LogEndOffset(), len(l.segments))
	}
}

// TestBackgroundFlushDoesNotStallWriters: while the background flush of
// a rolled segment is in its fsync, appends, a truncation inside the
// active segment, IncrementLogStartOffset that deletes nothing, and
// retention of segments below the recovery point all go on.
func TestBackgroundFlushDoesNotStallWriters(t *testing.T) {
	t.Parallel()
	r := newCrashRun(t)
	r.mustAppend(t, 7) // segments 0, 6, 12 (active)
	r.l.bg.Wait()
	if rp := r.l.RecoveryPoint(); rp != 12 {
		t.Fatalf("recovery point %d, want 12", rp)
	}
	b := blockFirstSync(r.fs, segmentFileName(crashLogDir, 12, logSuffix))
	defer b.unblock()
	r.mustAppend(t, 3) // 14, 16, then 18 rolls: the flush of segment 12 blocks
	b.waitBlocked(t)
	l := r.l
	steps := []struct {
		name string
		do   func() error
	}{
		{"append", func() error { _, err := l.AppendAsLeader(simpleBatch(2, 100), 1, -1); return err }}, // [20,22)
		{"truncate inside the active segment", func() error { return l.TruncateTo(20) }},
		{"IncrementLogStartOffset deleting nothing", func() error { _, err := l.IncrementLogStartOffset(1); return err }},
		{"retention below the recovery point", func() error {
			n, err := l.DeleteOldSegmentsBelow(math.MaxInt64, 6)
			if err == nil && n != 1 {
				err = errors.New("deleted no segment")
			}
			return err
		}},
	}
	for _, s := range steps {
		done := goErr(s.do)
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
		case <-time.After(2 * time.Second):
			t.Errorf("%s waits for the background fsync of a rolled segment", s.name)
			b.unblock()
			<-done
			return
		}
	}
	b.unblock()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 6 || l.LogEndOffset() != 20 || l.RecoveryPoint() != 20 {
		t.Fatalf("log [%d, %d) with recovery point %d after close, want [6, 20) and 20", l.LogStartOffset(), l.LogEndOffset(), l.RecoveryPoint())
	}
}

// flusherGoroutines counts the goroutines in the background flusher.
func flusherGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "logstore.(*Log).flushRolled(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestRollsDuringSlowFlushShareOneFlusher: rolls while the background
// flush is in a slow fsync start no more goroutines (they would only
// queue behind it), and once the fsync returns the one flusher flushes
// up to the last roll.
func TestRollsDuringSlowFlushShareOneFlusher(t *testing.T) { // not parallel: counts goroutines
	r := newCrashRun(t)
	b := blockFirstSync(r.fs, segmentFileName(crashLogDir, 0, logSuffix))
	defer b.unblock()
	r.mustAppend(t, 31) // rolls at 6, 12, ..., 60
	b.waitBlocked(t)
	if n := flusherGoroutines(); n > 1 {
		t.Errorf("%d background flusher goroutines after 10 rolls during one fsync, want 1", n)
	}
	b.unblock()
	deadline := time.Now().Add(10 * time.Second)
	for r.l.RecoveryPoint() < 60 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if rp := r.l.RecoveryPoint(); rp != 60 {
		t.Fatalf("recovery point %d after the slow fsync returned, want 60 (the last roll)", rp)
	}
	if err := r.l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := flusherGoroutines(); n != 0 {
		t.Fatalf("%d flusher goroutines after Close", n)
	}
}

// TestCrashDuringBackgroundFlush: writers run while the background flush
// of a rolled segment is held in its fsync (retention, a truncation below
// the recovery point, appends, Close), and the power fails at several
// points of it. The log reopens from the durable checkpoint with nothing
// below its recovery point lost and contiguous offsets.
func TestCrashDuringBackgroundFlush(t *testing.T) {
	t.Parallel()
	for _, crashAt := range []string{"blocked", "close while blocked", "after truncation", "after appends", "after close"} {
		t.Run(crashAt, func(t *testing.T) {
			t.Parallel()
			r := newCrashRun(t)
			r.mustAppend(t, 7) // segments 0, 6, 12 (active)
			r.l.bg.Wait()
			if err := r.checkpoint(); err != nil {
				t.Fatal(err)
			}
			b := blockFirstSync(r.fs, segmentFileName(crashLogDir, 12, logSuffix))
			defer b.unblock()
			r.mustAppend(t, 3) // roll at 18: the flush of segment 12 blocks
			b.waitBlocked(t)
			retention := goErr(func() error {
				_, err := r.l.DeleteOldSegmentsBelow(math.MaxInt64, 6) // segment 0, below the recovery point
				return err
			})
			select {
			case err := <-retention:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("retention below the recovery point waits for the background fsync")
			}
			for base := range r.model {
				if base < r.l.LogStartOffset() {
					delete(r.model, base)
				}
			}
			if err := r.checkpoint(); err != nil {
				t.Fatal(err)
			}
			// Below the recovery point (12): waits for the flush.
			truncated := goErr(func() error { return truncateStep(8).do(r) })
			crash := func() {
				// The process dies with the machine: nothing it still
				// does reaches the disk.
				r.fs.Crash()
				r.fs.SetInjector(func(MemOp, string) error { return ErrInjected })
				b.unblock()
				<-truncated
				_ = r.l.Close()
				r.fs.SetInjector(nil)
			}
			switch crashAt {
			case "blocked":
				crash()
			case "close while blocked":
				// Close queues behind the truncation and the flush; once
				// the fsync returns, all three finish in order.
				closing := goErr(r.l.Close)
				time.Sleep(10 * time.Millisecond)
				b.unblock()
				if err := <-truncated; err != nil && !errors.Is(err, ErrClosed) {
					t.Fatal(err)
				}
				if err := <-closing; err != nil {
					t.Fatal(err)
				}
				if rp, leo := r.l.RecoveryPoint(), r.l.LogEndOffset(); rp != leo {
					t.Fatalf("recovery point %d after Close, LEO %d", rp, leo)
				}
				if err := r.checkpoint(); err != nil {
					t.Fatal(err)
				}
				r.fs.Crash()
			default:
				b.unblock()
				if err := <-truncated; err != nil {
					t.Fatal(err)
				}
				if crashAt != "after truncation" {
					r.mustAppend(t, 5) // [8,18): rolls at 12
					if crashAt == "after close" {
						if err := r.l.Close(); err != nil {
							t.Fatal(err)
						}
						if err := r.checkpoint(); err != nil {
							t.Fatal(err)
						}
					}
				}
				r.fs.Crash()
				_ = r.l.Close()
			}
			if msg := verifyAfterCrash(r); msg != "" {
				t.Fatal(msg)
			}
		})
	}
}
