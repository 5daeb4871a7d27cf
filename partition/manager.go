package partition

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/logstore"
)

// Checkpoint file names in each log dir, as in Kafka.
const (
	ReplicationOffsetCheckpointFile = "replication-offset-checkpoint"
	RecoveryPointCheckpointFile     = "recovery-point-offset-checkpoint"
	LogStartOffsetCheckpointFile    = "log-start-offset-checkpoint"
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
}

// Manager owns every replica this broker holds. It implements the
// protocol's Replicas interface.
type Manager struct {
	cfg Config
	log zerolog.Logger

	mu       sync.RWMutex
	replicas map[cluster.TopicPartition]*Replica
	// checkpointed values read at start, consumed as replicas open
	hwCheckpoint       map[cluster.TopicPartition]int64
	recoveryCheckpoint map[cluster.TopicPartition]int64
	closed             bool

	changedMu sync.Mutex
	changed   chan struct{}

	wg   sync.WaitGroup
	stop chan struct{}
	once sync.Once
}

// NewManager reads the checkpoint files of every log dir. Replicas are
// opened when their partition state arrives (ApplyPartitionStates).
func NewManager(cfg Config) (*Manager, error) {
	if len(cfg.LogDirs) == 0 {
		return nil, errors.New("partition: no log dirs")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	m := &Manager{
		cfg: cfg, log: cfg.Log,
		replicas:           map[cluster.TopicPartition]*Replica{},
		hwCheckpoint:       map[cluster.TopicPartition]int64{},
		recoveryCheckpoint: map[cluster.TopicPartition]int64{},
		changed:            make(chan struct{}),
		stop:               make(chan struct{}),
	}
	for _, dir := range cfg.LogDirs {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create log dir %s: %w", dir, err)
		}
		for file, into := range map[string]map[cluster.TopicPartition]int64{
			ReplicationOffsetCheckpointFile: m.hwCheckpoint,
			RecoveryPointCheckpointFile:     m.recoveryCheckpoint,
		} {
			entries, err := logstore.ReadOffsetCheckpoint(filepath.Join(dir, file))
			if err != nil {
				return nil, fmt.Errorf("read %s in %s: %w", file, dir, err)
			}
			for _, e := range entries {
				into[cluster.TopicPartition{Topic: e.Topic, Partition: e.Partition}] = e.Offset
			}
		}
	}
	return m, nil
}

// Start runs the background duties: flush by time, retention, and the HW
// and recovery-point checkpoints.
func (m *Manager) Start() {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.background()
	}()
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
			}
		}
		if now.Sub(lastRetention) >= m.cfg.RetentionCheckInterval {
			lastRetention = now
			for _, r := range m.all() {
				hw, _, _ := r.snapshot()
				if n, err := r.log.DeleteOldSegmentsBelow(now.UnixMilli(), hw); err != nil {
					r.logger.Error().Err(err).Msg("retention")
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
// recovery-point and log-start checkpoints) of every log dir.
func (m *Manager) writeCheckpoints(recovery bool) {
	type entries struct{ hw, rp, ls []logstore.CheckpointEntry }
	byDir := map[string]*entries{}
	for _, dir := range m.cfg.LogDirs {
		byDir[dir] = &entries{}
	}
	m.mu.RLock()
	for tp, r := range m.replicas {
		hw, rp, ls := r.snapshot()
		e := byDir[filepath.Dir(r.dir)]
		if e == nil {
			continue
		}
		e.hw = append(e.hw, logstore.CheckpointEntry{Topic: tp.Topic, Partition: tp.Partition, Offset: hw})
		e.rp = append(e.rp, logstore.CheckpointEntry{Topic: tp.Topic, Partition: tp.Partition, Offset: rp})
		e.ls = append(e.ls, logstore.CheckpointEntry{Topic: tp.Topic, Partition: tp.Partition, Offset: ls})
	}
	m.mu.RUnlock()
	for dir, e := range byDir {
		files := []struct {
			name string
			es   []logstore.CheckpointEntry
		}{{ReplicationOffsetCheckpointFile, e.hw}}
		if recovery {
			files = append(files, struct {
				name string
				es   []logstore.CheckpointEntry
			}{RecoveryPointCheckpointFile, e.rp}, struct {
				name string
				es   []logstore.CheckpointEntry
			}{LogStartOffsetCheckpointFile, e.ls})
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
			}
		}
	}
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

// notifyChanged wakes long-polling fetches.
func (m *Manager) notifyChanged() {
	m.changedMu.Lock()
	close(m.changed)
	m.changed = make(chan struct{})
	m.changedMu.Unlock()
}

// Changed returns a channel closed the next time any replica's HW or LEO moves.
func (m *Manager) Changed() <-chan struct{} {
	m.changedMu.Lock()
	defer m.changedMu.Unlock()
	return m.changed
}

// partitionDirName is Kafka's directory name for a partition: <topic>-<partition>.
func partitionDirName(tp cluster.TopicPartition) string {
	return tp.Topic + "-" + strconv.Itoa(int(tp.Partition))
}

// dirFor picks the log dir of a partition: the one already holding it, or
// the one holding the fewest partitions.
func (m *Manager) dirFor(tp cluster.TopicPartition) string {
	name := partitionDirName(tp)
	best, bestCount := m.cfg.LogDirs[0], -1
	for _, dir := range m.cfg.LogDirs {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return filepath.Join(dir, name)
		}
		entries, _ := os.ReadDir(dir)
		n := 0
		for _, e := range entries {
			if e.IsDir() && strings.Contains(e.Name(), "-") {
				n++
			}
		}
		if bestCount < 0 || n < bestCount {
			best, bestCount = dir, n
		}
	}
	return filepath.Join(best, name)
}

// ApplyPartitionStates opens replicas this broker does not hold yet and
// hands every replica its new state.
func (m *Manager) ApplyPartitionStates(states []PartitionState) error {
	now := m.cfg.Now()
	var errs []error
	for _, st := range states {
		r, err := m.getOrOpen(st)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := r.applyState(st, now); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (m *Manager) getOrOpen(st PartitionState) (*Replica, error) {
	tp := st.TopicPartition
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, errors.New("partition: manager closed")
	}
	if r := m.replicas[tp]; r != nil {
		return r, nil
	}
	hw, rp := m.hwCheckpoint[tp], m.recoveryCheckpoint[tp]
	r, err := openReplica(tp, m.dirFor(tp), m.cfg.BrokerID, st.Config, hw, rp, m.log, m.notifyChanged)
	if err != nil {
		return nil, err
	}
	m.replicas[tp] = r
	return r, nil
}

// StopReplicas closes the given replicas; with remove their directories
// are deleted (topic deletion).
func (m *Manager) StopReplicas(tps []cluster.TopicPartition, remove bool) error {
	var errs []error
	for _, tp := range tps {
		m.mu.Lock()
		r := m.replicas[tp]
		delete(m.replicas, tp)
		m.mu.Unlock()
		if r == nil {
			continue
		}
		if err := r.close(remove); err != nil {
			errs = append(errs, fmt.Errorf("stop replica %s: %w", tp, err))
		}
		r.logger.Info().Bool("deleted", remove).Msg("replica stopped")
	}
	return errors.Join(errs...)
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
		return nil, fmt.Errorf("%w: %s", ErrUnknownTopicOrPartition, tp)
	}
	return r, nil
}

// Append validates and appends one produced batch as leader of tp.
func (m *Manager) Append(tp cluster.TopicPartition, records []byte, acks int16) (AppendResult, error) {
	r, err := m.get(tp)
	if err != nil {
		return AppendResult{}, err
	}
	return r.appendAsLeader(records, acks, m.cfg.Now())
}

// WaitCommitted blocks until the HW of tp passes lastOffset; see protocol.Replicas.
func (m *Manager) WaitCommitted(ctx context.Context, tp cluster.TopicPartition, lastOffset int64) error {
	r, err := m.get(tp)
	if err != nil {
		return err
	}
	return r.waitCommitted(ctx, lastOffset)
}

// Read serves a fetch of tp.
func (m *Manager) Read(tp cluster.TopicPartition, req ReadRequest) (ReadResult, error) {
	r, err := m.get(tp)
	if err != nil {
		return ReadResult{}, err
	}
	return r.read(req, m.cfg.Now())
}

// ListOffset resolves a ListOffsets timestamp for tp.
func (m *Manager) ListOffset(tp cluster.TopicPartition, timestamp int64, currentLeaderEpoch int32) (int64, int64, int32, error) {
	r, err := m.get(tp)
	if err != nil {
		return 0, 0, 0, err
	}
	return r.listOffset(timestamp, currentLeaderEpoch)
}

// Close stops the background work, writes the checkpoints and closes
// every replica. It is safe to call twice.
func (m *Manager) Close() error {
	var errs []error
	m.once.Do(func() {
		close(m.stop)
		m.wg.Wait()
		for _, r := range m.all() {
			if err := r.log.Flush(); err != nil {
				errs = append(errs, fmt.Errorf("flush %s: %w", r.tp, err))
			}
		}
		m.writeCheckpoints(true)
		m.mu.Lock()
		m.closed = true
		rs := m.replicas
		m.replicas = map[cluster.TopicPartition]*Replica{}
		m.mu.Unlock()
		for _, r := range rs {
			if err := r.close(false); err != nil {
				errs = append(errs, err)
			}
		}
	})
	return errors.Join(errs...)
}
