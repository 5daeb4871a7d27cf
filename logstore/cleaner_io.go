package logstore

import (
	"math"
	"path/filepath"
	"sync"
	"time"
)

// CleanerOffsetCheckpointFile is the per-log-directory file of the
// cleaner's position per partition (the first dirty offset), as in Kafka.
const CleanerOffsetCheckpointFile = "cleaner-offset-checkpoint"

// ReadCleanerOffsetCheckpoint reads logDir's cleaner-offset-checkpoint, in
// the offset checkpoint format (ReadOffsetCheckpointFS); a missing file is
// an empty checkpoint, and a partition absent from it is cleaned from its
// log start offset.
func ReadCleanerOffsetCheckpoint(fsys FS, logDir string) ([]CheckpointEntry, error) {
	return ReadOffsetCheckpointFS(orOS(fsys), filepath.Join(logDir, CleanerOffsetCheckpointFile))
}

// WriteCleanerOffsetCheckpoint replaces logDir's cleaner-offset-checkpoint
// atomically (WriteOffsetCheckpointFS) with entries, each partition's
// CleanStats.EndOffset.
func WriteCleanerOffsetCheckpoint(fsys FS, logDir string, entries []CheckpointEntry) error {
	return WriteOffsetCheckpointFS(orOS(fsys), filepath.Join(logDir, CleanerOffsetCheckpointFile), entries)
}

// throttleCheckInterval is how often RateThrottler measures, Kafka's
// Throttler checkIntervalMs.
const throttleCheckInterval = 100 * time.Millisecond

// RateThrottler is a Throttler holding its callers to a rate in bytes per
// second, as Kafka's Throttler does for log.cleaner.io.max.bytes.per.second:
// every 100 ms of observed I/O it compares the rate with the limit and
// sleeps off the excess. It is safe for concurrent use, so the cleaner
// threads of a broker can share one limit.
type RateThrottler struct {
	mu          sync.Mutex
	bytesPerSec float64
	now         func() time.Time
	sleep       func(time.Duration)
	periodStart time.Time
	observed    int64
}

// NewRateThrottler limits to bytesPerSecond; <= 0 or +Inf means no limit.
func NewRateThrottler(bytesPerSecond float64) *RateThrottler {
	return newRateThrottler(bytesPerSecond, time.Now, time.Sleep)
}

func newRateThrottler(bytesPerSecond float64, now func() time.Time, sleep func(time.Duration)) *RateThrottler {
	return &RateThrottler{bytesPerSec: bytesPerSecond, now: now, sleep: sleep, periodStart: now()}
}

// SetRate changes the limit (a dynamic broker config change).
func (t *RateThrottler) SetRate(bytesPerSecond float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.bytesPerSec = bytesPerSecond
}

// Throttle implements Throttler. The sleep happens with the throttler's
// lock held, so concurrent callers wait their turn, as in Kafka.
func (t *RateThrottler) Throttle(bytes int64) { t.throttle(bytes, nil) }

// throttle is Throttle with a wait that ends early when abort (if not nil)
// is closed.
func (t *RateThrottler) throttle(bytes int64, abort <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.bytesPerSec <= 0 || math.IsInf(t.bytesPerSec, 1) {
		return
	}
	t.observed += bytes
	now := t.now()
	elapsed := now.Sub(t.periodStart)
	if elapsed < throttleCheckInterval {
		return
	}
	want := time.Duration(float64(t.observed) / t.bytesPerSec * float64(time.Second))
	if want > elapsed {
		if abort == nil {
			t.sleep(want - elapsed)
		} else {
			timer := time.NewTimer(want - elapsed)
			select {
			case <-timer.C:
			case <-abort:
				timer.Stop()
			}
		}
		now = t.now()
	}
	t.periodStart, t.observed = now, 0
}
