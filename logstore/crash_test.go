package logstore

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/rs/zerolog"
)

// Crash tests. Goal: whatever point a power loss or a failed write or
// fsync interrupts a log at, the log opens again with the last durably
// written recovery-point checkpoint, nothing below that recovery point is
// lost (every batch below it reads back byte for byte), and its offsets
// are contiguous. Method: run a scripted produce-roll-checkpoint sequence
// (appends that roll segments, flushes, checkpoint writes, truncations,
// retention, close) on a MemFS, once for each file operation n of the
// sequence: crashing there (every operation from n on fails, then MemFS
// throws away everything unsynced, or only the unsynced directory
// changes, keeping every file's data as a kernel that wrote it all back),
// or failing just that operation and going on. The emulated replica manager does what Kafka's does: it
// checkpoints the recovery point now and then, right after a truncation
// (LogManager.truncateTo) and after Close, and takes the log offline at
// the first storage error, after one last retried flush and periodic
// checkpoint of RecoveryPoint() (which must then claim nothing more than
// is durable).

const (
	crashLogDir     = "/data/t-0"
	crashCheckpoint = "/data/" + RecoveryPointCheckpointFile
)

type crashRun struct {
	fs      *MemFS
	cfg     Config
	l       *Log
	epoch   int32
	ts      int64
	model   map[int64][]byte // base offset -> batch as stored, for acknowledged appends still in the log
	offline bool             // a storage error took the log offline: the script stops
	// checkpointOnTruncate: the caller checkpoints the recovery point
	// right after a truncation, as Kafka's LogManager.truncateTo does.
	// Without it, the checkpoint on disk may be above a truncation.
	checkpointOnTruncate bool
	// opts change crashConfig for the run and for verifyAfterCrash's
	// Open (each call makes what it needs, e.g. a FileCache, anew).
	opts []func(*Config)
}

// config is crashConfig on r.fs with r.opts applied.
func (r *crashRun) config() Config {
	cfg := crashConfig()
	cfg.FS = r.fs
	for _, o := range r.opts {
		o(&cfg)
	}
	return cfg
}

type crashStep struct {
	name string
	do   func(r *crashRun) error
}

func crashConfig() Config {
	cfg := DefaultConfig()
	cfg.Log = zerolog.Nop()
	cfg.SegmentBytes = 3 * int64(len(simpleBatch(2, 0))) // roll every 3 batches
	cfg.IndexIntervalBytes = 1
	cfg.NowMs = func() int64 { return 1 << 40 }
	return cfg
}

func appendSteps(n int) []crashStep {
	var steps []crashStep
	for range n {
		steps = append(steps, crashStep{"append", func(r *crashRun) error {
			r.ts++
			b := simpleBatch(2, r.ts)
			info, err := r.l.AppendAsLeader(b, r.epoch, -1)
			if err == nil {
				r.model[info.FirstOffset] = b // rewritten in place as stored
			}
			return err
		}})
	}
	return steps
}

func checkpointStep() crashStep {
	return crashStep{"checkpoint", (*crashRun).checkpoint}
}

func (r *crashRun) checkpoint() error {
	err := WriteOffsetCheckpointFS(r.fs, crashCheckpoint, []CheckpointEntry{{Topic: "t", Partition: 0, Offset: r.l.RecoveryPoint()}})
	if err != nil {
		// Kafka takes the log directory offline when a checkpoint fails.
		r.offline = true
	}
	return err
}

func truncateStep(offset int64) crashStep {
	return crashStep{fmt.Sprintf("truncate to %d", offset), func(r *crashRun) error {
		for base := range r.model {
			if base >= offset {
				delete(r.model, base)
			}
		}
		r.epoch++ // a new leader, as after a follower's truncation
		if err := r.l.TruncateTo(offset); err != nil || !r.checkpointOnTruncate {
			return err
		}
		return r.checkpoint()
	}}
}

// crashScript: segments of 3 batches of 2 offsets (0, 6, 12, ...).
func crashScript() []crashStep {
	var s []crashStep
	s = append(s, appendSteps(4)...) // [0,8), rolled at 6
	s = append(s, checkpointStep())
	s = append(s, appendSteps(3)...) // [8,14), rolled at 12
	s = append(s, crashStep{"flush", func(r *crashRun) error { return r.l.Flush() }}, checkpointStep())
	s = append(s, appendSteps(3)...) // [14,20), rolled at 18
	s = append(s, truncateStep(16))  // inside the active segment
	s = append(s, appendSteps(4)...) // [16,24), rolled at 18
	s = append(s, checkpointStep())
	s = append(s, truncateStep(8)) // into a flushed segment, below the recovery point
	s = append(s, appendSteps(5)...)
	s = append(s, checkpointStep())
	s = append(s, crashStep{"retention", func(r *crashRun) error {
		_, err := r.l.DeleteOldSegmentsBelow(math.MaxInt64, 12)
		for base := range r.model {
			if base < r.l.LogStartOffset() {
				delete(r.model, base)
			}
		}
		return err
	}}, checkpointStep())
	s = append(s, appendSteps(2)...)
	s = append(s, crashStep{"close", func(r *crashRun) error {
		if err := r.l.Close(); err != nil {
			return err
		}
		return r.checkpoint()
	}})
	return s
}

// runCrashScript runs the script on m with inject installed after the
// setup, and returns the run (its log closed).
func runCrashScript(t *testing.T, m *MemFS, checkpointOnTruncate bool, inject func(op MemOp, name string) error, opts ...func(*Config)) *crashRun {
	t.Helper()
	mkdirSynced(t, m, "/data")
	r := &crashRun{fs: m, model: map[int64][]byte{}, checkpointOnTruncate: checkpointOnTruncate, opts: opts}
	r.cfg = r.config()
	m.SetInjector(inject)
	l, err := Open(crashLogDir, r.cfg, 0)
	if err != nil {
		return r // nothing was acknowledged
	}
	r.l = l
	for _, step := range crashScript() {
		err := step.do(r)
		l.bg.Wait() // let the roll's background flush run, for a repeatable sequence
		if errors.Is(err, ErrStorage) && !r.offline {
			// A periodic flush and checkpoint may still run before the
			// log goes offline (partition's manager retries MaybeFlush
			// every second): the retried fsync reports success on MemFS,
			// as on Linux, yet the recovery point must not claim the
			// lost data.
			_ = r.l.Flush()
			_ = r.checkpoint()
			r.offline = true
		}
		if r.offline {
			break
		}
	}
	_ = l.Close() // stops the background flushes; a no-op if the script closed it
	return r
}

// verifyAfterCrash reopens the log with the recovery point from the
// durable checkpoint and checks the promises. It returns a description of
// the first broken one, or "".
func verifyAfterCrash(r *crashRun) string {
	rp := int64(0)
	entries, err := ReadOffsetCheckpointFS(r.fs, crashCheckpoint)
	if err != nil {
		return fmt.Sprintf("checkpoint unreadable after crash: %v", err)
	}
	if len(entries) == 1 {
		rp = entries[0].Offset
	}
	l, err := Open(crashLogDir, r.config(), rp)
	if err != nil {
		return fmt.Sprintf("Open with recovery point %d: %v", rp, err)
	}
	defer l.Close()
	// The log may end below rp: a truncation after the checkpoint may
	// have reached the disk. What it must keep is every acknowledged batch
	// below rp that was not truncated away (the model).
	bases := slices.Sorted(func(yield func(int64) bool) {
		for b := range r.model {
			if !yield(b) {
				return
			}
		}
	})
	for _, base := range bases {
		want := r.model[base]
		if base+2 > rp {
			continue
		}
		if base < l.LogStartOffset() {
			return fmt.Sprintf("batch %d below the recovery point %d lost: log starts at %d", base, rp, l.LogStartOffset())
		}
		got, err := l.Read(base, int32(len(want)), math.MaxInt64)
		if err != nil {
			return fmt.Sprintf("batch %d below the recovery point %d: %v", base, rp, err)
		}
		if !bytes.Equal(got[:min(len(got), len(want))], want) {
			return fmt.Sprintf("batch %d below the recovery point %d reads back different bytes", base, rp)
		}
	}
	next := l.LogStartOffset()
	for next < l.LogEndOffset() {
		b, err := l.Read(next, 1<<20, math.MaxInt64)
		if err != nil || len(b) == 0 {
			return fmt.Sprintf("read at %d of [%d, %d): %v", next, l.LogStartOffset(), l.LogEndOffset(), err)
		}
		it := NewBatchIter(b)
		for it.Next() {
			h := it.Header()
			if h.BaseOffset != next {
				return fmt.Sprintf("offsets not contiguous: batch at %d where %d was next", h.BaseOffset, next)
			}
			next = h.NextOffset()
		}
	}
	if _, err := l.AppendAsLeader(simpleBatch(1, 1), r.epoch+1, -1); err != nil {
		return fmt.Sprintf("append after reopening: %v", err)
	}
	return ""
}

func TestCrashAtEveryOperation(t *testing.T) {
	t.Parallel()
	for _, checkpointOnTruncate := range []bool{true, false} {
		t.Run(fmt.Sprintf("checkpointOnTruncate=%v", checkpointOnTruncate), func(t *testing.T) {
			t.Parallel()
			crashAtEveryOperation(t, checkpointOnTruncate)
		})
	}
}

// TestCrashAtEveryOperationWithFileCache is TestCrashAtEveryOperation with
// a FileCache of one descriptor, so that every segment's .log is closed
// (fsynced first when it has unsynced writes) and reopened all along.
func TestCrashAtEveryOperationWithFileCache(t *testing.T) {
	t.Parallel()
	crashAtEveryOperation(t, true, func(cfg *Config) { cfg.Files = NewFileCache(1) })
}

func crashAtEveryOperation(t *testing.T, checkpointOnTruncate bool, opts ...func(*Config)) {
	counter := NewMemFS()
	clean := runCrashScript(t, counter, checkpointOnTruncate, func(MemOp, string) error { return nil }, opts...)
	total := counter.Ops()
	if clean.offline || total < 50 {
		t.Fatalf("the script without faults went offline (%v) or did only %d operations", clean.offline, total)
	}
	counter.Crash()
	if msg := verifyAfterCrash(clean); msg != "" {
		t.Fatalf("without faults: %s", msg)
	}
	failures := 0
	for n := int64(1); n <= total && failures < 5; n++ {
		for _, mode := range []string{"crash", "crash keeping data", "fail"} {
			m := NewMemFS()
			var seen int64
			var what string
			r := runCrashScript(t, m, checkpointOnTruncate, func(op MemOp, name string) error {
				seen++
				switch {
				case mode != "fail" && seen >= n:
					if seen == n {
						what = op.String() + " " + name
					}
					return ErrInjected
				case mode == "fail" && seen == n:
					what = op.String() + " " + name
					return ErrInjected
				}
				return nil
			}, opts...)
			if mode == "crash keeping data" {
				m.CrashKeepingData()
			} else {
				m.Crash()
			}
			if msg := verifyAfterCrash(r); msg != "" {
				t.Errorf("%s at operation %d (%s): %s", mode, n, what, msg)
				failures++
			}
		}
	}
	t.Logf("%d operations, each crashed at and failed", total)
}

// TestCrashTornEarlierSegment: the power loss left more on disk than was
// synced, as a kernel's writeback can: the last segment whole, the one
// before it torn inside a batch, and the checkpoint at the start of the
// torn one. The log opens at the torn batch without the later segment.
func TestCrashTornEarlierSegment(t *testing.T) {
	t.Parallel()
	m := NewMemFS()
	r := openCrashRun(t, m)
	l := r.l
	for _, step := range appendSteps(4) { // segments 0 and 6
		if err := step.do(r); err != nil {
			t.Fatal(err)
		}
	}
	l.bg.Wait()
	if err := r.checkpoint(); err != nil || l.RecoveryPoint() != 6 {
		t.Fatalf("checkpoint at %d: %v", l.RecoveryPoint(), err)
	}
	for _, step := range appendSteps(4) { // [8,16): segment 6 full, 12 active
		if err := step.do(r); err != nil {
			t.Fatal(err)
		}
	}
	l.bg.Wait()
	torn := segmentFileName(crashLogDir, 6, logSuffix)
	m.CrashWith(func(name string, synced, current []byte) []byte {
		if name == torn {
			return current[:len(current)-20] // inside the batch at 10
		}
		return current
	})
	cfg := crashConfig()
	cfg.FS = m
	l3, err := Open(crashLogDir, cfg, 6)
	if err != nil {
		t.Fatalf("Open with a torn segment above the recovery point: %v", err)
	}
	defer l3.Close()
	if l3.LogEndOffset() != 10 || len(l3.segments) != 2 {
		t.Fatalf("LEO %d with %d segments, want 10 and 2", l3.LogEndOffset(), len(l3.segments))
	}
	for base := int64(0); base < 10; base += 2 {
		got, err := l3.Read(base, 1, math.MaxInt64)
		if err != nil || !bytes.Equal(got, r.model[base]) {
			t.Fatalf("batch %d after recovery: %v", base, err)
		}
	}
}

// TestOpenSyncsExistingDirParent: a partition directory that exists but
// whose parent was never fsynced (made by a run that crashed) is made
// durable by Open, so that the data fsynced into it survives a crash.
func TestOpenSyncsExistingDirParent(t *testing.T) {
	t.Parallel()
	m := NewMemFS()
	mkdirSynced(t, m, "/data")
	if err := m.MkdirAll(crashLogDir, 0o755); err != nil { // /data not synced
		t.Fatal(err)
	}
	cfg := crashConfig()
	cfg.FS = m
	l, err := Open(crashLogDir, cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, simpleBatch(2, 1))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	m.Crash()
	if _, err := m.ReadDir(crashLogDir); err != nil {
		t.Fatalf("log directory after a crash: %v", err)
	}
	l2, err := Open(crashLogDir, cfg, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if l2.LogEndOffset() != 2 {
		t.Fatalf("LEO %d after a clean close and a crash, want 2", l2.LogEndOffset())
	}
}
