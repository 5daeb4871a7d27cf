package partition

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/logstore"
)

// syncCountFS counts the fsyncs of the files it opens and the most that
// ran at once (each takes delay, so that fsyncs of parallel jobs
// overlap), and the fsyncs of directories.
type syncCountFS struct {
	logstore.FS
	delay                    time.Duration
	syncs, running, dirSyncs atomic.Int64
	mu                       sync.Mutex
	peak                     int64
	dirSyncsOf               map[string]int // by directory, when non-nil
}

func (f *syncCountFS) SyncDir(name string) error {
	f.dirSyncs.Add(1)
	f.mu.Lock()
	if f.dirSyncsOf != nil {
		f.dirSyncsOf[filepath.Clean(name)]++
	}
	f.mu.Unlock()
	return f.FS.SyncDir(name)
}

func (f *syncCountFS) OpenFile(name string, flag int, perm fs.FileMode) (logstore.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return file, err
	}
	return &syncCountFile{File: file, fs: f}, nil
}

type syncCountFile struct {
	logstore.File
	fs *syncCountFS
}

func (f *syncCountFile) Sync() error {
	n := f.fs.running.Add(1)
	defer f.fs.running.Add(-1)
	f.fs.syncs.Add(1)
	f.fs.mu.Lock()
	f.fs.peak = max(f.fs.peak, n)
	f.fs.mu.Unlock()
	time.Sleep(f.fs.delay)
	return f.File.Sync()
}

func shutdownManager(t *testing.T, dirs []string, threads int, fsys logstore.FS) *Manager {
	t.Helper()
	m, err := NewManager(Config{BrokerID: 1, LogDirs: dirs,
		HighWatermarkCheckpointInterval: time.Hour, RecoveryPointCheckpointInterval: time.Hour,
		RetentionCheckInterval: time.Hour, Log: zerolog.New(zerolog.NewTestWriter(t)),
		RecoveryThreadsPerDataDir: threads, Files: logstore.NewFileCache(64), logFS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// writtenLeaders applies n leader states of topic t to m and appends one
// idempotent batch to each, returning the states.
func writtenLeaders(t *testing.T, m *Manager, n int) []PartitionState {
	t.Helper()
	var states []PartitionState
	for i := range n {
		states = append(states, leaderOf(cluster.TopicPartition{Topic: "t", Partition: int32(i)}))
	}
	if err := m.ApplyPartitionStates(states); err != nil {
		t.Fatal(err)
	}
	for _, st := range states {
		if _, err := m.Append(st.TopicPartition, buildBatch(batchSpec{producerID: 7}), 1); err != nil {
			t.Fatal(err)
		}
	}
	return states
}

// checkRestart opens dir with a new Manager, applies states and checks
// that every log ends at leo.
func checkRestart(t *testing.T, dir string, threads int, states []PartitionState, leo int64) {
	t.Helper()
	m := shutdownManager(t, []string{dir}, threads, logstore.OSFS)
	defer m.Close()
	if err := m.ApplyPartitionStates(states); err != nil {
		t.Fatal(err)
	}
	for _, st := range states {
		if r, _ := m.get(st.TopicPartition); r == nil || r.log.LogEndOffset() != leo {
			t.Fatalf("%s after the restart: %v, want log end %d", st.TopicPartition, r, leo)
		}
	}
}

// TestCloseFlushesLogsInParallel: Close flushes and closes the logs of a
// dir with RecoveryThreadsPerDataDir goroutines (Kafka's LogManager
// shutdown), never more, and still leaves the clean-shutdown marker.
func TestCloseFlushesLogsInParallel(t *testing.T) {
	const logs = 12
	for _, threads := range []int{1, 4} {
		t.Run(fmt.Sprintf("threads=%d", threads), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "d1")
			fsys := &syncCountFS{FS: logstore.OSFS, delay: 5 * time.Millisecond}
			m := shutdownManager(t, []string{dir}, threads, fsys)
			writtenLeaders(t, m, logs)
			fsys.mu.Lock()
			fsys.peak = 0
			fsys.mu.Unlock()
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			fsys.mu.Lock()
			peak := fsys.peak
			fsys.mu.Unlock()
			if peak > int64(threads) {
				t.Errorf("%d fsyncs at once with %d threads", peak, threads)
			}
			if threads > 1 && peak < 2 {
				t.Errorf("at most %d fsync at once with %d threads: the logs closed one by one", peak, threads)
			}
			if _, err := os.Stat(filepath.Join(dir, CleanShutdownFile)); err != nil {
				t.Errorf("no clean shutdown marker: %v", err)
			}
		})
	}
}

// TestCloseOfNewEmptyLogsWritesNothing: the logs a LeaderAndIsr created
// (a third led here, so with a leader epoch assigned) that never took a
// write cost no fsync of a file or a directory, nor a sync of the file
// system, at Close, as nothing of
// them needs to survive a crash (logstore's deferred creation); the dir
// still gets its clean-shutdown marker and the restart opens the logs
// empty.
func TestCloseOfNewEmptyLogsWritesNothing(t *testing.T) {
	const logs = 30
	dir := filepath.Join(t.TempDir(), "d1")
	fsys := &fsSyncFS{syncCountFS: syncCountFS{FS: logstore.OSFS}}
	m := shutdownManager(t, []string{dir}, 2, fsys)
	var states []PartitionState
	for i := range logs {
		st := leaderOf(cluster.TopicPartition{Topic: "t", Partition: int32(i)})
		if i%3 != 0 {
			st.LeaderAndIsr.Leader = 2 // followed here
		}
		states = append(states, st)
	}
	if err := m.ApplyPartitionStates(states); err != nil {
		t.Fatal(err)
	}
	if n, d := fsys.syncs.Load(), fsys.dirSyncs.Load(); n != 0 || d != 0 {
		t.Fatalf("creating %d logs fsynced %d files and %d directories, want none", logs, n, d)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if n, d, f := fsys.syncs.Load(), fsys.dirSyncs.Load(), fsys.fsSyncs.Load(); n != 0 || d != 0 || f != 0 {
		t.Errorf("closing %d new empty logs fsynced %d files and %d directories and synced the file system %d times, want none", logs, n, d, f)
	}
	if _, err := os.Stat(filepath.Join(dir, CleanShutdownFile)); err != nil {
		t.Errorf("no clean shutdown marker: %v", err)
	}
	checkRestart(t, dir, 2, states, 0)
}

// TestCloseFsyncsLogDirOnce: closing new logs that were written (their
// creation, deferred by Open, made durable by the shutdown's flush)
// fsyncs their log dir, the parent of each, once for all of them, and
// after a crash-free restart every log holds its data.
func TestCloseFsyncsLogDirOnce(t *testing.T) {
	const logs = 12
	for _, threads := range []int{1, 3} {
		t.Run(fmt.Sprintf("threads=%d", threads), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "d1")
			fsys := &syncCountFS{FS: logstore.OSFS, dirSyncsOf: map[string]int{}}
			m := shutdownManager(t, []string{dir}, threads, fsys)
			states := writtenLeaders(t, m, logs)
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			fsys.mu.Lock()
			got := fsys.dirSyncsOf[filepath.Clean(dir)]
			fsys.mu.Unlock()
			if got != 1 {
				t.Errorf("the log dir of %d new logs fsynced %d times at Close, want once", logs, got)
			}
			checkRestart(t, dir, threads, states, 1)
		})
	}
}

// TestCloseOfIdleLogsSyncsNothing: a Manager whose logs took no write
// since they were opened (after a clean shutdown) fsyncs no file of
// theirs at Close, and writes no producer snapshot; the restart after is
// clean again and the logs end where they did.
func TestCloseOfIdleLogsSyncsNothing(t *testing.T) {
	const logs = 5
	dir := filepath.Join(t.TempDir(), "d1")
	var states []PartitionState
	for i := range logs {
		states = append(states, leaderOf(cluster.TopicPartition{Topic: "t", Partition: int32(i)}))
	}
	m := shutdownManager(t, []string{dir}, 2, logstore.OSFS)
	if err := m.ApplyPartitionStates(states); err != nil {
		t.Fatal(err)
	}
	for _, st := range states {
		if _, err := m.Append(st.TopicPartition, buildBatch(batchSpec{producerID: 7, producerEpoch: 0, baseSequence: 0}), 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	snapshots := func() int {
		n := 0
		for _, st := range states {
			n += len(snapshotOffsets(filepath.Join(dir, partitionDirName(st.TopicPartition))))
		}
		return n
	}
	before := snapshots()
	if before != logs {
		t.Fatalf("%d producer snapshots after the first close, want %d", before, logs)
	}
	fsys := &syncCountFS{FS: logstore.OSFS}
	m2 := shutdownManager(t, []string{dir}, 2, fsys)
	if err := m2.ApplyPartitionStates(states); err != nil {
		t.Fatal(err)
	}
	opened := fsys.syncs.Load()
	if err := m2.Close(); err != nil {
		t.Fatal(err)
	}
	if n := fsys.syncs.Load() - opened; n != 0 {
		t.Errorf("closing %d idle logs ran %d fsyncs of their files, want 0", logs, n)
	}
	if got := snapshots(); got != before {
		t.Errorf("%d producer snapshots after closing idle logs, want %d", got, before)
	}
	if _, err := os.Stat(filepath.Join(dir, CleanShutdownFile)); err != nil {
		t.Fatalf("no clean shutdown marker: %v", err)
	}
	m3 := shutdownManager(t, []string{dir}, 2, logstore.OSFS)
	defer m3.Close()
	if err := m3.ApplyPartitionStates(states); err != nil {
		t.Fatal(err)
	}
	for _, st := range states {
		if r, _ := m3.get(st.TopicPartition); r.log.LogEndOffset() != 1 {
			t.Errorf("%s LEO %d, want 1", st.TopicPartition, r.log.LogEndOffset())
		}
	}
}

// TestStopReplicaBatchInParallel: the logs of one StopReplica request
// flush and close with RecoveryThreadsPerDataDir goroutines, never more;
// each partition's answer is StopReplica's (a stale leader epoch is
// fenced and its replica kept), and a partition named twice is stopped
// once and answered twice.
func TestStopReplicaBatchInParallel(t *testing.T) {
	const logs = 12
	for _, threads := range []int{1, 4} {
		t.Run(fmt.Sprintf("threads=%d", threads), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "d1")
			fsys := &syncCountFS{FS: logstore.OSFS, delay: 5 * time.Millisecond}
			m := shutdownManager(t, []string{dir}, threads, fsys)
			defer m.Close()
			var states []PartitionState
			for i := range logs {
				st := leaderOf(cluster.TopicPartition{Topic: "t", Partition: int32(i)})
				st.LeaderAndIsr.LeaderEpoch = 3
				states = append(states, st)
			}
			if err := m.ApplyPartitionStates(states); err != nil {
				t.Fatal(err)
			}
			var stops []StopRequest
			for _, st := range states {
				if _, err := m.Append(st.TopicPartition, buildBatch(batchSpec{}), 1); err != nil {
					t.Fatal(err)
				}
				stops = append(stops, StopRequest{TopicPartition: st.TopicPartition, LeaderEpoch: 3})
			}
			stale := cluster.TopicPartition{Topic: "t", Partition: 0}
			stops[0].LeaderEpoch = 2
			again := stops[1]
			stops = append(stops, again, StopRequest{TopicPartition: cluster.TopicPartition{Topic: "none", Partition: 0}, LeaderEpoch: 1})
			fsys.mu.Lock()
			fsys.peak = 0
			fsys.mu.Unlock()
			res := m.StopReplicaBatch(stops, false)
			if len(res) != len(stops) {
				t.Fatalf("%d results for %d stops", len(res), len(stops))
			}
			for i, r := range res {
				tp := stops[i].TopicPartition
				switch {
				case tp == stale:
					if r.Stopped || !errors.Is(r.Err, ErrFencedLeaderEpoch) {
						t.Errorf("%s in a stale epoch: stopped %v, err %v; want fenced", tp, r.Stopped, r.Err)
					}
				case !r.Stopped || r.Err != nil:
					t.Errorf("%s: stopped %v, err %v", tp, r.Stopped, r.Err)
				}
			}
			hosted := m.Hosted()
			if len(hosted) != 1 || hosted[0] != stale {
				t.Errorf("hosted after the stops: %v, want only %s", hosted, stale)
			}
			fsys.mu.Lock()
			peak := fsys.peak
			fsys.mu.Unlock()
			if peak > int64(threads) {
				t.Errorf("%d fsyncs at once with %d threads", peak, threads)
			}
			if threads > 1 && peak < 2 {
				t.Errorf("at most %d fsync at once with %d threads: the logs closed one by one", peak, threads)
			}
		})
	}
}

// fsSyncFS is syncCountFS that also syncs whole file systems
// (logstore.FileSystemSyncer), counting those and failing them with
// failSyncFS.
type fsSyncFS struct {
	syncCountFS
	fsSyncs    atomic.Int64
	failSyncFS error
}

func (f *fsSyncFS) SyncFileSystem(dir string) error {
	f.fsSyncs.Add(1)
	if f.failSyncFS != nil {
		return f.failSyncFS
	}
	return logstore.OSFS.(logstore.FileSystemSyncer).SyncFileSystem(dir)
}

// TestCloseSyncsFileSystemOnce: on a file system that syncs as a whole,
// closing logs written since their creation fsyncs no file but the
// leader epochs' and no directory, and syncs the log dir's file system
// once; the restart after is clean (no segment rebuilt) with every
// record. When that sync fails the dir gets no clean-shutdown marker and
// Close reports it.
func TestCloseSyncsFileSystemOnce(t *testing.T) {
	const logs = 12
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("fail=%t", fail), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "d1")
			fsys := &fsSyncFS{syncCountFS: syncCountFS{FS: logstore.OSFS, dirSyncsOf: map[string]int{}}}
			m := shutdownManager(t, []string{dir}, 2, fsys)
			states := writtenLeaders(t, m, logs)
			if fail {
				// Out of descriptors opening the dir: not an I/O error,
				// so the dir stays online, but nothing was synced.
				fsys.failSyncFS = &fs.PathError{Op: "open", Path: dir, Err: syscall.EMFILE}
			}
			before := fsys.syncs.Load()
			err := m.Close()
			if fail != (err != nil) {
				t.Fatalf("Close with a failing sync of the file system %t: %v", fail, err)
			}
			if n := fsys.fsSyncs.Load(); n != 1 {
				t.Errorf("the file system synced %d times at Close, want once", n)
			}
			// Each of the 12 leaders wrote its leader epochs (deferred
			// since it became leader): one fsync each, nothing else.
			if n := fsys.syncs.Load() - before; n != logs {
				t.Errorf("Close fsynced %d files, want the %d leader epoch files", n, logs)
			}
			if n := fsys.dirSyncs.Load(); n != 0 {
				t.Errorf("Close fsynced %d directories, want none", n)
			}
			_, statErr := os.Stat(filepath.Join(dir, CleanShutdownFile))
			if marker := statErr == nil; marker == fail {
				t.Fatalf("clean shutdown marker %t after a sync that failed %t", marker, fail)
			}
			// The recovery points claim the records only once synced.
			rps, err := logstore.ReadOffsetCheckpoint(filepath.Join(dir, logstore.RecoveryPointCheckpointFile))
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Fatal(err)
			}
			claimed := 0
			for _, e := range rps {
				if e.Offset > 0 {
					claimed++
				}
			}
			if want := map[bool]int{false: logs, true: 0}[fail]; claimed != want {
				t.Fatalf("recovery-point checkpoint after a sync that failed %t: %d logs claimed past 0, want %d (%v)", fail, claimed, want, rps)
			}
			checkRestart(t, dir, 2, states, 1)
		})
	}
}

// TestStopReplicaDuringShutdownLeavesLogOpen: after BeginShutdown a
// StopReplica without delete stops the replica's fetching but does not
// close (flush) its log; Close closes it with the others, and it restarts
// with its records. A StopReplica with delete still deletes.
func TestStopReplicaDuringShutdownLeavesLogOpen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d1")
	m := shutdownManager(t, []string{dir}, 1, logstore.OSFS)
	tp := cluster.TopicPartition{Topic: "t", Partition: 0}
	gone := cluster.TopicPartition{Topic: "t", Partition: 1}
	states := []PartitionState{leaderOf(tp), leaderOf(gone)}
	if err := m.ApplyPartitionStates(states); err != nil {
		t.Fatal(err)
	}
	for _, st := range states {
		if _, err := m.Append(st.TopicPartition, buildBatch(batchSpec{producerID: 7}), 1); err != nil {
			t.Fatal(err)
		}
	}
	m.BeginShutdown()
	if stopped, err := m.StopReplica(tp, false, 0); !stopped || err != nil {
		t.Fatalf("StopReplica: %t, %v", stopped, err)
	}
	r, _ := m.get(tp)
	if r == nil {
		t.Fatal("the replica was dropped by a StopReplica during shutdown")
	}
	if r.log.LogEndOffset() != 1 || r.log.RecoveryPoint() != 0 {
		t.Fatalf("log after StopReplica during shutdown: LEO %d, recovery point %d; want 1 and 0 (open, not flushed)",
			r.log.LogEndOffset(), r.log.RecoveryPoint())
	}
	if stopped, err := m.StopReplica(gone, true, 0); !stopped || err != nil {
		t.Fatalf("StopReplica with delete: %t, %v", stopped, err)
	}
	if _, err := os.Stat(filepath.Join(dir, partitionDirName(gone))); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a deleted replica's directory after StopReplica with delete: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m2 := shutdownManager(t, []string{dir}, 1, logstore.OSFS)
	defer m2.Close()
	if err := m2.ApplyPartitionStates(states[:1]); err != nil {
		t.Fatal(err)
	}
	if r, _ := m2.get(tp); r == nil || r.log.LogEndOffset() != 1 {
		t.Fatalf("%s after the restart: %v", tp, r)
	}
}
