package partition

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/internal/recordcodec"
	"github.com/kafkazk/broker/logstore"
)

// CleanerConfig is the log cleaner's broker configuration (log.cleaner.*).
// Every field is taken as given, zero included (log.cleaner.backoff.ms=0
// is a thread that never sleeps, as in Kafka); DefaultCleanerConfig has
// Kafka's defaults. Only Threads <= 0 is read as 1.
type CleanerConfig struct {
	// Enable is log.cleaner.enable: without it no log is cleaned and the
	// cleaner-offset-checkpoint files are left as they are.
	Enable bool
	// Threads is log.cleaner.threads (default 1).
	Threads int
	// DedupeBufferSize is log.cleaner.dedupe.buffer.size (default 128
	// MiB), divided among the threads: each has one offset map of
	// DedupeBufferSize / Threads, at most MaxDedupeBufferPerThread bytes
	// (Kafka's LogCleaner caps each share at Int.MaxValue), allocated at
	// its first pass. A share of 0 or less is the smallest map.
	DedupeBufferSize int64
	// IOMaxBytesPerSecond is log.cleaner.io.max.bytes.per.second, one
	// limit shared by every thread; <= 0 or +Inf means none.
	IOMaxBytesPerSecond float64
	// Backoff is log.cleaner.backoff.ms (default 15 s): how long a thread
	// sleeps when no log is cleanable; 0 does not sleep.
	Backoff time.Duration
}

// MaxDedupeBufferPerThread bounds one cleaner thread's offset map, as
// Kafka's LogCleaner sizes it min(dedupeBufferSize / numThreads,
// Int.MaxValue): a huge log.cleaner.dedupe.buffer.size (Kafka accepts
// any long) cannot make a thread allocate more.
const MaxDedupeBufferPerThread = math.MaxInt32

// DefaultCleanerConfig is Kafka's log cleaner defaults: enabled, one
// thread, a 128 MiB dedupe buffer, no I/O limit, a 15 s backoff.
func DefaultCleanerConfig() CleanerConfig {
	return CleanerConfig{Enable: true, Threads: 1, DedupeBufferSize: 128 << 20,
		IOMaxBytesPerSecond: math.Inf(1), Backoff: 15 * time.Second}
}

func (c CleanerConfig) withDefaults() CleanerConfig {
	if c.Threads <= 0 {
		c.Threads = 1
	}
	c.Backoff = max(c.Backoff, 0)
	return c
}

// dedupeShare is one thread's offset map budget.
func (c CleanerConfig) dedupeShare() int64 {
	return min(c.DedupeBufferSize/int64(max(c.Threads, 1)), MaxDedupeBufferPerThread)
}

// CleanerStatus is the cleaner's figures, Kafka's LogCleaner and
// LogCleanerManager gauges.
type CleanerStatus struct {
	// MaxDirtyPercent is 100 times the largest dirty ratio of the compacted
	// logs seen by the last scan (max-dirty-percent).
	MaxDirtyPercent int
	// RecopyPercent is 100 times the bytes written over the bytes read by
	// every thread's last pass (cleaner-recopy-percent).
	RecopyPercent int
	// MaxCleanTimeSecs is the longest of the threads' last passes
	// (max-clean-time-secs).
	MaxCleanTimeSecs int
	// MaxBufferUtilizationPercent is the largest offset map use of the
	// threads' last passes (max-buffer-utilization-percent).
	MaxBufferUtilizationPercent int
	// DeadThreadCount counts the cleaner threads that died (DeadThreadCount).
	DeadThreadCount int
	// Uncleanable counts, per log dir, the partitions a pass failed on
	// other than by an abort (uncleanable-partitions-count); they are not
	// cleaned again until deleted or the broker restarts.
	Uncleanable map[string]int
	// Passes counts the passes that completed since the start.
	Passes int64
}

// cleanerOffset is a partition's cleaner checkpoint: the first dirty offset
// and the log dir whose cleaner-offset-checkpoint holds it.
type cleanerOffset struct {
	logDir string
	offset int64
}

// cleaner is Kafka's LogCleaner with its LogCleanerManager: threads that
// repeatedly pick the dirtiest compacted log and run one Log.Clean pass
// over it, and the per-partition checkpoints, pauses and figures.
//
// cleaner.mu guards every field below it; it is held only briefly and
// never while calling into a Replica or a Log. cleaner.fileMu serializes
// the checkpoint file writes and is taken before cleaner.mu.
type cleaner struct {
	m *Manager
	// cfg.Enable is fixed at construction; the rest may change through
	// Manager.ReconfigureCleaner and is read under mu (config).
	cfg       CleanerConfig
	throttler *logstore.RateThrottler
	log       zerolog.Logger

	fileMu sync.Mutex

	mu          sync.Mutex
	offsets     map[cluster.TopicPartition]cleanerOffset
	running     map[cluster.TopicPartition]chan struct{} // closed when the pass ends
	paused      map[cluster.TopicPartition]int
	uncleanable map[cluster.TopicPartition]string // -> log dir
	// truncated is, per partition being cleaned, the lowest offset its
	// log was truncated to since the pass began: the pass's checkpoint
	// goes no higher (the records from there on were replaced).
	truncated map[cluster.TopicPartition]int64
	// aborts holds, per partition being cleaned, the channel that aborts
	// its pass (CleanConfig.Abort) until closed by abortLocked.
	aborts      map[cluster.TopicPartition]chan struct{}
	lastStats   []logstore.CleanStats // per thread
	dirtiest    float64
	dead        int
	passes      int64
	threadsLive int
	started     bool         // start ran: ReconfigureCleaner starts added threads
	threadIDs   map[int]bool // ids of the running threads
	// reconfigured is closed and replaced by ReconfigureCleaner, to wake
	// the threads sleeping their backoff.
	reconfigured chan struct{}
}

func newCleaner(m *Manager, cfg CleanerConfig) *cleaner {
	cfg = cfg.withDefaults()
	return &cleaner{
		m: m, cfg: cfg, throttler: logstore.NewRateThrottler(cfg.IOMaxBytesPerSecond),
		log:         m.log.With().Str("component", "log-cleaner").Logger(),
		offsets:     map[cluster.TopicPartition]cleanerOffset{},
		running:     map[cluster.TopicPartition]chan struct{}{},
		paused:      map[cluster.TopicPartition]int{},
		uncleanable: map[cluster.TopicPartition]string{},
		truncated:   map[cluster.TopicPartition]int64{},
		aborts:      map[cluster.TopicPartition]chan struct{}{},
		lastStats:   make([]logstore.CleanStats, cfg.Threads),
		threadIDs:   map[int]bool{},

		reconfigured: make(chan struct{}),
	}
}

// readCheckpoints loads dir's cleaner-offset-checkpoint; an entry whose
// partition directory is gone is dropped, as Kafka's LogManager does.
// Caller is NewManager (no concurrency yet).
func (c *cleaner) readCheckpoints(dir string) error {
	entries, err := logstore.ReadCleanerOffsetCheckpoint(nil, dir)
	if err != nil {
		return fmt.Errorf("read %s in %s: %w", logstore.CleanerOffsetCheckpointFile, dir, err)
	}
	for _, e := range entries {
		tp := cluster.TopicPartition{Topic: e.Topic, Partition: e.Partition}
		if _, err := os.Stat(filepath.Join(dir, partitionDirName(tp))); err != nil {
			continue
		}
		c.offsets[tp] = cleanerOffset{logDir: dir, offset: e.Offset}
	}
	return nil
}

// writeCheckpoints rewrites the cleaner-offset-checkpoint of each of dirs
// (every log dir when dirs is empty). Nothing is written with the cleaner
// disabled, as Kafka has no cleaner then.
func (c *cleaner) writeCheckpoints(dirs ...string) {
	if !c.cfg.Enable {
		return
	}
	if len(dirs) == 0 {
		for _, d := range c.m.cfg.LogDirs {
			dirs = append(dirs, filepath.Clean(d))
		}
	}
	c.fileMu.Lock()
	defer c.fileMu.Unlock()
	for _, dir := range dirs {
		var es []logstore.CheckpointEntry
		c.mu.Lock()
		for tp, o := range c.offsets {
			if o.logDir == dir {
				es = append(es, logstore.CheckpointEntry{Topic: tp.Topic, Partition: tp.Partition, Offset: o.offset})
			}
		}
		c.mu.Unlock()
		sort.Slice(es, func(i, j int) bool {
			if es[i].Topic != es[j].Topic {
				return es[i].Topic < es[j].Topic
			}
			return es[i].Partition < es[j].Partition
		})
		if err := logstore.WriteCleanerOffsetCheckpoint(nil, dir, es); err != nil {
			c.log.Error().Err(err).Str("dir", dir).Msg("write cleaner offset checkpoint")
		}
	}
}

// start runs the cleaner threads through the Manager's goFunc; each ends
// when the Manager stops.
func (c *cleaner) start() {
	if !c.cfg.Enable {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.started = true
	c.startThreadsLocked()
}

// startThreadsLocked starts the threads of ids below cfg.Threads that
// are not running. Caller holds c.mu.
func (c *cleaner) startThreadsLocked() {
	for id := range c.cfg.Threads {
		if c.threadIDs[id] {
			continue
		}
		c.threadIDs[id] = true
		if !c.m.goFunc(func() { c.thread(id) }) {
			delete(c.threadIDs, id)
		}
	}
}

// config returns the cleaner's current configuration and the channel
// closed at its next change.
func (c *cleaner) config() (CleanerConfig, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg, c.reconfigured
}

// ReconfigureCleaner applies new log.cleaner.* settings without a
// restart, as Kafka's LogCleaner.reconfigure (for log.cleaner.threads,
// .dedupe.buffer.size, .io.max.bytes.per.second and .backoff.ms; Kafka's
// .io.buffer.size and .io.buffer.load.factor are fixed here): the I/O limit applies to the
// bytes that follow, a thread sleeps the new backoff from its next sleep,
// takes the new share of the dedupe buffer at its next pass, and the
// thread count grows at once or shrinks as threads beyond it finish their
// pass. Enable (log.cleaner.enable) is not dynamic and is kept. With the
// cleaner disabled only the settings are recorded.
func (m *Manager) ReconfigureCleaner(cfg CleanerConfig) {
	c := m.cleaner
	cfg = cfg.withDefaults()
	c.throttler.SetRate(cfg.IOMaxBytesPerSecond)
	c.mu.Lock()
	defer c.mu.Unlock()
	cfg.Enable = c.cfg.Enable
	if cfg == c.cfg {
		return
	}
	// Field by field: Enable is read without c.mu.
	c.cfg.Threads, c.cfg.DedupeBufferSize = cfg.Threads, cfg.DedupeBufferSize
	c.cfg.IOMaxBytesPerSecond, c.cfg.Backoff = cfg.IOMaxBytesPerSecond, cfg.Backoff
	close(c.reconfigured)
	c.reconfigured = make(chan struct{})
	for len(c.lastStats) < cfg.Threads {
		c.lastStats = append(c.lastStats, logstore.CleanStats{})
	}
	c.log.Info().Int("threads", cfg.Threads).Int64("dedupe_buffer_size", cfg.DedupeBufferSize).
		Float64("io_max_bytes_per_second", cfg.IOMaxBytesPerSecond).Dur("backoff", cfg.Backoff).
		Msg("log cleaner reconfigured")
	if c.cfg.Enable && c.started {
		c.startThreadsLocked()
	}
}

// thread is Kafka's CleanerThread: clean the dirtiest log, or sleep
// log.cleaner.backoff.ms when none is cleanable. A panic kills the thread
// (logged, and counted in DeadThreadCount) but not the broker, as an
// unexpected exception kills a Kafka cleaner thread.
func (c *cleaner) thread(id int) {
	c.mu.Lock()
	c.threadsLive++
	c.mu.Unlock()
	// released: this thread gave up its id itself (reconfigured away),
	// under c.mu in the same step as it saw the smaller count, so that a
	// ReconfigureCleaner growing the count again either finds the id
	// still taken (and this thread goes on) or free (and starts a new
	// one); the deferred cleanup must not free the id again, it may be
	// the new thread's.
	released := false
	defer func() {
		rec := recover()
		c.mu.Lock()
		if !released {
			delete(c.threadIDs, id)
		}
		c.threadsLive--
		if rec != nil {
			c.dead++
		}
		c.mu.Unlock()
		if rec != nil {
			c.log.Error().Int("thread", id).Interface("panic", rec).Msg("log cleaner thread died")
		}
	}()
	// The map is allocated at the first pass, so that a broker with no
	// compacted log to clean does not hold it.
	var om *logstore.OffsetMap
	var backoff *time.Timer
	for {
		select {
		case <-c.m.stop:
			return
		default:
		}
		c.mu.Lock()
		cfg, reconfigured := c.cfg, c.reconfigured
		if id >= cfg.Threads {
			c.lastStats[id] = logstore.CleanStats{} // a thread reconfigured away
			delete(c.threadIDs, id)
			released = true
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		if c.cleanOnce(id, &om) {
			continue
		}
		if backoff == nil {
			backoff = time.NewTimer(cfg.Backoff)
			defer backoff.Stop()
		} else {
			backoff.Reset(cfg.Backoff)
		}
		select {
		case <-c.m.stop:
			return
		case <-backoff.C:
		case <-reconfigured:
		}
	}
}

// toClean is a log chosen for a pass (Kafka's LogToClean).
type toClean struct {
	r       *Replica
	cfg     cluster.LogConfig
	upper   int64 // the LSO, min(HW, first unstable offset): Kafka cleans below it
	first   int64
	ratio   float64
	logDir  string
	running chan struct{}
	abort   chan struct{} // closed to abort the pass
}

// grabFilthiest is Kafka's grabFilthiestCompactedLog: among the replicas
// whose cleanup.policy includes compact, not paused, being cleaned or
// uncleanable, the one with the largest dirty ratio that passes
// min.cleanable.dirty.ratio, or has a dirty record older than
// max.compaction.lag.ms. It marks the one returned as being cleaned.
func (c *cleaner) grabFilthiest(now time.Time) *toClean {
	nowMs := now.UnixMilli()
	var best *toClean
	dirtiest := 0.0
	for _, r := range c.m.all() {
		r.mu.Lock()
		// Kafka cleans below the last stable offset (at most the HW):
		// the outcome of a transaction above it is not known yet.
		cfg, hw, closed := r.cfg, r.lsoLocked(), r.closed
		r.mu.Unlock()
		if closed || !cfg.Compact {
			continue
		}
		tp := r.tp
		logDir := filepath.Dir(r.dir)
		c.mu.Lock()
		skip := c.running[tp] != nil || c.paused[tp] > 0 || c.uncleanable[tp] != ""
		c.mu.Unlock()
		if skip {
			// A running pass takes its partition's truncations when it
			// ends (noteTruncation keeps them for it in any case).
			continue
		}
		c.noteTruncation(r)
		c.mu.Lock()
		o, ok := c.offsets[tp]
		c.mu.Unlock()
		if !ok {
			o = cleanerOffset{logDir: logDir, offset: -1} // from the log start
		}
		cr, err := r.log.Cleanable(o.offset, hw, nowMs, cfg.MinCompactionLagMs)
		if err != nil {
			continue // closed meanwhile
		}
		if cr.CleanBytes+cr.CleanableBytes == 0 {
			continue
		}
		if cr.FirstUncleanableOffset <= cr.FirstDirtyOffset {
			// Nothing between the first dirty offset and the bound (the
			// LSO inside the segment the last pass stopped at): Kafka's
			// cleanable range is then empty, and a pass would find
			// nothing, again and again.
			continue
		}
		dirtiest = max(dirtiest, cr.DirtyRatio)
		// Kafka's maxCompactionDelay: the first dirty batch waited longer
		// than max.compaction.lag.ms.
		needNow := cr.FirstDirtyTimestampMs > 0 && cr.FirstDirtyTimestampMs < nowMs-max(cfg.MaxCompactionLagMs, 0)
		if !(needNow && cr.CleanableBytes > 0) && !(cr.DirtyRatio > cfg.MinCleanableDirtyRatio) {
			continue
		}
		if best == nil || cr.DirtyRatio > best.ratio {
			best = &toClean{r: r, cfg: cfg, upper: hw, first: cr.FirstDirtyOffset, ratio: cr.DirtyRatio, logDir: logDir}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dirtiest = dirtiest
	if best == nil {
		return nil
	}
	tp := best.r.tp
	if c.running[tp] != nil || c.paused[tp] > 0 || !c.m.replicaIs(tp, best.r) {
		return nil // paused or replaced since the scan; the next one sees it
	}
	select {
	case <-c.m.stop:
		return nil // Close aborted the passes (abortAll, after m.stop): start none
	default:
	}
	best.running = make(chan struct{})
	c.running[tp] = best.running
	best.abort = make(chan struct{})
	c.aborts[tp] = best.abort
	return best
}

// cleanOnce runs one pass over the dirtiest log, if any, with thread id's
// offset map (*om, allocated of log.cleaner.dedupe.buffer.size / threads
// if nil); it reports whether a log was cleaned (so the thread looks
// again at once rather than backing off).
func (c *cleaner) cleanOnce(id int, om **logstore.OffsetMap) bool {
	now := c.m.cfg.Now()
	lc := c.grabFilthiest(now)
	if lc == nil {
		return false
	}
	cfg, _ := c.config()
	if share := cfg.dedupeShare(); *om == nil || (*om).Bytes() != logstore.OffsetMapBytes(share) {
		*om = logstore.NewOffsetMap(share)
	}
	r := lc.r
	stats, err := r.log.Clean(logstore.CleanConfig{
		FirstDirtyOffset:   lc.first,
		UpperOffset:        lc.upper,
		NowMs:              now.UnixMilli(),
		MinCompactionLagMs: lc.cfg.MinCompactionLagMs,
		DeleteRetentionMs:  lc.cfg.DeleteRetentionMs,
		Map:                *om,
		Codec:              recordcodec.Codecs{},
		Throttler:          c.throttler,
		Abort:              lc.abort,
	})
	return c.finishPass(id, lc, stats, err)
}

// finishPass records the outcome of thread id's pass lc: its checkpoint,
// stats or uncleanable mark, and writes the checkpoint file. It reports
// whether the pass completed.
func (c *cleaner) finishPass(id int, lc *toClean, stats logstore.CleanStats, err error) bool {
	r, tp := lc.r, lc.r.tp
	trunc := r.cleanTruncatedTo.Swap(math.MaxInt64)
	c.mu.Lock()
	if t, ok := c.truncated[tp]; ok {
		trunc = min(trunc, t)
		delete(c.truncated, tp)
	}
	delete(c.running, tp)
	delete(c.aborts, tp)
	close(lc.running)
	// Kafka's maybeTruncateCheckpoint: the records from a truncation
	// point on were replaced and are dirty again, whatever the pass did.
	c.lowerCheckpointLocked(tp, trunc)
	// A pause (stop or deletion) waited for this pass: its checkpoint is
	// the stopper's to keep or drop.
	stillHere := c.paused[tp] == 0 && c.m.replicaIs(tp, r)
	switch {
	case err == nil:
		c.lastStats[id] = stats
		c.passes++
		if stillHere {
			c.offsets[tp] = cleanerOffset{logDir: lc.logDir, offset: min(stats.EndOffset, trunc)}
		}
	case errors.Is(err, logstore.ErrCleanAborted), errors.Is(err, logstore.ErrClosed):
		// The log was truncated, retention ran or it closed under the
		// pass: nothing was replaced by the group in progress, so the
		// next scan may simply pick it again.
	default:
		if stillHere {
			c.uncleanable[tp] = lc.logDir
		}
	}
	c.mu.Unlock()
	logger := r.logger.With().Int("thread", id).Logger()
	switch {
	case err == nil:
		logger.Debug().Int64("first_dirty_offset", stats.FirstDirtyOffset).Int64("end_offset", stats.EndOffset).
			Float64("dirty_ratio", lc.ratio).Dur("elapsed", stats.Elapsed).Bool("map_full", stats.MapFull).Msg("log cleaned")
		if stillHere {
			c.writeCheckpoints(lc.logDir)
		}
		return true
	case errors.Is(err, logstore.ErrCleanAborted), errors.Is(err, logstore.ErrClosed):
		logger.Info().Err(err).Msg("log cleaning aborted, retried later")
		return false
	default:
		logger.Error().Err(err).Msg("log cleaning failed; the partition is uncleanable until deleted or the broker restarts")
		if errors.Is(err, logstore.ErrStorage) {
			c.m.noteIOError(r.dir, err) // the log failed: its dir goes offline (logdir.go)
		}
		return false
	}
}

// noteTruncation takes the truncation of r's log recorded since the
// cleaner last looked (by truncateLocked, in r.cleanTruncatedTo) into the
// cleaner's state, keyed by partition so that it outlives r: a partition
// being cleaned keeps it for its pass's end (finishPass), any other has
// its checkpoint lowered to it now and the checkpoint file rewritten.
func (c *cleaner) noteTruncation(r *Replica) {
	trunc := r.cleanTruncatedTo.Swap(math.MaxInt64)
	if trunc == math.MaxInt64 {
		return
	}
	c.mu.Lock()
	if c.running[r.tp] != nil {
		if t, ok := c.truncated[r.tp]; !ok || trunc < t {
			c.truncated[r.tp] = trunc
		}
		c.mu.Unlock()
		return
	}
	o, lowered := c.offsets[r.tp], c.lowerCheckpointLocked(r.tp, trunc)
	c.mu.Unlock()
	if lowered {
		c.writeCheckpoints(o.logDir)
	}
}

// lowerCheckpointLocked lowers tp's checkpoint, if it has one, to trunc;
// it reports whether it did. Caller holds c.mu.
func (c *cleaner) lowerCheckpointLocked(tp cluster.TopicPartition, trunc int64) bool {
	o, ok := c.offsets[tp]
	if !ok || trunc >= o.offset {
		return false
	}
	o.offset = trunc
	c.offsets[tp] = o
	return true
}

// pause keeps tp from being cleaned until resume, and aborts a pass of it
// in progress and waits for it to end (Kafka's abortAndPauseCleaning): the
// pass stops at its next batch or throttle wait with ErrCleanAborted.
func (c *cleaner) pause(tp cluster.TopicPartition) {
	c.mu.Lock()
	c.paused[tp]++
	c.abortLocked(tp)
	ch := c.running[tp]
	c.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

// abortLocked aborts tp's pass in progress, if any. Caller holds c.mu.
func (c *cleaner) abortLocked(tp cluster.TopicPartition) {
	if ch := c.aborts[tp]; ch != nil {
		close(ch)
		delete(c.aborts, tp)
	}
}

// abortAll aborts every pass in progress (Close); the threads see the
// Manager stopping and start no other.
func (c *cleaner) abortAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for tp := range c.aborts {
		c.abortLocked(tp)
	}
}

func (c *cleaner) resume(tp cluster.TopicPartition) {
	c.mu.Lock()
	if c.paused[tp]--; c.paused[tp] <= 0 {
		delete(c.paused, tp)
	}
	c.mu.Unlock()
}

// forget drops tp's checkpoint and uncleanable mark (a deleted partition)
// and rewrites the checkpoint file that held it. Caller paused tp.
func (c *cleaner) forget(tp cluster.TopicPartition) {
	c.mu.Lock()
	o, ok := c.offsets[tp]
	delete(c.offsets, tp)
	delete(c.uncleanable, tp)
	c.mu.Unlock()
	if ok {
		c.writeCheckpoints(o.logDir)
	}
}

// checkpoint is tp's cleaner checkpoint, -1 if none (clean from the start).
func (c *cleaner) checkpoint(tp cluster.TopicPartition) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if o, ok := c.offsets[tp]; ok {
		return o.offset
	}
	return -1
}

// status returns the cleaner's figures.
func (c *cleaner) status() CleanerStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := CleanerStatus{MaxDirtyPercent: int(100 * c.dirtiest), DeadThreadCount: c.dead, Passes: c.passes,
		Uncleanable: map[string]int{}}
	var read, written int64
	for _, s := range c.lastStats {
		read += s.BytesRead
		written += s.BytesWritten
		st.MaxCleanTimeSecs = max(st.MaxCleanTimeSecs, int(s.Elapsed/time.Second))
		st.MaxBufferUtilizationPercent = max(st.MaxBufferUtilizationPercent, int(100*s.MapUtilization))
	}
	st.RecopyPercent = int(100 * float64(written) / float64(max(read, 1)))
	for _, dir := range c.m.cfg.LogDirs {
		st.Uncleanable[filepath.Clean(dir)] = 0
	}
	for _, dir := range c.uncleanable {
		st.Uncleanable[dir]++
	}
	return st
}

// CleanerStatus returns the log cleaner's figures (Kafka's LogCleaner and
// LogCleanerManager gauges).
func (m *Manager) CleanerStatus() CleanerStatus { return m.cleaner.status() }

// replicaIs reports whether r is tp's open replica.
func (m *Manager) replicaIs(tp cluster.TopicPartition, r *Replica) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.replicas[tp] == r
}

// dirtyRatio is what the cleaner's scan would compute for r now: its
// dirty ratio, and whether its cleanup.policy includes compact.
func (m *Manager) dirtyRatio(r *Replica, now time.Time) (float64, bool) {
	r.mu.Lock()
	cfg, hw := r.cfg, r.lsoLocked()
	r.mu.Unlock()
	if !cfg.Compact {
		return 0, false
	}
	cr, err := r.log.Cleanable(m.cleaner.checkpoint(r.tp), hw, now.UnixMilli(), cfg.MinCompactionLagMs)
	if err != nil {
		return 0, true
	}
	return cr.DirtyRatio, true
}
