package partition

import (
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/logstore"
)

// closeFailure is a replica whose log failed to flush or close at
// shutdown, and the log dir it is in (which then gets no clean-shutdown
// marker); notDurable says the sync of the dir failed, so that no
// checkpoint may claim what its logs hold.
type closeFailure struct {
	dir        string
	err        error
	notDurable bool
}

// closeReplicas flushes, snapshots (producer state) and closes every
// replica of rs, as Kafka's LogManager.shutdown does: one job per log,
// the jobs of each log dir run by RecoveryThreadsPerDataDir goroutines
// that live only for the call, the dirs side by side. Idle logs cost no
// fsync (Log.Flush and Log.Close sync only what changed) and no snapshot
// (writeProducerSnapshotLocked skips an offset it already has). A log dir
// holding logs created since their last flush is fsynced once after its
// jobs, for all of them (Log.CloseLeavingParent), before the caller
// writes the checkpoints that claim them.
//
// On a file system that syncs as a whole (logstore.FileSystemSyncer: Linux)
// the jobs fsync nothing but changed leader epochs (Log.CloseUnsynced,
// an unsynced producer snapshot) and each log dir's file system is synced
// once after its jobs (unless none of them held data): a shutdown after
// writes to 1,000 logs costs one syncfs instead of 7,000 fsyncs. (syncfs
// writes back everything dirty on the file system, other programs' data
// too: Kafka's log dirs usually have disks of their own.) Either way nothing claims a log (the
// caller's checkpoints, the clean-shutdown marker) before the sync that
// makes it durable, and a dir whose sync fails gets neither. It returns
// the failures, in no particular order.
func (m *Manager) closeReplicas(rs map[cluster.TopicPartition]*Replica) []closeFailure {
	threads := max(int(m.recoveryThreads.Load()), 1)
	syncer, unsynced := logstore.FileSystemSyncerOf(m.logFS())
	byDir := map[string][]*Replica{}
	for _, r := range rs {
		d := filepath.Dir(r.dir)
		byDir[d] = append(byDir[d], r)
	}
	var (
		mu     sync.Mutex
		failed []closeFailure
		wg     sync.WaitGroup
	)
	for dir, list := range byDir {
		next := make(chan *Replica, len(list))
		for _, r := range list {
			next <- r
		}
		close(next)
		var owed atomic.Bool // a log of dir left the fsync of dir to us
		var dirWG sync.WaitGroup
		for range min(threads, len(list)) {
			dirWG.Add(1)
			go func() {
				defer dirWG.Done()
				for r := range next {
					parent, errs := m.closeForShutdown(r, unsynced)
					if parent {
						owed.Store(true)
					}
					if len(errs) > 0 {
						mu.Lock()
						for _, err := range errs {
							failed = append(failed, closeFailure{dir: dir, err: err})
						}
						mu.Unlock()
					}
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			dirWG.Wait()
			closed := time.Since(start)
			var err error
			switch {
			case !owed.Load():
			case unsynced:
				if err = syncer.SyncFileSystem(dir); err != nil {
					err = fmt.Errorf("sync the file system of log dir %s after closing its logs: %w", dir, err)
				}
			default:
				if err = m.logFS().SyncDir(dir); err != nil {
					err = fmt.Errorf("fsync log dir %s after closing its new logs: %w", dir, err)
				}
			}
			if err != nil {
				m.noteIOError(dir, err)
				mu.Lock()
				failed = append(failed, closeFailure{dir: dir, err: err, notDurable: true})
				mu.Unlock()
			}
			m.log.Info().Str("dir", dir).Int("logs", len(list)).Bool("syncfs", unsynced && owed.Load()).
				Dur("close_took", closed).Dur("sync_took", time.Since(start)-closed).Msg("closed the logs of a log dir")
		}()
	}
	wg.Wait()
	if unsynced {
		// syncfs reports a write-back error once per file system, to
		// the first sync that samples it: another log dir on the same
		// file system may have synced "successfully" around it. One
		// failed sync therefore makes every dir's logs not durable.
		var syncFailed bool
		for _, f := range failed {
			syncFailed = syncFailed || f.notDurable
		}
		if syncFailed {
			for dir := range byDir {
				failed = append(failed, closeFailure{dir: dir, notDurable: true,
					err: fmt.Errorf("log dir %s: not durable after a failed sync of a log dir's file system", dir)})
			}
		}
	}
	return failed
}

// logFS is the logs' file system.
func (m *Manager) logFS() logstore.FS {
	if m.cfg.logFS == nil {
		return logstore.OSFS
	}
	return m.cfg.logFS
}

// closeForShutdown is one replica's shutdown job: close its log, which
// flushes it (every segment, index and leader epoch fsynced, its recovery
// point at its end), then write its producer state snapshot at that end
// (as the recovery checkpoint would: both bound what a restart reads).
// parentSync says the log was created since its last flush and left the
// fsync of its log dir to the caller (Log.CloseLeavingParent), or, with
// unsynced, that it awaits the caller's sync of the file system. A failed
// close is returned, and no snapshot is written after it; a failed
// snapshot is only logged, as at a recovery checkpoint. A log that never
// held data (logstore's NeverHeldData: a replica created and never
// written) is only closed, at no fsync. With unsynced the log and the
// snapshot are written without fsyncs (Log.CloseUnsynced), for the
// caller's sync of the file system.
func (m *Manager) closeForShutdown(r *Replica, unsynced bool) (parentSync bool, errs []error) {
	if r.log.NeverHeldData() {
		// Nothing to flush or snapshot: Close writes nothing either.
		return false, errorsOf(r.close(false))
	}
	var err error
	write := logstore.WriteFileAtomic
	if unsynced {
		err = r.log.CloseUnsynced()
		write = func(path string, data []byte) error { return logstore.WriteFileUnsynced(logstore.OSFS, path, data) }
		parentSync = true // the caller's sync of the file system
	} else {
		parentSync, err = r.log.CloseLeavingParent()
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("close %s: %w", r.tp, err))
	}
	r.mu.Lock()
	var serr error
	if err == nil && !r.closed && r.storageErr == nil { // a failed replica's state may be false
		serr = r.writeProducerSnapshotWith(write)
	}
	r.mu.Unlock()
	if serr != nil {
		r.logger.Error().Err(serr).Msg("producer state snapshot")
	}
	if cerr := r.close(false); err == nil && cerr != nil { // the log's Close again: its first answer
		errs = append(errs, cerr)
	}
	return parentSync, errs
}

// errorsOf is err as a list: none for nil.
func errorsOf(err error) []error {
	if err == nil {
		return nil
	}
	return []error{err}
}

// StopRequest is one partition of a StopReplica request: its leader epoch
// as Manager.StopReplica takes it.
type StopRequest struct {
	TopicPartition cluster.TopicPartition
	LeaderEpoch    int32
}

// StopResult is Manager.StopReplica's answer for one StopRequest.
type StopResult struct {
	Stopped bool
	Err     error
}

// StopReplicaBatch is Manager.StopReplica for every partition of one
// StopReplica request, the partitions of each log dir stopped by
// RecoveryThreadsPerDataDir goroutines that live only for the call (as
// Close's): a stop without remove flushes and closes the log, and a
// controlled shutdown stops every partition the broker follows. The
// stops of one partition named twice run in order on one goroutine. The
// results are in the order of stops.
func (m *Manager) StopReplicaBatch(stops []StopRequest, remove bool) []StopResult {
	out := make([]StopResult, len(stops))
	byTP := map[cluster.TopicPartition][]int{}
	var order []cluster.TopicPartition
	for i, s := range stops {
		tp := s.TopicPartition
		if _, seen := byTP[tp]; !seen {
			order = append(order, tp)
		}
		byTP[tp] = append(byTP[tp], i)
	}
	byDir := map[string][][]int{}
	m.mu.RLock()
	for _, tp := range order {
		d := "" // not open here: nothing to flush
		if r := m.replicas[tp]; r != nil {
			d = filepath.Dir(r.dir)
		}
		byDir[d] = append(byDir[d], byTP[tp])
	}
	m.mu.RUnlock()
	threads := max(int(m.recoveryThreads.Load()), 1)
	var wg sync.WaitGroup
	for _, jobs := range byDir {
		next := make(chan []int, len(jobs))
		for _, j := range jobs {
			next <- j
		}
		close(next)
		for range min(threads, len(jobs)) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range next {
					for _, i := range j {
						s := stops[i]
						out[i].Stopped, out[i].Err = m.StopReplica(s.TopicPartition, remove, s.LeaderEpoch)
					}
				}
			}()
		}
	}
	wg.Wait()
	return out
}
