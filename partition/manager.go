package partition

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/logstore"
)

// Config configures a Manager.
type Config struct {
	BrokerID int32
	LogDirs  []string
	// HighWatermarkCheckpointInterval is replica.high.watermark.checkpoint.interval.ms.
	HighWatermarkCheckpointInterval time.Duration
	// RecoveryPointCheckpointInterval is log.flush.offset.checkpoint.interval.ms.
	RecoveryPointCheckpointInterval time.Duration
	// RetentionCheckInterval is log.retention.check.interval.ms.
	RetentionCheckInterval time.Duration
	Log                    zerolog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	// ReplicaLagTimeMax is replica.lag.time.max.ms: an ISR follower that
	// has not caught up to the leader's LEO for longer is removed. Zero
	// means Kafka 2.5+'s default, 30 s.
	ReplicaLagTimeMax time.Duration
	// ReplicaFetchWaitMax is replica.fetch.wait.max.ms (default 500 ms).
	ReplicaFetchWaitMax time.Duration
	// ReplicaFetchMinBytes is replica.fetch.min.bytes (default 1).
	ReplicaFetchMinBytes int32
	// ReplicaFetchMaxBytes is replica.fetch.max.bytes, per partition
	// (default 1 MiB).
	ReplicaFetchMaxBytes int32
	// ReplicaFetchResponseMaxBytes is replica.fetch.response.max.bytes
	// (default 10 MiB).
	ReplicaFetchResponseMaxBytes int32
	// ReplicaFetchBackoff is replica.fetch.backoff.ms (default 1 s): the
	// pause after a failed fetch round or a partition error.
	ReplicaFetchBackoff time.Duration
	// LeaderClient fetches from leaders for the partitions this broker
	// follows. Nil means no replication (single-broker tests).
	LeaderClient LeaderClient
	// StateWriter publishes ISR changes. Nil means the ISR never changes
	// (a leader must not change it without ZooKeeper knowing).
	StateWriter StateWriter
	// Metrics receives ISR changes and bytes in and out; nil discards them.
	Metrics Metrics
	// TxnVerification is transaction.partition.verification.enable
	// (KIP-890): a transactional batch of a producer with no ongoing
	// transaction on the partition needs the verification guard of
	// TxnVerificationGuard. The zero value is off; the caller sets
	// Kafka's default (true).
	TxnVerification bool
	// RecoveryThreadsPerDataDir is num.recovery.threads.per.data.dir
	// (Kafka's default 1; <= 0 means 1): the logs one
	// BecomeLeaderOrFollower opens are opened by that many goroutines per
	// log dir, which live only for the call.
	RecoveryThreadsPerDataDir int
	// Files is the broker's bounded cache of open .log descriptors,
	// shared by every log (logstore.Config.Files); nil holds each
	// segment's .log open.
	Files *logstore.FileCache
	// logFS, set by tests, is the file system of the logs
	// (logstore.Config.FS); the Manager's own files stay on the OS's.
	logFS logstore.FS
	// Cleaner configures the log cleaner (log.cleaner.*); the zero value
	// has it disabled, with DefaultCleanerConfig's other settings. Any
	// other value is taken as given (see CleanerConfig).
	Cleaner CleanerConfig
}

// withDefaults fills zero replication settings with Kafka's defaults.
func (c Config) withDefaults() Config {
	if c.Cleaner == (CleanerConfig{}) {
		c.Cleaner = DefaultCleanerConfig()
		c.Cleaner.Enable = false
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Metrics == nil {
		c.Metrics = noMetrics{}
	}
	if c.ReplicaLagTimeMax <= 0 {
		c.ReplicaLagTimeMax = 30 * time.Second
	}
	if c.ReplicaFetchWaitMax <= 0 {
		c.ReplicaFetchWaitMax = 500 * time.Millisecond
	}
	if c.ReplicaFetchMinBytes <= 0 {
		c.ReplicaFetchMinBytes = 1
	}
	if c.ReplicaFetchMaxBytes <= 0 {
		c.ReplicaFetchMaxBytes = 1 << 20
	}
	if c.ReplicaFetchResponseMaxBytes <= 0 {
		c.ReplicaFetchResponseMaxBytes = 10 << 20
	}
	if c.ReplicaFetchBackoff <= 0 {
		c.ReplicaFetchBackoff = time.Second
	}
	return c
}

// Manager owns every replica this broker holds. It implements the
// protocol's Replicas interface.
type Manager struct {
	cfg Config
	log zerolog.Logger

	mu       sync.RWMutex
	replicas map[cluster.TopicPartition]*Replica
	// saved holds the checkpointed offsets of the partitions this broker
	// has a log of but no open replica: read from the checkpoint files at
	// start, and taken from a replica stopped without delete. Every
	// checkpoint writes them back beside the open replicas' own, as
	// Kafka's LogManager checkpoints every log it holds, so a stopped
	// replica keeps its HW, recovery point and log start across a
	// restart. A replica takes its entry when it opens.
	saved map[cluster.TopicPartition]savedOffsets
	// opening holds the partitions whose log is being opened, outside mu.
	opening map[cluster.TopicPartition]*opening
	closed  bool
	// openHook, when set by a test, runs before a replica's log opens;
	// openWaitHook before a getOrOpen waits for another's open of tp.
	openHook     func(tp cluster.TopicPartition)
	openWaitHook func(tp cluster.TopicPartition)

	// checkpointMu serializes writeCheckpoints: the background task and
	// DeleteRecords both write the checkpoint files.
	checkpointMu sync.Mutex

	// notifies counts notifyChanged calls, for tests.
	notifies  atomic.Int64
	changedMu sync.Mutex
	changed   chan struct{} // see Changed: for followers' fetches
	visible   chan struct{} // for consumers' fetches

	// fetchMu guards the fetchers (one per leader broker) and whether
	// their goroutines may run.
	fetchMu     sync.Mutex
	fetchers    map[int32]*fetcher
	started     bool
	fetchClosed bool

	// produceWaits counts the WaitCommitted calls in progress.
	produceWaits atomic.Int64

	ctx    context.Context // cancelled by Close: ends fetches and ISR writes
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// goMu guards goClosed: once Close has begun, goFunc starts nothing.
	goMu     sync.Mutex
	goClosed bool
	// isrWrites counts the ISR expansion writes running on their own
	// goroutine (Read does not wait for them); tests wait on it.
	isrWrites sync.WaitGroup
	stop      chan struct{}
	once      sync.Once

	// dirs knows which log dir holds each partition directory and how
	// many each holds (dirFor).
	dirs *dirLayout
	// cleanDirs are the log dirs where NewManager found the clean-shutdown
	// marker; cleanOpened the partitions whose log has opened since, so
	// that only a log's first open trusts the marker (see cleanOpen).
	// Both guarded by cleanMu.
	cleanMu     sync.Mutex
	cleanDirs   map[string]bool
	cleanOpened map[cluster.TopicPartition]bool

	// recoveryThreads is Config.RecoveryThreadsPerDataDir, as
	// SetRecoveryThreadsPerDataDir last set it.
	recoveryThreads atomic.Int32

	// cleaner is the log cleaner: its threads, checkpoints and figures.
	cleaner *cleaner

	// leaderQuota and followerQuota are the replication throttles
	// (throttle.go).
	leaderQuota, followerQuota replicationQuota

	// logDirs holds the offline log dirs and their partitions (logdir.go).
	logDirs logDirState

	// shuttingDown: BeginShutdown was called.
	shuttingDown atomic.Bool
}

// BeginShutdown tells the Manager that the broker is stopping (its
// controlled shutdown is about to start): from then on a StopReplica
// without delete stops the replica's fetching but leaves its log open, and
// Close closes it with every other log (one sync of each log dir's file
// system) instead of the stop flushing it as it arrives. Kafka's
// LogManager keeps such a log open as well.
func (m *Manager) BeginShutdown() {
	m.shuttingDown.Store(true)
}

// goFunc runs f on a goroutine counted in m.wg, unless Close has begun;
// it reports whether f runs.
func (m *Manager) goFunc(f func()) bool {
	m.goMu.Lock()
	defer m.goMu.Unlock()
	if m.goClosed {
		return false
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		f()
	}()
	return true
}

// savedOffsets are the checkpointed offsets of a partition without an
// open replica, and the log dir whose checkpoint files hold them.
type savedOffsets struct {
	logDir                      string // filepath.Clean of a Config.LogDirs entry
	hw, recoveryPoint, logStart int64
}

// NewManager reads the checkpoint files of every log dir. Replicas are
// opened when their partition state arrives (ApplyPartitionStates).
func NewManager(cfg Config) (*Manager, error) {
	if len(cfg.LogDirs) == 0 {
		return nil, errors.New("partition: no log dirs")
	}
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{
		cfg: cfg, log: cfg.Log, ctx: ctx, cancel: cancel,
		fetchers: map[int32]*fetcher{},
		replicas: map[cluster.TopicPartition]*Replica{},
		saved:    map[cluster.TopicPartition]savedOffsets{},
		opening:  map[cluster.TopicPartition]*opening{},
		changed:  make(chan struct{}),
		visible:  make(chan struct{}),
		stop:     make(chan struct{}),

		cleanDirs:   map[string]bool{},
		cleanOpened: map[cluster.TopicPartition]bool{},
	}
	m.cleaner = newCleaner(m, cfg.Cleaner)
	m.SetRecoveryThreadsPerDataDir(cfg.RecoveryThreadsPerDataDir)
	// Unlimited until SetReplicationQuotas.
	m.leaderQuota.bound.Store(math.MaxInt64)
	m.followerQuota.bound.Store(math.MaxInt64)
	m.dirs = newDirLayout(cfg.LogDirs)
	for _, dir := range cfg.LogDirs {
		dir = filepath.Clean(dir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create log dir %s: %w", dir, err)
		}
		// One listing per log dir finds every partition directory: the
		// checkpoint entries below and dirFor's counts use it, rather
		// than a stat per entry and a listing per new partition.
		if err := m.dirs.scan(dir); err != nil {
			return nil, err
		}
		clean, err := takeCleanShutdownMarker(dir)
		if err != nil {
			return nil, err
		}
		if clean {
			m.cleanDirs[dir] = true
		}
		if err := m.cleaner.readCheckpoints(dir); err != nil {
			return nil, err
		}
		for _, f := range []struct {
			name string
			set  func(o *savedOffsets, off int64)
		}{
			{logstore.ReplicationCheckpointFile, func(o *savedOffsets, off int64) { o.hw = off }},
			{logstore.RecoveryPointCheckpointFile, func(o *savedOffsets, off int64) { o.recoveryPoint = off }},
			{logstore.LogStartOffsetCheckpointFile, func(o *savedOffsets, off int64) { o.logStart = off }},
		} {
			entries, err := logstore.ReadOffsetCheckpoint(filepath.Join(dir, f.name))
			if err != nil {
				return nil, fmt.Errorf("read %s in %s: %w", f.name, dir, err)
			}
			for _, e := range entries {
				tp := cluster.TopicPartition{Topic: e.Topic, Partition: e.Partition}
				// An entry without its partition directory is of a log
				// deleted meanwhile: Kafka's LogManager drops it too. A
				// stat that failed otherwise (EIO) keeps it (logdir.go).
				if !m.dirs.holds(dir, tp) && !mayHoldPartition(dir, tp) {
					continue
				}
				o := m.saved[tp]
				o.logDir = dir
				f.set(&o, e.Offset)
				m.saved[tp] = o
			}
		}
	}
	return m, nil
}

// Start runs the background duties (flush by time, retention, the HW and
// recovery-point checkpoints), ISR expiration on its own goroutine, the
// fetchers and, with log.cleaner.enable, the log cleaner threads.
func (m *Manager) Start() {
	m.fetchMu.Lock()
	m.started = true
	if !m.fetchClosed {
		m.startFetchersLocked()
	}
	m.fetchMu.Unlock()
	m.goFunc(m.background)
	m.goFunc(m.isrExpiration)
	m.cleaner.start()
}

// isrExpiration is Kafka's isr-expiration task, every
// replica.lag.time.max.ms / 2. It runs apart from background because its
// writes wait on ZooKeeper (up to isrWriteTimeout in an outage), which
// must not hold up flushes, retention and checkpoints.
func (m *Manager) isrExpiration() {
	tick := time.NewTicker(m.cfg.ReplicaLagTimeMax / 2)
	defer tick.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-tick.C:
			m.MaybeShrinkIsr(m.cfg.Now())
		}
	}
}

func (m *Manager) background() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	now := m.cfg.Now()
	lastHW, lastRecovery, lastRetention := now, now, now
	for {
		select {
		case <-m.stop:
			return
		case <-tick.C:
		}
		now = m.cfg.Now()
		for _, r := range m.all() {
			if err := r.log.MaybeFlush(now.UnixMilli()); err != nil {
				r.logger.Error().Err(err).Msg("flush")
				m.noteIOError(r.dir, err)
			}
		}
		if now.Sub(lastRetention) >= m.cfg.RetentionCheckInterval {
			lastRetention = now
			for _, r := range m.all() {
				if n, err := r.applyRetention(now.UnixMilli()); err != nil {
					r.logger.Error().Err(err).Msg("retention")
					m.noteIOError(r.dir, err)
				} else if n > 0 {
					r.logger.Info().Int("segments", n).Int64("log_start_offset", r.log.LogStartOffset()).Msg("retention deleted segments")
				}
			}
		}
		if now.Sub(lastHW) >= m.cfg.HighWatermarkCheckpointInterval {
			lastHW = now
			m.writeCheckpoints(false)
		}
		if now.Sub(lastRecovery) >= m.cfg.RecoveryPointCheckpointInterval {
			lastRecovery = now
			m.writeCheckpoints(true)
		}
	}
}

// writeCheckpoints writes the HW checkpoint (and with recovery, the
// producer state snapshots and the recovery-point and log-start
// checkpoints) of every log dir: each file once per log dir, holding every
// partition of the dir.
func (m *Manager) writeCheckpoints(recovery bool) {
	m.checkpointMu.Lock()
	defer m.checkpointMu.Unlock()
	m.writeCheckpointsLocked(recovery, recovery, nil)
}

// writeCheckpointsLocked is writeCheckpoints, the producer snapshots only
// with snapshots; it returns the first error of each log dir whose files
// could not all be written. Caller holds checkpointMu.
func (m *Manager) writeCheckpointsLocked(recovery, snapshots bool, skip map[string]bool) map[string]error {
	if snapshots {
		// Producer state snapshots go with the recovery checkpoint: both
		// bound how much of the log a restart must read.
		for _, r := range m.all() {
			r.mu.Lock()
			var err error
			if !r.closed && r.storageErr == nil { // a failed replica's state may be false
				err = r.writeProducerSnapshotLocked()
			}
			r.mu.Unlock()
			if err != nil {
				r.logger.Error().Err(err).Msg("producer state snapshot")
				m.noteIOError(r.dir, err)
			}
		}
	}
	type entries struct {
		hw, rp, ls []logstore.CheckpointEntry
		// replicas and their recovery points in rp, noted as
		// checkpointed once the file is written
		replicas []*Replica
		rps      []int64
	}
	byDir := map[string]*entries{}
	for _, dir := range m.OnlineLogDirs() { // an offline dir is written no more
		if !skip[dir] {
			byDir[dir] = &entries{}
		}
	}
	add := func(tp cluster.TopicPartition, logDir string, hw, rp, ls int64) {
		e := byDir[logDir]
		if e == nil {
			return
		}
		e.hw = append(e.hw, logstore.CheckpointEntry{Topic: tp.Topic, Partition: tp.Partition, Offset: hw})
		e.rp = append(e.rp, logstore.CheckpointEntry{Topic: tp.Topic, Partition: tp.Partition, Offset: rp})
		e.ls = append(e.ls, logstore.CheckpointEntry{Topic: tp.Topic, Partition: tp.Partition, Offset: ls})
	}
	m.mu.RLock()
	for tp, r := range m.replicas {
		hw, rp, ls := r.snapshot()
		add(tp, filepath.Dir(r.dir), hw, rp, ls)
		if e := byDir[filepath.Dir(r.dir)]; e != nil {
			e.replicas, e.rps = append(e.replicas, r), append(e.rps, rp)
		}
	}
	for tp, o := range m.saved {
		if m.replicas[tp] == nil {
			add(tp, o.logDir, o.hw, o.recoveryPoint, o.logStart)
		}
	}
	m.mu.RUnlock()
	failed := map[string]error{}
	for dir, e := range byDir {
		type checkpointFile struct {
			name string
			es   []logstore.CheckpointEntry
		}
		files := []checkpointFile{{logstore.ReplicationCheckpointFile, e.hw}}
		if recovery {
			files = append(files, checkpointFile{logstore.RecoveryPointCheckpointFile, e.rp},
				checkpointFile{logstore.LogStartOffsetCheckpointFile, e.ls})
		}
		for _, f := range files {
			sort.Slice(f.es, func(i, j int) bool {
				if f.es[i].Topic != f.es[j].Topic {
					return f.es[i].Topic < f.es[j].Topic
				}
				return f.es[i].Partition < f.es[j].Partition
			})
			if err := logstore.WriteOffsetCheckpoint(filepath.Join(dir, f.name), f.es); err != nil {
				m.log.Error().Err(err).Str("dir", dir).Str("file", f.name).Msg("write checkpoint")
				m.noteIOError(dir, err)
				if failed[dir] == nil {
					failed[dir] = fmt.Errorf("write %s in %s: %w", f.name, dir, err)
				}
			} else if f.name == logstore.RecoveryPointCheckpointFile {
				for i, r := range e.replicas {
					r.checkpointedRP.Store(e.rps[i])
				}
			}
		}
	}
	return failed
}

func (m *Manager) all() []*Replica {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]*Replica, 0, len(m.replicas))
	for _, r := range m.replicas {
		out = append(out, r)
	}
	return out
}

// notifyChanged wakes the long-polling fetches w names.
func (m *Manager) notifyChanged(w wake) {
	m.notifies.Add(1)
	m.changedMu.Lock()
	if w&wakeFollowers != 0 {
		close(m.changed)
		m.changed = make(chan struct{})
	}
	if w&wakeConsumers != 0 {
		close(m.visible)
		m.visible = make(chan struct{})
	}
	m.changedMu.Unlock()
}

// Changed returns a channel closed the next time a replica changes in a
// way a fetch of this kind could see. For a follower's fetch (replica
// true): new records below a leader's LEO, or any change of state. For a
// consumer's: new records below the HW, or any change of state; not a
// leader's LEO moving alone (records appended but not yet replicated), so
// that an acks=all append wakes consumers once, when its HW moves.
func (m *Manager) Changed(replica bool) <-chan struct{} {
	m.changedMu.Lock()
	defer m.changedMu.Unlock()
	if replica {
		return m.changed
	}
	return m.visible
}

// partitionDirName is Kafka's directory name for a partition: <topic>-<partition>.
func partitionDirName(tp cluster.TopicPartition) string {
	return tp.Topic + "-" + strconv.Itoa(int(tp.Partition))
}

// ApplyPartitionStates opens replicas this broker does not hold yet and
// hands every replica its new state; see BecomeLeaderOrFollower.
func (m *Manager) ApplyPartitionStates(states []PartitionState) error {
	results := m.BecomeLeaderOrFollower(states)
	var errs []error
	for _, st := range states {
		if err := results[st.TopicPartition].Err; err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Transition is what BecomeLeaderOrFollower did with one partition state,
// so that what follows a partition's role (the group coordinator's load
// and unload) can follow what the replica applied rather than what the
// request said.
type Transition struct {
	// Err is why the state could not be applied (the log did not open,
	// the replica or the Manager closed); the other fields are then zero.
	Err error
	// Applied is false when the state was ignored as stale: an older
	// leader epoch, or an older zkVersion in the same epoch.
	Applied bool
	// Role and LeaderEpoch are the replica's once the state was applied.
	Role        Role
	LeaderEpoch int32
	// NewEpoch is set when the leader or the leader epoch changed, not
	// only the assignment, ISR or zkVersion.
	NewEpoch bool
}

// errManagerClosed is returned for a partition state that arrives, or a
// replica whose open finishes, after Close.
var errManagerClosed = errors.New("partition: manager closed")

// opening is a replica whose log is being opened (recovery, fsync) outside
// Manager.mu, so that lookups of other partitions go on meanwhile. Who
// wants the same partition waits for done; err is set before done closes.
type opening struct {
	done chan struct{}
	err  error
}

// getOrOpen returns tp's replica, opening its log if this broker holds
// none. The log opens without Manager.mu: a placeholder in m.opening makes
// a concurrent open of the same partition wait for this one and share its
// replica, and StopReplicas and Close wait for it.
func (m *Manager) getOrOpen(st PartitionState) (*Replica, error) {
	tp := st.TopicPartition
	for {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return nil, errManagerClosed
		}
		if r := m.replicas[tp]; r != nil {
			m.mu.Unlock()
			return r, nil
		}
		if op := m.opening[tp]; op != nil {
			m.mu.Unlock()
			if m.openWaitHook != nil {
				m.openWaitHook(tp)
			}
			<-op.done
			if op.err != nil {
				return nil, op.err
			}
			continue // in the map now, unless stopped meanwhile
		}
		op := &opening{done: make(chan struct{})}
		m.opening[tp] = op
		saved := m.saved[tp]
		m.mu.Unlock()
		return m.open(st, op, saved, m.dirs.dirFor(tp))
	}
}

// open opens tp's log in the partition directory dir (dirFor's) for
// getOrOpen or BecomeLeaderOrFollower, which placed op, and installs the
// replica. Caller does not hold m.mu.
func (m *Manager) open(st PartitionState, op *opening, saved savedOffsets, dir string) (*Replica, error) {
	tp := st.TopicPartition
	defer close(op.done)
	if m.openHook != nil {
		m.openHook(tp)
	}
	dir, err := m.logDirFor(st, dir)
	var r *Replica
	if err == nil {
		base := logstore.Config{Files: m.cfg.Files, FS: m.cfg.logFS, CleanShutdown: m.cleanOpen(tp, filepath.Dir(dir))}
		r, err = openReplica(tp, dir, m.cfg.BrokerID, st.Config, base, saved.hw, saved.recoveryPoint, saved.logStart, m.log, m.notifyChanged)
		if err != nil {
			m.dirs.openFailed(tp, dir)
		}
		if m.noteIOError(dir, err) {
			err = mapLogError(err)
		}
	}
	if err == nil {
		r.ioFailed = func(err error) { m.replicaFailed(r.tp, dir, err) }
		r.lagTimeMax = m.cfg.ReplicaLagTimeMax
		r.isrWritable = m.cfg.StateWriter != nil
		r.txnVerification = m.cfg.TxnVerification
	}
	m.mu.Lock()
	delete(m.opening, tp)
	closed := m.closed
	if err == nil && !closed && m.dirOffline(filepath.Dir(dir)) != nil {
		// The dir failed while the log opened, after its failure handling
		// took the dir's replicas out of the map: this one must not serve.
		m.mu.Unlock()
		_ = r.log.CloseHandlers()
		m.logDirs.mu.Lock()
		m.logDirs.parts[tp] = filepath.Dir(dir)
		m.logDirs.mu.Unlock()
		op.err = m.offlinePartitionErr(tp)
		return nil, op.err
	}
	if err == nil && !closed {
		m.replicas[tp] = r
		delete(m.saved, tp) // the open replica checkpoints its own
	}
	m.mu.Unlock()
	if err == nil && closed {
		// Close ran meanwhile and waits for done: the saved checkpoint
		// entry, untouched, still describes the log.
		err = errors.Join(errManagerClosed, r.close(false))
		r = nil
	}
	op.err = err
	return r, err
}

// waitOpening waits for an open of tp in progress, if any.
func (m *Manager) waitOpening(tp cluster.TopicPartition) {
	m.mu.RLock()
	op := m.opening[tp]
	m.mu.RUnlock()
	if op != nil {
		<-op.done
	}
}

// StopReplicas closes the given replicas; with remove their directories
// are deleted (topic deletion), also a partition's that is on disk but not
// open. A replica stopped without remove keeps its
// checkpoint entries (HW, recovery point, log start), taken after its log
// flushed on close, so a restart or a later open starts from them; with
// remove they are dropped.
func (m *Manager) StopReplicas(tps []cluster.TopicPartition, remove bool) error {
	var errs []error
	for _, tp := range tps {
		if err := m.stopReplica(tp, remove); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// StopReplica is one partition of a StopReplica request: it stops tp's
// replica as StopReplicas does, unless leaderEpoch (the request's; -1 for
// none, as before StopReplica v3, -2 during a deletion) is older than the
// replica's leader epoch: then the request is stale (KIP-570), nothing
// stops and the error wraps ErrFencedLeaderEpoch. Unlike Kafka, the
// replica's own epoch does not fence the stop, because our controller
// sends the epoch it holds, which the broker may have applied already (a
// follower in a controlled shutdown). stopped says whether the replica is
// gone (it may still have failed to close: err).
func (m *Manager) StopReplica(tp cluster.TopicPartition, remove bool, leaderEpoch int32) (stopped bool, err error) {
	if leaderEpoch >= 0 {
		m.waitOpening(tp)
		m.mu.RLock()
		r := m.replicas[tp]
		m.mu.RUnlock()
		if r != nil {
			r.mu.Lock()
			current := r.leaderEpoch
			r.mu.Unlock()
			if leaderEpoch < current {
				return false, fmt.Errorf("%w: stop replica %s in leader epoch %d, replica in %d",
					ErrFencedLeaderEpoch, tp, leaderEpoch, current)
			}
		}
	}
	return true, m.stopReplica(tp, remove)
}

func (m *Manager) stopReplica(tp cluster.TopicPartition, remove bool) error {
	m.waitOpening(tp) // a stop after a LeaderAndIsr still opening stops its replica
	if err := m.offlineStopErr(tp, remove); err != nil {
		return err
	}
	m.unfollow(tp)
	if !remove && m.shuttingDown.Load() {
		return nil // Close closes its log with the others (BeginShutdown)
	}
	// No clean pass of tp runs while it stops (one in progress ends
	// first), and a deleted partition's cleaner checkpoint goes.
	m.cleaner.pause(tp)
	defer m.cleaner.resume(tp)
	if remove {
		defer m.cleaner.forget(tp)
	}
	m.mu.RLock()
	r := m.replicas[tp]
	m.mu.RUnlock()
	if r != nil && !remove {
		m.cleaner.noteTruncation(r) // the checkpoint outlives r
	}
	if r == nil {
		if !remove {
			return nil
		}
		m.mu.Lock()
		delete(m.saved, tp)
		m.mu.Unlock()
		// A log on disk but not open here (its topic was deleted while
		// this broker was down) goes too, as Kafka deletes it from the
		// LogManager: a topic created again under the name starts empty.
		for _, dir := range m.cfg.LogDirs {
			p := filepath.Join(dir, partitionDirName(tp))
			if m.dirOffline(dir) != nil {
				continue // a failed disk is left alone
			}
			if _, err := os.Stat(p); err != nil {
				continue
			}
			if err := os.RemoveAll(p); err != nil {
				m.noteIOError(p, err)
				return fmt.Errorf("stop replica %s: delete %s: %w", tp, p, err)
			}
			m.dirs.removed(tp, p)
			m.log.Info().Str("topic", tp.Topic).Int32("partition", tp.Partition).Str("dir", p).Msg("deleted log of a replica not open")
		}
		return nil
	}
	var err error
	if !remove {
		// Closed while still in the map, so that a checkpoint written
		// meanwhile still has the partition; the log flushes on close, so
		// the recovery point saved below is its end.
		err = r.close(false)
	}
	m.mu.Lock()
	if m.replicas[tp] == r {
		delete(m.replicas, tp)
	}
	if remove {
		delete(m.saved, tp)
	} else {
		hw, rp, ls := r.snapshot()
		m.saved[tp] = savedOffsets{logDir: filepath.Dir(r.dir), hw: hw, recoveryPoint: rp, logStart: ls}
	}
	m.mu.Unlock()
	if remove {
		err = r.close(true)
		m.dirs.removed(tp, r.dir)
	}
	r.logger.Info().Bool("deleted", remove).Msg("replica stopped")
	if err != nil {
		m.noteIOError(r.dir, err)
		return fmt.Errorf("stop replica %s: %w", tp, err)
	}
	return nil
}

// Hosted lists the partitions this broker holds a replica of.
func (m *Manager) Hosted() []cluster.TopicPartition {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]cluster.TopicPartition, 0, len(m.replicas))
	for tp := range m.replicas {
		out = append(out, tp)
	}
	return out
}

func (m *Manager) get(tp cluster.TopicPartition) (*Replica, error) {
	m.mu.RLock()
	r := m.replicas[tp]
	m.mu.RUnlock()
	if r == nil {
		if err := m.offlinePartitionErr(tp); err != nil {
			return nil, err // HostedPartition.Offline: KAFKA_STORAGE_ERROR
		}
		return nil, fmt.Errorf("%w: %s", ErrUnknownTopicOrPartition, tp)
	}
	return r, nil
}

// Append validates and appends one produced batch as leader of tp: a
// client's, AppendWith(tp, records, AppendOptions{Acks: acks}).
func (m *Manager) Append(tp cluster.TopicPartition, records []byte, acks int16) (AppendResult, error) {
	return m.AppendWith(tp, records, AppendOptions{Acks: acks})
}

// AppendWith validates and appends one batch as leader of tp, as
// opts.Origin says: a client's batch gets the sequence checks and, if
// transactional, verification (opts.VerificationGuard); a coordinator's
// only the producer epoch check. Either is refused with
// ErrInvalidTxnState when it is non-transactional from a producer inside a
// transaction.
func (m *Manager) AppendWith(tp cluster.TopicPartition, records []byte, opts AppendOptions) (AppendResult, error) {
	r, err := m.get(tp)
	if err != nil {
		return AppendResult{}, err
	}
	res, err := r.appendAsLeader(records, opts, m.cfg.Now())
	if err == nil {
		m.cfg.Metrics.BytesIn(tp.Topic, int64(len(records)), res.LastOffset-res.BaseOffset+1)
	}
	return res, err
}

// TxnVerificationGuard returns (0, false, nil) when producerID has an
// ongoing transaction on tp, which needs no verification; otherwise the
// producer's verification guard (non-zero, created when it has none) for
// AppendOptions.VerificationGuard, with needed true. A marker or a
// transactional batch of the producer clears it. Errors: ErrNotLeader,
// ErrUnknownTopicOrPartition.
func (m *Manager) TxnVerificationGuard(tp cluster.TopicPartition, producerID int64) (guard uint64, needed bool, err error) {
	r, err := m.get(tp)
	if err != nil {
		return 0, false, err
	}
	return r.verificationGuard(producerID, m.cfg.Now())
}

// WriteTxnMarker appends a transaction marker as leader of tp
// (WriteTxnMarkers), min.insync.replicas checked as for acks -1. It ends
// the producer's ongoing transaction on tp (an ABORT adds it to the log's
// aborted-transaction index), clears its verification guard, and moves the
// LSO once the HW passes the marker; the caller waits for that with
// WaitCommitted. A marker for a producer with no ongoing transaction is
// appended all the same. Errors: ErrNotLeader,
// ErrUnknownTopicOrPartition, ErrNotEnoughReplicas,
// ErrInvalidProducerEpoch (an epoch below the producer's),
// ErrTransactionCoordinatorFenced (a coordinator epoch below the last
// seen for the producer on tp), ErrStorage.
func (m *Manager) WriteTxnMarker(tp cluster.TopicPartition, mk TxnMarker) (AppendResult, error) {
	r, err := m.get(tp)
	if err != nil {
		return AppendResult{}, err
	}
	return r.writeMarker(mk, m.cfg.Now())
}

// DescribeProducers lists the producers of tp, led here (DescribeProducers,
// API 61), by producer id. Errors: ErrNotLeader, ErrUnknownTopicOrPartition.
func (m *Manager) DescribeProducers(tp cluster.TopicPartition) ([]ProducerInfo, error) {
	r, err := m.get(tp)
	if err != nil {
		return nil, err
	}
	return r.describeProducers()
}

// WaitCommitted blocks until the HW of tp passes lastOffset, appended in
// leaderEpoch (AppendResult's); see protocol.Replicas.
func (m *Manager) WaitCommitted(ctx context.Context, tp cluster.TopicPartition, lastOffset int64, leaderEpoch int32) error {
	r, err := m.get(tp)
	if err != nil {
		return err
	}
	m.produceWaits.Add(1)
	defer m.produceWaits.Add(-1)
	return r.waitCommitted(ctx, lastOffset, leaderEpoch)
}

// Read serves a fetch of tp. A follower's fetch (ReplicaID >= 0) updates
// its state on the leader and may add it back to the ISR; that write runs
// on its own goroutine (one in flight per partition), so Read does not
// wait for ZooKeeper.
func (m *Manager) Read(tp cluster.TopicPartition, req ReadRequest) (ReadResult, error) {
	r, err := m.get(tp)
	if err != nil {
		return ReadResult{}, err
	}
	now := m.cfg.Now()
	res, change, err := r.read(req, now, req.ReplicaID >= 0 && m.leaderQuota.exceeded(now))
	m.writeIsrChangeAsync(r, change)
	if n := len(res.Records); n > 0 {
		m.cfg.Metrics.BytesOut(tp.Topic, int64(n), req.ReplicaID >= 0)
		if rm, ok := m.cfg.Metrics.(ReassignmentMetrics); ok && req.ReplicaID >= 0 && r.isAdding(req.ReplicaID) {
			rm.ReassignmentBytes(int64(n), false)
		}
	}
	return res, err
}

// OffsetForLeaderEpoch answers OffsetsForLeaderEpoch for tp as its leader
// (KIP-101/279): the largest epoch at or below leaderEpoch and the offset
// where it ends, (-1, -1) when unknown. currentLeaderEpoch is the asker's
// view of the leader epoch, checked as KIP-320 says (-1: no check).
func (m *Manager) OffsetForLeaderEpoch(tp cluster.TopicPartition, currentLeaderEpoch, leaderEpoch int32) (epoch int32, endOffset int64, err error) {
	r, err := m.get(tp)
	if err != nil {
		return -1, -1, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.isLeaderLocked() {
		return -1, -1, ErrNotLeader
	}
	if err := r.checkLeaderEpochLocked(currentLeaderEpoch); err != nil {
		return -1, -1, err
	}
	epoch, endOffset = r.log.LeaderEpochs().EndOffsetFor(leaderEpoch, r.log.LogEndOffset())
	return epoch, endOffset, nil
}

// ListOffset resolves a ListOffsets timestamp for tp, bounded as asker
// may see (OffsetsAsker).
func (m *Manager) ListOffset(tp cluster.TopicPartition, timestamp int64, currentLeaderEpoch int32, asker OffsetsAsker) (int64, int64, int32, error) {
	r, err := m.get(tp)
	if err != nil {
		return 0, 0, 0, err
	}
	return r.listOffset(timestamp, currentLeaderEpoch, asker)
}

// Close stops the background work, writes the checkpoints and closes
// every replica. It is safe to call twice.
func (m *Manager) Close() error {
	var errs []error
	m.once.Do(func() {
		close(m.stop)
		m.stopFetchers()
		m.cancel()
		m.goMu.Lock()
		m.goClosed = true
		m.goMu.Unlock()
		m.cleaner.abortAll()
		m.wg.Wait() // the cleaner threads end, their passes aborted
		m.cleaner.writeCheckpoints()
		// unclean holds the log dirs where a log failed to flush or close,
		// or a checkpoint to be written: they get no clean-shutdown marker.
		unclean := map[string]bool{}
		m.mu.Lock()
		m.closed = true
		rs := m.replicas
		var opens []*opening
		for _, op := range m.opening {
			opens = append(opens, op)
		}
		m.mu.Unlock()
		// Each log flushed, snapshotted and closed by one job, the jobs
		// of a log dir run by RecoveryThreadsPerDataDir goroutines (Kafka's
		// LogManager.shutdown), the checkpoints written once after.
		notDurable := map[string]bool{}
		for _, f := range m.closeReplicas(rs) {
			errs = append(errs, f.err)
			unclean[f.dir] = true
			if f.notDurable {
				notDurable[f.dir] = true
			}
		}
		// An open in progress sees closed and closes its own log.
		for _, op := range opens {
			<-op.done
		}
		// The offsets as the closed logs hold them, so that a clean
		// restart's recovery points are the logs' ends; none in a dir
		// whose sync failed, where those ends may not be durable (the
		// last periodic checkpoints stay).
		m.checkpointMu.Lock()
		for dir, err := range m.writeCheckpointsLocked(true, false, notDurable) {
			errs = append(errs, err)
			unclean[dir] = true
		}
		m.checkpointMu.Unlock()
		m.mu.Lock()
		m.replicas = map[cluster.TopicPartition]*Replica{}
		m.mu.Unlock()
		// Last, Kafka's clean-shutdown marker in each log dir whose logs
		// all closed and whose checkpoints were written.
		for _, dir := range m.cfg.LogDirs {
			dir = filepath.Clean(dir)
			if unclean[dir] {
				m.log.Warn().Str("dir", dir).Msg("no clean shutdown marker: a log or checkpoint failed")
				continue
			}
			if err := writeCleanShutdownMarker(dir); err != nil {
				errs = append(errs, err)
			}
		}
	})
	return errors.Join(errs...)
}
