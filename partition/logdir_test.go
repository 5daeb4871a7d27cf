package partition

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/logstore"
)

// faultFS is the OS file system with logstore.MemFS's kind of fault
// injection: while armed, the operations in ops on paths under dir fail
// with err (EIO, ENOSPC). The Manager's own files stay on the OS; only the
// logs go through it (logDirState.fs).
type faultFS struct {
	logstore.FS
	mu    sync.Mutex
	dir   string
	ops   map[logstore.MemOp]bool
	err   error
	calls int // operations failed
	// onCreate, if set, runs before a file is created (once).
	onCreate func(name string)
}

func newFaultFS() *faultFS { return &faultFS{FS: logstore.OSFS} }

func (f *faultFS) arm(dir string, err error, ops ...logstore.MemOp) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dir, f.err, f.ops = filepath.Clean(dir), err, map[logstore.MemOp]bool{}
	for _, op := range ops {
		f.ops[op] = true
	}
}

func (f *faultFS) fail(op logstore.MemOp, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil || !f.ops[op] || !strings.HasPrefix(filepath.Clean(name), f.dir+string(filepath.Separator)) {
		return nil
	}
	f.calls++
	return &fs.PathError{Op: fmt.Sprint(op), Path: name, Err: f.err}
}

func (f *faultFS) OpenFile(name string, flag int, perm fs.FileMode) (logstore.File, error) {
	if flag&os.O_CREATE != 0 {
		f.mu.Lock()
		hook := f.onCreate
		f.onCreate = nil
		f.mu.Unlock()
		if hook != nil {
			hook(name)
		}
		if err := f.fail(logstore.MemOpCreate, name); err != nil {
			return nil, err
		}
	}
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f}, nil
}

func (f *faultFS) Rename(o, n string) error {
	if err := f.fail(logstore.MemOpRename, n); err != nil {
		return err
	}
	return f.FS.Rename(o, n)
}

func (f *faultFS) RemoveAll(name string) error {
	if err := f.fail(logstore.MemOpRemove, name); err != nil {
		return err
	}
	return f.FS.RemoveAll(name)
}

type faultFile struct {
	logstore.File
	fs *faultFS
}

func (f *faultFile) Write(b []byte) (int, error) {
	if err := f.fs.fail(logstore.MemOpWrite, f.Name()); err != nil {
		return 0, err
	}
	return f.File.Write(b)
}

func (f *faultFile) WriteAt(b []byte, off int64) (int, error) {
	if err := f.fs.fail(logstore.MemOpWrite, f.Name()); err != nil {
		return 0, err
	}
	return f.File.WriteAt(b, off)
}

func (f *faultFile) Sync() error {
	if err := f.fs.fail(logstore.MemOpSync, f.Name()); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *faultFile) Truncate(n int64) error {
	if err := f.fs.fail(logstore.MemOpTruncate, f.Name()); err != nil {
		return err
	}
	return f.File.Truncate(n)
}

// twoDirManager is broker 1 with log dirs d0 and d1 whose logs go
// through ffs, leading t-0..t-3 alone (ISR [1], so acks=all commits at
// once): dirFor places t-0 and t-2 in d0, t-1 and t-3 in d1.
type twoDirManager struct {
	m        *Manager
	ffs      *faultFS
	d0, d1   string
	cfg      cluster.LogConfig
	failures chan LogDirFailure
}

func tpN(n int32) cluster.TopicPartition { return cluster.TopicPartition{Topic: "t", Partition: n} }

func newTwoDirManager(t *testing.T, root string, ffs *faultFS, flushMessages int64) *twoDirManager {
	t.Helper()
	if root == "" {
		root = t.TempDir()
	}
	d0, d1 := filepath.Join(root, "d0"), filepath.Join(root, "d1")
	m, err := NewManager(Config{
		BrokerID: 1, LogDirs: []string{d0, d1},
		HighWatermarkCheckpointInterval: time.Hour, RecoveryPointCheckpointInterval: time.Hour,
		RetentionCheckInterval: time.Hour, Now: (&fakeClock{t: time.Unix(1000, 0)}).Now,
		Log:          zerolog.New(zerolog.NewTestWriter(t)),
		LeaderClient: idleLeader{}, // the Manager is not started: no fetch runs
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	m.cfg.logFS = ffs
	h := &twoDirManager{m: m, ffs: ffs, d0: filepath.Clean(d0), d1: filepath.Clean(d1), cfg: cluster.DefaultLogConfig(),
		failures: make(chan LogDirFailure, 4)}
	h.cfg.FlushMessages = flushMessages
	m.SetLogDirFailureHandler(func(f LogDirFailure) { h.failures <- f })
	for p := range int32(4) {
		st := PartitionState{TopicPartition: tpN(p), Replicas: []int32{1}, Config: h.cfg,
			LeaderAndIsr: cluster.LeaderAndIsr{Leader: 1, LeaderEpoch: 0, Isr: []int32{1}, ZkVersion: 0}}
		if err := m.ApplyPartitionStates([]PartitionState{st}); err != nil {
			t.Fatal(err)
		}
	}
	for p := range int32(4) {
		want := []string{h.d0, h.d1}[p%2]
		if r, _ := m.get(tpN(p)); filepath.Dir(r.dir) != want {
			t.Fatalf("%s in %s, want %s", tpN(p), r.dir, want)
		}
	}
	return h
}

// produce appends one acks=all batch to tp and waits for it to commit; it
// returns the batch's last offset.
func (h *twoDirManager) produce(tp cluster.TopicPartition) (int64, error) {
	res, err := h.m.Append(tp, buildBatch(batchSpec{records: 2, valueSize: 10}), -1)
	if err != nil {
		return -1, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.m.WaitCommitted(ctx, tp, res.LastOffset, res.LeaderEpoch); err != nil {
		return -1, err
	}
	return res.LastOffset, nil
}

func (h *twoDirManager) failure(t *testing.T) LogDirFailure {
	t.Helper()
	select {
	case f := <-h.failures:
		return f
	case <-time.After(10 * time.Second):
		t.Fatal("no log dir failure reported")
		return LogDirFailure{}
	}
}

// TestLogDirFailureOnWrite: a write that fails with EIO in one of two log
// dirs (the append's segment write, which logstore undoes, so no fsync
// failed) takes that whole dir offline, as Kafka's LogDirFailureChannel:
// both of its replicas stop and answer ErrStorage (KAFKA_STORAGE_ERROR) to
// produce, fetch, ListOffsets, OffsetsForLeaderEpoch and a LeaderAndIsr
// state; the handler is told the dir, its partitions and the dir left
// online; DescribeLogDirs reports the error; the other dir's replicas keep
// serving, and every record acknowledged there survives a restart.
func TestLogDirFailureOnWrite(t *testing.T) {
	root := t.TempDir()
	ffs := newFaultFS()
	h := newTwoDirManager(t, root, ffs, 0)
	acked := map[cluster.TopicPartition]int64{}
	for i := 0; i < 3; i++ {
		for p := range int32(4) {
			off, err := h.produce(tpN(p))
			if err != nil {
				t.Fatal(err)
			}
			acked[tpN(p)] = off
		}
	}
	// A pending acks=all wait on a replica of the failing dir fails at once.
	ffs.arm(h.d1, syscall.EIO, logstore.MemOpWrite)
	_, err := h.produce(tpN(1))
	if !errors.Is(err, ErrStorage) {
		t.Fatalf("produce to %s with its dir failing: %v, want ErrStorage", tpN(1), err)
	}
	f := h.failure(t)
	if f.Dir != h.d1 || !errors.Is(f.Err, syscall.EIO) {
		t.Fatalf("failure %+v, want dir %s with EIO", f, h.d1)
	}
	if want := []cluster.TopicPartition{tpN(1), tpN(3)}; !slices.Equal(f.Partitions, want) {
		t.Fatalf("offline partitions %v, want %v", f.Partitions, want)
	}
	if !slices.Equal(f.Online, []string{h.d0}) {
		t.Fatalf("online dirs %v, want [%s]", f.Online, h.d0)
	}
	// t-3 never met the error itself: the whole dir went.
	for _, tp := range []cluster.TopicPartition{tpN(1), tpN(3)} {
		if _, err := h.m.Append(tp, buildBatch(batchSpec{records: 1}), -1); !errors.Is(err, ErrStorage) {
			t.Errorf("append to offline %s: %v, want ErrStorage", tp, err)
		}
		if _, err := h.m.Read(tp, ReadRequest{FetchOffset: 0, MaxBytes: 1000, ReplicaID: -1}); !errors.Is(err, ErrStorage) {
			t.Errorf("read of offline %s: %v, want ErrStorage", tp, err)
		}
		if _, _, _, err := h.m.ListOffset(tp, -1, -1, AskerConsumer); !errors.Is(err, ErrStorage) {
			t.Errorf("list offsets of offline %s: %v, want ErrStorage", tp, err)
		}
		if _, _, err := h.m.OffsetForLeaderEpoch(tp, -1, 0); !errors.Is(err, ErrStorage) {
			t.Errorf("offsets for leader epoch of offline %s: %v, want ErrStorage", tp, err)
		}
		st := PartitionState{TopicPartition: tp, Replicas: []int32{1}, Config: h.cfg,
			LeaderAndIsr: cluster.LeaderAndIsr{Leader: 1, LeaderEpoch: 1, Isr: []int32{1}, ZkVersion: 1}}
		if res := h.m.BecomeLeaderOrFollower([]PartitionState{st}); !errors.Is(res[tp].Err, ErrStorage) {
			t.Errorf("LeaderAndIsr state for offline %s: %+v, want ErrStorage", tp, res[tp])
		}
	}
	hosted := h.m.Hosted()
	slices.SortFunc(hosted, compareTopicPartition)
	if want := []cluster.TopicPartition{tpN(0), tpN(2)}; !slices.Equal(hosted, want) {
		t.Fatalf("hosted %v, want %v", hosted, want)
	}
	dirs := h.m.DescribeLogDirs()
	if len(dirs) != 2 || dirs[0].Err != nil || len(dirs[0].Replicas) != 2 || !errors.Is(dirs[1].Err, ErrStorage) || len(dirs[1].Replicas) != 0 {
		t.Fatalf("DescribeLogDirs %+v: want d0 online with 2 replicas, d1 ErrStorage with none", dirs)
	}
	// The healthy dir goes on serving, and a new partition goes there.
	for _, tp := range []cluster.TopicPartition{tpN(0), tpN(2)} {
		off, err := h.produce(tp)
		if err != nil {
			t.Fatalf("produce to %s on the healthy dir: %v", tp, err)
		}
		acked[tp] = off
	}
	st := PartitionState{TopicPartition: tpN(4), Replicas: []int32{1}, Config: h.cfg,
		LeaderAndIsr: cluster.LeaderAndIsr{Leader: 1, LeaderEpoch: 0, Isr: []int32{1}, ZkVersion: 0}}
	// Not new (is_new false): it may be on the failed d1, so no empty log
	// is made for it (Kafka's getOrCreateLog).
	if res := h.m.BecomeLeaderOrFollower([]PartitionState{st}); !errors.Is(res[tpN(4)].Err, ErrStorage) {
		t.Fatalf("a partition not new, not on an online dir, with d1 offline: %+v, want ErrStorage", res[tpN(4)])
	}
	st.IsNew = true
	if err := h.m.ApplyPartitionStates([]PartitionState{st}); err != nil {
		t.Fatal(err)
	}
	if r, _ := h.m.get(tpN(4)); filepath.Dir(r.dir) != h.d0 {
		t.Fatalf("new partition placed in %s, want the online %s", r.dir, h.d0)
	}
	// No checkpoint of the offline dir is written any more.
	h.m.writeCheckpoints(true)
	if _, err := os.Stat(filepath.Join(h.d1, logstore.ReplicationCheckpointFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("checkpoint in the offline dir: %v, want none written", err)
	}
	if err := h.m.Close(); err != nil {
		t.Fatal(err)
	}

	// Restarted on a sound disk, every acknowledged record of the
	// healthy dir is there (and those of the failed dir, whose disk was
	// only refusing writes).
	m2 := newTestManagerDirs(t, h.d0, h.d1)
	for p := range int32(4) {
		tp := tpN(p)
		st := PartitionState{TopicPartition: tp, Replicas: []int32{1}, Config: h.cfg,
			LeaderAndIsr: cluster.LeaderAndIsr{Leader: 1, LeaderEpoch: 1, Isr: []int32{1}, ZkVersion: 1}}
		if err := m2.ApplyPartitionStates([]PartitionState{st}); err != nil {
			t.Fatal(err)
		}
		r, _ := m2.get(tp)
		if leo := r.log.LogEndOffset(); leo != acked[tp]+1 {
			t.Errorf("%s after restart: LEO %d, want %d (last acknowledged offset %d)", tp, leo, acked[tp]+1, acked[tp])
		}
	}
}

func newTestManagerDirs(t *testing.T, dirs ...string) *Manager {
	t.Helper()
	m, err := NewManager(Config{
		BrokerID: 1, LogDirs: dirs,
		HighWatermarkCheckpointInterval: time.Hour, RecoveryPointCheckpointInterval: time.Hour,
		RetentionCheckInterval: time.Hour, Now: (&fakeClock{t: time.Unix(1000, 0)}).Now,
		Log: zerolog.New(zerolog.NewTestWriter(t)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// TestLogDirFailureOnFsync: an fsync that fails with ENOSPC under an
// append (flush.messages=1) takes the dir offline, and an acks=all wait
// in progress on another replica of that dir fails with ErrStorage at
// once rather than time out.
func TestLogDirFailureOnFsync(t *testing.T) {
	ffs := newFaultFS()
	h := newTwoDirManager(t, "", ffs, 1)
	// A wait on t-3 that cannot complete: as a single replica its HW
	// moves at the append, so hold it with an ISR of two.
	st := PartitionState{TopicPartition: tpN(3), Replicas: []int32{1, 2}, Config: h.cfg,
		LeaderAndIsr: cluster.LeaderAndIsr{Leader: 1, LeaderEpoch: 1, Isr: []int32{1, 2}, ZkVersion: 1}}
	if err := h.m.ApplyPartitionStates([]PartitionState{st}); err != nil {
		t.Fatal(err)
	}
	res := mustAppendTo(t, h.m, tpN(3))
	waited := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		waited <- h.m.WaitCommitted(ctx, tpN(3), res.LastOffset, res.LeaderEpoch)
	}()
	r3, _ := h.m.get(tpN(3))
	waitWaiters(t, r3, 1)
	ffs.arm(h.d1, syscall.ENOSPC, logstore.MemOpSync)
	if _, err := h.m.Append(tpN(1), buildBatch(batchSpec{records: 1}), -1); !errors.Is(err, ErrStorage) {
		t.Fatalf("append with a failing fsync: %v, want ErrStorage", err)
	}
	if f := h.failure(t); f.Dir != h.d1 || !errors.Is(f.Err, syscall.ENOSPC) {
		t.Fatalf("failure %+v, want %s with ENOSPC", f, h.d1)
	}
	if err := <-waited; !errors.Is(err, ErrStorage) {
		t.Fatalf("acks=all wait on the other replica of the failed dir: %v, want ErrStorage", err)
	}
	if _, err := h.produce(tpN(0)); err != nil {
		t.Fatalf("produce on the healthy dir: %v", err)
	}
}

func mustAppendTo(t *testing.T, m *Manager, tp cluster.TopicPartition) AppendResult {
	t.Helper()
	res, err := m.Append(tp, buildBatch(batchSpec{records: 1}), -1)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestLogDirFailureOfFollower: a follower whose append from the leader
// fails takes its dir offline too, and leaves its fetcher.
func TestLogDirFailureOfFollower(t *testing.T) {
	ffs := newFaultFS()
	h := newTwoDirManager(t, "", ffs, 0)
	st := PartitionState{TopicPartition: tpN(1), Replicas: []int32{2, 1}, Config: h.cfg,
		LeaderAndIsr: cluster.LeaderAndIsr{Leader: 2, LeaderEpoch: 1, Isr: []int32{2, 1}, ZkVersion: 1}}
	if err := h.m.ApplyPartitionStates([]PartitionState{st}); err != nil {
		t.Fatal(err)
	}
	if !h.m.following(tpN(1)) {
		t.Fatal("follower not in a fetcher")
	}
	r, _ := h.m.get(tpN(1))
	ffs.arm(h.d1, syscall.EIO, logstore.MemOpWrite)
	leo := r.log.LogEndOffset()
	b := buildBatch(batchSpec{records: 1})
	setBaseOffset(b, leo)
	err := r.appendFromLeader(1, leo, FetchPartitionResult{HighWatermark: leo + 1, LogStartOffset: 0, Records: b}, nil)
	if !errors.Is(err, ErrStorage) {
		t.Fatalf("follower append with a failing write: %v, want ErrStorage", err)
	}
	if f := h.failure(t); f.Dir != h.d1 {
		t.Fatalf("failure %+v, want %s", f, h.d1)
	}
	if h.m.following(tpN(1)) {
		t.Fatal("offline follower still in its fetcher")
	}
}

// TestLogDirFailureOfEveryDir: the failure of the last online dir is
// reported with no dir online, which makes the broker stop.
func TestLogDirFailureOfEveryDir(t *testing.T) {
	ffs := newFaultFS()
	h := newTwoDirManager(t, "", ffs, 0)
	ffs.arm(h.d1, syscall.EIO, logstore.MemOpWrite)
	if _, err := h.produce(tpN(1)); !errors.Is(err, ErrStorage) {
		t.Fatal(err)
	}
	if f := h.failure(t); len(f.Online) != 1 {
		t.Fatalf("after the first dir: online %v", f.Online)
	}
	ffs.arm(h.d0, syscall.EIO, logstore.MemOpWrite)
	if _, err := h.produce(tpN(0)); !errors.Is(err, ErrStorage) {
		t.Fatal(err)
	}
	if f := h.failure(t); f.Dir != h.d0 || len(f.Online) != 0 {
		t.Fatalf("after the last dir: %+v, want %s with none online", f, h.d0)
	}
	if len(h.m.OfflineLogDirs()) != 2 {
		t.Fatalf("offline dirs %v", h.m.OfflineLogDirs())
	}
	st := PartitionState{TopicPartition: tpN(9), Replicas: []int32{1}, Config: h.cfg,
		LeaderAndIsr: cluster.LeaderAndIsr{Leader: 1, LeaderEpoch: 0, Isr: []int32{1}, ZkVersion: 0}}
	if res := h.m.BecomeLeaderOrFollower([]PartitionState{st}); !errors.Is(res[tpN(9)].Err, ErrStorage) {
		t.Fatalf("new partition with every dir offline: %+v, want ErrStorage", res[tpN(9)])
	}
}

// TestLogDirNotFailedByRefusals: errors that refuse a request, or meet a
// closed log, are not I/O failures; a descriptor shortage is not either.
func TestLogDirNotFailedByRefusals(t *testing.T) {
	for _, err := range []error{
		mapLogError(logstore.ErrClosed), mapLogError(logstore.ErrCorrupt), mapLogError(logstore.ErrInvalidRecord),
		mapLogError(logstore.ErrOffsetOutOfRange), logstore.ErrOffsetMismatch, mapLogError(logstore.ErrRecordListTooLarge),
		mapLogError(&fs.PathError{Op: "open", Path: "x", Err: syscall.EMFILE}), errManagerClosed, nil,
	} {
		if isIOFailure(err) {
			t.Errorf("%v taken as an I/O failure", err)
		}
	}
	for _, err := range []error{
		mapLogError(fmt.Errorf("flush: %w: %w", logstore.ErrStorage, syscall.EIO)),
		mapLogError(&fs.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}),
		&fs.PathError{Op: "rename", Path: "x", Err: syscall.EROFS},
	} {
		if !isIOFailure(err) {
			t.Errorf("%v not taken as an I/O failure", err)
		}
	}
}

// idleLeader is a LeaderClient never called: without Start no fetcher runs.
type idleLeader struct{}

func (idleLeader) Fetch(ctx context.Context, _ int32, _ FetchRequest) (FetchResponse, error) {
	<-ctx.Done()
	return FetchResponse{}, ctx.Err()
}

func (idleLeader) OffsetsForLeaderEpoch(ctx context.Context, _ int32, _ []EpochQuery) ([]EpochAnswer, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// following reports whether tp is in a fetcher.
func (m *Manager) following(tp cluster.TopicPartition) bool {
	m.fetchMu.Lock()
	defer m.fetchMu.Unlock()
	for _, f := range m.fetchers {
		f.mu.Lock()
		_, ok := f.parts[tp]
		f.mu.Unlock()
		if ok {
			return true
		}
	}
	return false
}

// setBaseOffset sets a built batch's base offset, as a leader's log holds it.
func setBaseOffset(b []byte, off int64) { binary.BigEndian.PutUint64(b[0:], uint64(off)) }

// TestLogDirFailureOnCheckpoint: a checkpoint file of a dir that cannot
// be written takes that dir offline too; the other dir's checkpoints are
// written.
func TestLogDirFailureOnCheckpoint(t *testing.T) {
	h := newTwoDirManager(t, "", newFaultFS(), 0)
	// A non-empty directory where the file goes: the rename over it fails.
	if err := os.MkdirAll(filepath.Join(h.d1, logstore.ReplicationCheckpointFile, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	h.m.writeCheckpoints(false)
	f := h.failure(t)
	if f.Dir != h.d1 || !slices.Equal(f.Online, []string{h.d0}) {
		t.Fatalf("failure %+v, want %s offline and %s online", f, h.d1, h.d0)
	}
	if _, err := h.m.Append(tpN(1), buildBatch(batchSpec{records: 1}), -1); !errors.Is(err, ErrStorage) {
		t.Fatalf("append to a replica of the dir whose checkpoint failed: %v, want ErrStorage", err)
	}
	if _, err := os.Stat(filepath.Join(h.d0, logstore.ReplicationCheckpointFile)); err != nil {
		t.Fatalf("healthy dir's checkpoint: %v", err)
	}
}

// TestLogDirFailureDuringOpen: a log whose dir fails while it opens (the
// failure handled before the replica is installed) is not installed: the
// partition answers ErrStorage.
func TestLogDirFailureDuringOpen(t *testing.T) {
	ffs := newFaultFS()
	h := newTwoDirManager(t, "", ffs, 0)
	tp := tpN(4) // two partitions in each dir: dirFor picks d0, the first
	ffs.mu.Lock()
	ffs.onCreate = func(string) { // the log's first file: its dir is chosen
		h.m.maybeAddOfflineLogDir(h.d0, syscall.EIO) // another replica's failure
		h.m.waitLogDirFailures()
	}
	ffs.mu.Unlock()
	st := PartitionState{TopicPartition: tp, Replicas: []int32{1}, Config: h.cfg,
		LeaderAndIsr: cluster.LeaderAndIsr{Leader: 1, LeaderEpoch: 0, Isr: []int32{1}, ZkVersion: 0}}
	res := h.m.BecomeLeaderOrFollower([]PartitionState{st})
	if !errors.Is(res[tp].Err, ErrStorage) {
		t.Fatalf("state for a partition whose dir failed during its open: %+v, want ErrStorage", res[tp])
	}
	if _, err := h.m.get(tp); !errors.Is(err, ErrStorage) {
		t.Fatalf("lookup after the open: %v, want ErrStorage", err)
	}
	if _, err := h.produce(tpN(1)); err != nil {
		t.Fatalf("produce on the other dir: %v", err)
	}
}
