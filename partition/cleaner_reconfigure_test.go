package partition

import (
	"math"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/kafkazk/broker/logstore"
)

// TestCleanerReconfigure: log.cleaner.threads grows and shrinks without a
// restart, and a new log.cleaner.backoff.ms wakes a thread sleeping the
// old one (an hour here), which then cleans the dirty log at once.
func TestCleanerReconfigure(t *testing.T) {
	clock := &fakeClock{t: time.Unix(100000, 0)}
	cfg := compactConfig()
	cfg.MinCleanableDirtyRatio = 0.0001
	cc := CleanerConfig{Enable: true, Threads: 1, DedupeBufferSize: 1 << 20, Backoff: time.Hour}
	m := newCleanerManager(t, filepath.Join(t.TempDir(), "logs"), clock, cc, cfg)
	m.Start()
	live := func(n int) func() bool {
		return func() bool {
			m.cleaner.mu.Lock()
			defer m.cleaner.mu.Unlock()
			return m.cleaner.threadsLive == n
		}
	}
	waitFor(t, "one cleaner thread", live(1))
	// The thread found nothing to clean and sleeps its hour.
	time.Sleep(50 * time.Millisecond)
	want := produceKeyed(t, m, 0, 200, 5, 0, 1)
	time.Sleep(100 * time.Millisecond)
	if p := m.CleanerStatus().Passes; p != 0 {
		t.Fatalf("%d passes while the only thread sleeps its backoff", p)
	}
	cc.Threads, cc.Backoff = 3, 5*time.Millisecond
	m.ReconfigureCleaner(cc)
	waitFor(t, "three cleaner threads", live(3))
	waitFor(t, "a clean pass after the backoff change", func() bool { return m.CleanerStatus().Passes > 0 })
	waitFor(t, "the cleaned log", func() bool {
		r, _ := m.get(tp0)
		cr, err := r.log.Cleanable(m.cleaner.checkpoint(tp0), r.log.LogEndOffset(), clock.Now().UnixMilli(), 0)
		return err == nil && cr.CleanableBytes == 0
	})
	checkCompacted(t, "cleaned after reconfiguring", consumeAll(t, m), want, m.cleaner.checkpoint(tp0))
	cc.Threads, cc.DedupeBufferSize = 1, 2<<20
	m.ReconfigureCleaner(cc)
	waitFor(t, "back to one cleaner thread", live(1))
	if got, _ := m.cleaner.config(); got.Threads != 1 || got.DedupeBufferSize != 2<<20 || !got.Enable {
		t.Fatalf("config after reconfiguring %+v", got)
	}
	// Enable is not dynamic.
	cc.Enable = false
	m.ReconfigureCleaner(cc)
	if got, _ := m.cleaner.config(); !got.Enable {
		t.Fatal("ReconfigureCleaner turned the cleaner off")
	}
}

// TestCleanerThreadsShrinkThenGrow: a shrink followed at once by a grow
// leaves as many threads as configured. The thread being reconfigured away
// decides to exit and frees its id in one step under the cleaner's lock;
// when the two were apart, a grow in between found the id still taken,
// started nothing, and the exiting thread then left one thread short for
// good. (The window is narrow: under -race, as the targeted runs are,
// the old code failed within a few hundred iterations.)
func TestCleanerThreadsShrinkThenGrow(t *testing.T) {
	clock := &fakeClock{t: time.Unix(100000, 0)}
	cc := CleanerConfig{Enable: true, Threads: 2, DedupeBufferSize: 1 << 20, Backoff: time.Hour}
	m := newCleanerManager(t, filepath.Join(t.TempDir(), "logs"), clock, cc, compactConfig())
	m.Start()
	live := func() int {
		m.cleaner.mu.Lock()
		defer m.cleaner.mu.Unlock()
		return m.cleaner.threadsLive
	}
	waitFor(t, "two threads", func() bool { return live() == 2 })
	for i := 0; i < 1500; i++ {
		cc.Threads = 1
		m.ReconfigureCleaner(cc)
		// Give the second thread a varying head start on its exit.
		for spin := time.Now().Add(time.Duration(i%40) * 250 * time.Nanosecond); time.Now().Before(spin); {
			runtime.Gosched()
		}
		cc.Threads = 2
		m.ReconfigureCleaner(cc)
		// A thread reconfigured away is counted until its goroutine
		// ends, and a new one from when it begins: wait for 2 once.
		n := 0
		for deadline := time.Now().Add(time.Second); ; time.Sleep(100 * time.Microsecond) {
			if n = live(); n == 2 || time.Now().After(deadline) {
				break
			}
		}
		if n != 2 {
			t.Fatalf("iteration %d: %d cleaner threads live, want 2", i, n)
		}
	}
}

// TestCleanerKeepsExplicitZeros: log.cleaner.backoff.ms=0 and a
// log.cleaner.dedupe.buffer.size of 0 are taken as given, at construction
// and on reconfiguration, not replaced by the 15 s and 128 MiB defaults.
func TestCleanerKeepsExplicitZeros(t *testing.T) {
	clock := &fakeClock{t: time.Unix(100000, 0)}
	cc := CleanerConfig{Enable: true, Threads: 1, DedupeBufferSize: 0, Backoff: 0}
	m := newCleanerManager(t, filepath.Join(t.TempDir(), "logs"), clock, cc, compactConfig())
	if got, _ := m.cleaner.config(); got.Backoff != 0 || got.DedupeBufferSize != 0 {
		t.Fatalf("config at construction %+v, want backoff 0 and dedupe 0 kept", got)
	}
	m.ReconfigureCleaner(CleanerConfig{Threads: 1, DedupeBufferSize: 1 << 20, Backoff: time.Second})
	m.ReconfigureCleaner(CleanerConfig{Threads: 1, DedupeBufferSize: 0, Backoff: 0})
	if got, _ := m.cleaner.config(); got.Backoff != 0 || got.DedupeBufferSize != 0 {
		t.Fatalf("config after reconfiguring to zeros %+v", got)
	}
	if d := DefaultCleanerConfig(); d.Backoff != 15*time.Second || d.DedupeBufferSize != 128<<20 || d.Threads != 1 || !d.Enable {
		t.Fatalf("DefaultCleanerConfig %+v, want Kafka's defaults", d)
	}
}

// TestCleanerDedupeShareCapped: each thread's share of
// log.cleaner.dedupe.buffer.size is capped at Int.MaxValue bytes, as
// Kafka's LogCleaner sizes its offset maps, so that a huge value (Kafka
// accepts any long) does not make every thread allocate it.
func TestCleanerDedupeShareCapped(t *testing.T) {
	for _, tc := range []struct {
		size    int64
		threads int
		want    int64
	}{
		{128 << 20, 1, 128 << 20},
		{128 << 20, 2, 64 << 20},
		{math.MaxInt64, 1, math.MaxInt32},
		{math.MaxInt64, 8, math.MaxInt32},
		{8 << 30, 2, math.MaxInt32},
		{-1, 1, -1},
	} {
		cc := CleanerConfig{Threads: tc.threads, DedupeBufferSize: tc.size}
		if got := cc.dedupeShare(); got != tc.want {
			t.Errorf("share of %d over %d threads: %d, want %d", tc.size, tc.threads, got, tc.want)
		}
		if got := logstore.OffsetMapBytes(cc.dedupeShare()); got > math.MaxInt32 {
			t.Errorf("offset map of %d over %d threads: %d bytes, above Int.MaxValue", tc.size, tc.threads, got)
		}
	}
}
