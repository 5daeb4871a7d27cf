package partition

import (
	"path/filepath"
	"testing"
	"time"
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
