package partition

// Log dir failure (Kafka's LogDirFailureChannel, ReplicaManager's and
// LogManager's handleLogDirFailure). An I/O error met by a write to a log
// (append, roll, flush, truncation, retention, DeleteRecords, a producer
// snapshot, a log open or delete) or by a checkpoint write takes the whole
// log dir offline: once per dir (maybeAddOfflineLogDir, which never blocks
// and may be called under Replica.mu), then handleLogDirFailure runs on its
// own goroutine, started for the failure only.
//
// It stops the dir's replicas (they leave their fetchers, their acks=all
// waiters fail with ErrStorage, their logs are closed without flushing)
// and keeps them as offline partitions: every later call for them (Append,
// Read, ListOffset, OffsetForLeaderEpoch, a LeaderAndIsr state) answers
// ErrStorage (KAFKA_STORAGE_ERROR), so that the controller, which asks the
// broker with LeaderAndIsr after the notification, marks them offline. No
// checkpoint of the dir is written again, and no new partition is placed
// there. Then the failure handler (SetLogDirFailureHandler) is told: the
// broker writes the log dir event notification, and with no dir left
// online it stops, as Kafka halts ("Shutdown broker because all log dirs
// in ... have failed").
//
// A dir stays offline until the process restarts. Unlike Kafka, a process
// wide shortage of descriptors (EMFILE, ENFILE) is not taken as a failure
// of the dir: it is no fault of the disk, and taking every dir offline one
// after the other would stop a broker that only ran out of descriptors.
// The log that met it is failed for good all the same (logstore takes no
// more writes): that replica alone answers ErrStorage to appends, reads
// and LeaderAndIsr until the broker restarts, and the handler is told
// (ReplicaOnly), so the controller, asking, moves its leadership.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/logstore"
)

// LogDirFailure is what the failure handler is told about a log dir that
// went offline.
type LogDirFailure struct {
	// Dir is the log dir, as configured (filepath.Clean of a LogDirs entry).
	Dir string
	// Err is the I/O error that took it offline.
	Err error
	// Partitions are the replicas it held that were open.
	Partitions []cluster.TopicPartition
	// Online are the log dirs still online; none means the broker must stop.
	Online []string
	// ReplicaOnly is set when Dir stays online and only the replica in
	// Partitions failed (a shortage of descriptors): it answers
	// KAFKA_STORAGE_ERROR until the broker restarts.
	ReplicaOnly bool
}

// logDirState is the Manager's set of offline log dirs and partitions.
type logDirState struct {
	mu sync.Mutex // a leaf lock
	// offline maps an offline dir (filepath.Clean) to the error that took
	// it offline.
	offline map[string]error
	// parts maps the partitions of offline dirs to their dir.
	parts map[cluster.TopicPartition]string
	// pending counts the failures noted and not yet handled (tests wait
	// on it through waitLogDirFailures).
	pending sync.WaitGroup
	handler func(LogDirFailure)
}

// SetLogDirFailureHandler sets what is told of each log dir that goes
// offline, on the goroutine that handled the failure (after its replicas
// stopped). Set it before Start.
func (m *Manager) SetLogDirFailureHandler(f func(LogDirFailure)) {
	m.logDirs.mu.Lock()
	m.logDirs.handler = f
	m.logDirs.mu.Unlock()
}

// OfflineLogDirs lists the log dirs that failed, each with its error.
func (m *Manager) OfflineLogDirs() map[string]error {
	m.logDirs.mu.Lock()
	defer m.logDirs.mu.Unlock()
	out := make(map[string]error, len(m.logDirs.offline))
	for d, err := range m.logDirs.offline {
		out[d] = err
	}
	return out
}

// OnlineLogDirs lists the configured log dirs that have not failed.
func (m *Manager) OnlineLogDirs() []string {
	m.logDirs.mu.Lock()
	defer m.logDirs.mu.Unlock()
	return m.onlineLocked()
}

func (m *Manager) onlineLocked() []string {
	var out []string
	for _, d := range m.cfg.LogDirs {
		d = filepath.Clean(d)
		if _, off := m.logDirs.offline[d]; !off {
			out = append(out, d)
		}
	}
	return out
}

// dirOffline returns the error that took dir offline, nil while it is online.
func (m *Manager) dirOffline(dir string) error {
	m.logDirs.mu.Lock()
	defer m.logDirs.mu.Unlock()
	return m.logDirs.offline[filepath.Clean(dir)]
}

// offlinePartitionErr returns ErrStorage for a partition of an offline log
// dir, nil for any other.
func (m *Manager) offlinePartitionErr(tp cluster.TopicPartition) error {
	m.logDirs.mu.Lock()
	dir, ok := m.logDirs.parts[tp]
	m.logDirs.mu.Unlock()
	if !ok {
		return nil
	}
	return fmt.Errorf("%w: %s is in offline log dir %s", ErrStorage, tp, dir)
}

// isIOFailure reports whether err, from a write to a log or a file of a
// log dir, is an I/O failure that takes the dir offline: logstore's
// ErrStorage, or any error that is not one of logstore's or this
// package's refusals of the request (corrupt or invalid input, an offset
// out of range or mismatched, a batch too large, a closed log), other than
// a process-wide shortage of descriptors.
func isIOFailure(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		return false
	case errors.Is(err, logstore.ErrStorage):
		return true
	case errors.Is(err, logstore.ErrClosed), errors.Is(err, errManagerClosed),
		errors.Is(err, logstore.ErrCorrupt), errors.Is(err, ErrCorruptMessage),
		errors.Is(err, logstore.ErrInvalidRecord), errors.Is(err, ErrInvalidRecord),
		errors.Is(err, logstore.ErrOffsetOutOfRange), errors.Is(err, ErrOffsetOutOfRange),
		errors.Is(err, logstore.ErrOffsetMismatch),
		errors.Is(err, logstore.ErrRecordListTooLarge), errors.Is(err, ErrRecordListTooLarge):
		return false
	}
	// ErrStorage is what mapLogError makes of every other log error; a
	// bare error from the file system (a checkpoint write, a delete) is
	// an I/O error too.
	return true
}

// noteIOError takes dir offline when err is an I/O failure; it reports
// whether it was one. It never blocks.
func (m *Manager) noteIOError(dir string, err error) bool {
	if !isIOFailure(err) {
		return false
	}
	m.maybeAddOfflineLogDir(dir, err)
	return true
}

// maybeAddOfflineLogDir is LogDirFailureChannel.maybeAddOfflineLogDir: the
// first failure of dir marks it offline and starts its handling on a
// goroutine; later ones are ignored. dir is a configured log dir (or a
// path inside one). It never blocks; callers may hold Replica.mu.
func (m *Manager) maybeAddOfflineLogDir(dir string, err error) {
	dir = m.logDirOf(dir)
	if dir == "" {
		return
	}
	m.logDirs.mu.Lock()
	if _, off := m.logDirs.offline[dir]; off {
		m.logDirs.mu.Unlock()
		return
	}
	if m.logDirs.offline == nil {
		m.logDirs.offline = map[string]error{}
		m.logDirs.parts = map[cluster.TopicPartition]string{}
	}
	m.logDirs.offline[dir] = err
	m.logDirs.pending.Add(1)
	m.logDirs.mu.Unlock()
	m.dirs.setOffline(dir)
	m.log.Error().Err(err).Str("dir", dir).Msg("error on log dir; taking it offline")
	if !m.goFunc(func() { m.handleLogDirFailure(dir, err) }) {
		m.logDirs.pending.Done() // closing: nothing more is served anyway
	}
}

// replicaFailed is Replica.ioFailed: the replica's log failed for good
// (storageErr is set). An I/O failure takes its dir offline; a shortage of
// descriptors (EMFILE, ENFILE) fails this replica only, and the failure
// handler is told (LogDirFailure.ReplicaOnly) so that the controller asks
// this broker with LeaderAndIsr, which the replica answers ErrStorage, and
// moves its leadership. It never blocks; callers may hold Replica.mu.
func (m *Manager) replicaFailed(tp cluster.TopicPartition, dir string, err error) {
	if isIOFailure(err) {
		m.maybeAddOfflineLogDir(dir, err)
		return
	}
	d := m.logDirOf(dir)
	m.logDirs.pending.Add(1)
	m.log.Error().Err(err).Str("topic", tp.Topic).Int32("partition", tp.Partition).
		Msg("log of a replica failed (its dir stays online); the replica answers KAFKA_STORAGE_ERROR")
	if !m.goFunc(func() {
		defer m.logDirs.pending.Done()
		m.logDirs.mu.Lock()
		online, h := m.onlineLocked(), m.logDirs.handler
		m.logDirs.mu.Unlock()
		if h != nil {
			h(LogDirFailure{Dir: d, Err: err, Partitions: []cluster.TopicPartition{tp}, Online: online, ReplicaOnly: true})
		}
	}) {
		m.logDirs.pending.Done()
	}
}

// offlineStopErr is what StopReplica with delete answers for a partition
// of an offline log dir, as Kafka's ReplicaManager.stopReplicas:
// ErrStorage (KAFKA_STORAGE_ERROR), its files left alone on the failed
// disk; nil otherwise, and without remove (the partition stays offline).
func (m *Manager) offlineStopErr(tp cluster.TopicPartition, remove bool) error {
	if !remove {
		return nil
	}
	if err := m.offlinePartitionErr(tp); err != nil {
		return fmt.Errorf("stop replica %s: %w", tp, err)
	}
	return nil
}

// logDirOf returns the configured log dir that p is, or is inside of; ""
// for none.
func (m *Manager) logDirOf(p string) string {
	p = filepath.Clean(p)
	for _, d := range m.cfg.LogDirs {
		d = filepath.Clean(d)
		if p == d || strings.HasPrefix(p, d+string(filepath.Separator)) {
			return d
		}
	}
	return ""
}

// waitLogDirFailures waits until every failure noted so far was handled.
func (m *Manager) waitLogDirFailures() { m.logDirs.pending.Wait() }

// handleLogDirFailure is ReplicaManager.handleLogDirFailure with
// LogManager's: the replicas of dir stop and become offline partitions,
// then the handler is told.
func (m *Manager) handleLogDirFailure(dir string, cause error) {
	defer m.logDirs.pending.Done()
	m.log.Warn().Str("dir", dir).Msg("stopping serving replicas in dir because the log directory has failed")
	storageErr := fmt.Errorf("%w: log dir %s is offline: %w", ErrStorage, dir, cause)
	// Offline first, so that no lookup finds the replicas between their
	// removal from the map and their marking.
	m.mu.Lock()
	var rs []*Replica
	for tp, r := range m.replicas {
		if filepath.Dir(r.dir) == dir {
			rs = append(rs, r)
			delete(m.replicas, tp)
		}
	}
	var parts []cluster.TopicPartition
	m.logDirs.mu.Lock()
	for _, r := range rs {
		m.logDirs.parts[r.tp] = dir
		parts = append(parts, r.tp)
	}
	for tp, o := range m.saved {
		if o.logDir == dir {
			m.logDirs.parts[tp] = dir
			delete(m.saved, tp)
		}
	}
	m.logDirs.mu.Unlock()
	m.mu.Unlock()
	slices.SortFunc(parts, compareTopicPartition)
	for _, r := range rs {
		m.unfollow(r.tp)
		m.cleaner.pause(r.tp) // a pass in progress ends first
		r.mu.Lock()
		if r.storageErr == nil {
			r.storageErr = storageErr
		}
		r.closed = true
		r.failWaitersLocked(storageErr)
		r.signalLocked()
		r.mu.Unlock()
		// Out of a fetcher a LeaderAndIsr put it back in after the first
		// unfollow, before closed was set (followPartition checks it).
		m.unfollow(r.tp)
		// Kafka's closeHandlers: the files are closed, nothing is flushed
		// to a disk that failed.
		if err := r.log.CloseHandlers(); err != nil {
			r.logger.Debug().Err(err).Msg("closing log of an offline dir")
		}
		m.cleaner.resume(r.tp)
	}
	m.notifyChanged(wakeAll)
	m.logDirs.mu.Lock()
	online := m.onlineLocked()
	h := m.logDirs.handler
	m.logDirs.mu.Unlock()
	m.log.Warn().Str("dir", dir).Int("partitions", len(parts)).Strs("online_dirs", online).
		Msg("stopped serving replicas in dir")
	if h != nil {
		h(LogDirFailure{Dir: dir, Err: cause, Partitions: parts, Online: online})
	}
}

// isClosed reports whether r was closed (stopped, or its dir failed).
func (r *Replica) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

func compareTopicPartition(a, b cluster.TopicPartition) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return int(a.Partition) - int(b.Partition)
}

// mayHoldPartition reports whether tp's directory may be in dir: it is
// there, or stat failed with anything but "does not exist" (a failed disk
// answers EIO), which says nothing of what the disk holds.
func mayHoldPartition(dir string, tp cluster.TopicPartition) bool {
	_, err := os.Stat(filepath.Join(dir, partitionDirName(tp)))
	return err == nil || !errors.Is(err, fs.ErrNotExist)
}

// logDirFor is where tp's log is opened, as Kafka's
// LogManager.getOrCreateLog: ErrStorage when the partition is in an
// offline dir (known offline, or its directory there or not known absent:
// mayHoldPartition), else chosen (the dir layout's choice, which places new
// partitions on online dirs only). A log not new (isNew, LeaderAndIsr's is_new) and not found
// on an online dir while a dir is offline is not created either: it may be
// on the failed disk, and an empty log in its place would lose what the
// replica acknowledged (as leader it would make its followers truncate).
// A new one may still be placed on an online dir, though the offline one
// cannot tell whether it holds a stale directory of the name. A replica a
// reassignment adds here (in AddingReplicas) counts as new: Kafka's
// controller sends is_new to a replica it starts (NewReplica), ours does
// only at topic creation. With no dir online it answers ErrStorage.
func (m *Manager) logDirFor(st PartitionState, chosen string) (string, error) {
	tp := st.TopicPartition
	isNew := st.IsNew || slices.Contains(st.AddingReplicas, m.cfg.BrokerID)
	if err := m.offlinePartitionErr(tp); err != nil {
		return "", err
	}
	m.logDirs.mu.Lock()
	nOffline := len(m.logDirs.offline)
	var offline []string
	for d := range m.logDirs.offline {
		offline = append(offline, d)
	}
	online := m.onlineLocked()
	m.logDirs.mu.Unlock()
	if nOffline == 0 {
		return chosen, nil
	}
	slices.Sort(offline)
	name := partitionDirName(tp)
	for _, d := range offline {
		_, err := os.Stat(filepath.Join(d, name))
		if err == nil || (!isNew && !errors.Is(err, fs.ErrNotExist)) {
			m.logDirs.mu.Lock()
			m.logDirs.parts[tp] = d
			m.logDirs.mu.Unlock()
			return "", fmt.Errorf("%w: %s is in offline log dir %s", ErrStorage, tp, d)
		}
	}
	if len(online) == 0 {
		return "", fmt.Errorf("%w: every log dir is offline", ErrStorage)
	}
	if slices.Contains(offline, filepath.Dir(chosen)) {
		// The layout placed it on a dir that has failed since (and holds
		// nothing of it, as the stats above say): place it again, among
		// the online dirs (the layout skips offline ones).
		m.dirs.forget(tp, filepath.Dir(chosen))
		chosen = m.dirs.dirFor(tp)
	}
	if _, err := os.Stat(chosen); err == nil {
		return chosen, nil
	}
	if !isNew {
		m.dirs.openFailed(tp, chosen)
		return "", fmt.Errorf("%w: cannot create log for %s: it is not new and log dirs %s are offline",
			ErrStorage, tp, strings.Join(offline, ","))
	}
	return chosen, nil
}

// logFailedErrLocked is logFailedLocked returning err, for a follower's
// write paths: a failed truncation or append takes the dir offline as a
// leader's does. Caller holds r.mu.
func (r *Replica) logFailedErrLocked(err error) error {
	r.logFailedLocked(err)
	return err
}
