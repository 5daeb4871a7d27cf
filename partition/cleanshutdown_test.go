package partition

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/logstore"
)

// readCountFS is the OS file system counting the bytes read from segment
// data (.log files).
type readCountFS struct {
	logstore.FS
	logBytes atomic.Int64
}

func (c *readCountFS) OpenFile(name string, flag int, perm fs.FileMode) (logstore.File, error) {
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return &readCountFile{File: f, n: &c.logBytes}, nil
}

type readCountFile struct {
	logstore.File
	n *atomic.Int64
}

func (f *readCountFile) Read(p []byte) (int, error) {
	n, err := f.File.Read(p)
	f.n.Add(int64(n))
	return n, err
}

func (f *readCountFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.n.Add(int64(n))
	return n, err
}

// TestCleanShutdownReadsNoSegmentData: Close leaves Kafka's
// .kafka_cleanshutdown in the log dir; a restart finds and deletes it,
// and opening its 1,000 logs reads (almost) no segment data, at most each
// last segment's tail after its last index entry. Without the marker (a
// crash) the same opens recover every segment from the recovery point
// on, reading them whole, and the records are all there either way.
func TestCleanShutdownReadsNoSegmentData(t *testing.T) {
	const logs = 1000
	if testing.Short() {
		t.Skip("writes 1,000 logs; not in -short")
	}
	dir := filepath.Join(t.TempDir(), "logs")
	cfg := cluster.DefaultLogConfig()
	cfg.SegmentBytes = 4 << 10 // three batches a segment, four segments a log
	cfg.IndexIntervalBytes = 1 << 10
	var states []PartitionState
	for p := range logs {
		st := leaderState(1, 0, []int32{1}, []int32{1}, cfg)
		st.TopicPartition = cluster.TopicPartition{Topic: "t", Partition: int32(p)}
		states = append(states, st)
	}
	files := logstore.NewFileCache(256)
	open := func() (*Manager, *readCountFS) {
		t.Helper()
		counter := &readCountFS{FS: logstore.OSFS}
		m, err := NewManager(Config{BrokerID: 1, LogDirs: []string{dir},
			HighWatermarkCheckpointInterval: time.Hour, RecoveryPointCheckpointInterval: time.Hour,
			RetentionCheckInterval: time.Hour, Log: zerolog.Nop(), Files: files, logFS: counter,
			RecoveryThreadsPerDataDir: 2})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		if err := m.ApplyPartitionStates(states); err != nil {
			t.Fatal(err)
		}
		return m, counter
	}
	m, _ := open()
	batch := buildBatch(batchSpec{records: 10, valueSize: 100})
	const batches = 10
	for _, st := range states {
		for range batches {
			if _, err := m.Append(st.TopicPartition, slices.Clone(batch), 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := files.OpenFiles(); n > 256 {
		t.Fatalf("%d .log files open, cache of 256", n)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, CleanShutdownFile)
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("no clean shutdown marker after Close: %v", err)
	}
	var total int64
	segs := map[cluster.TopicPartition][]int64{} // sizes of each log's segments, in order
	for _, st := range states {
		names, err := filepath.Glob(filepath.Join(dir, partitionDirName(st.TopicPartition), "*.log"))
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(names)
		for _, n := range names {
			fi, err := os.Stat(n)
			if err != nil {
				t.Fatal(err)
			}
			segs[st.TopicPartition] = append(segs[st.TopicPartition], fi.Size())
			total += fi.Size()
		}
		if len(segs[st.TopicPartition]) < 3 {
			t.Fatalf("%s has %d segments, want at least 3", st.TopicPartition, len(segs[st.TopicPartition]))
		}
	}

	m2, clean := open()
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("marker still there after the restart: %v", err)
	}
	tail := int64(logs) * (1 << 10) * 2 // each last segment's tail after its last index entry, at most
	if got := clean.logBytes.Load(); got > tail {
		t.Fatalf("a clean restart read %d bytes of segment data (of %d), want at most %d", got, total, tail)
	} else {
		t.Logf("clean restart of %d logs: %d bytes of segment data read of %d", logs, got, total)
	}
	for _, st := range states {
		if r, _ := m2.get(st.TopicPartition); r.log.LogEndOffset() != batches*10 {
			t.Fatalf("%s LEO %d after a clean restart, want %d", st.TopicPartition, r.log.LogEndOffset(), batches*10)
		}
	}
	if err := m2.Close(); err != nil {
		t.Fatal(err)
	}

	// A crash: no marker, and the recovery points checkpointed before the
	// last two segments of each log were flushed.
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	var rps []logstore.CheckpointEntry
	var recovered int64
	for _, st := range states {
		names, _ := filepath.Glob(filepath.Join(dir, partitionDirName(st.TopicPartition), "*.log"))
		slices.Sort(names)
		var base int64
		if _, err := fmt.Sscanf(filepath.Base(names[len(names)-2]), "%020d.log", &base); err != nil {
			t.Fatal(err)
		}
		rps = append(rps, logstore.CheckpointEntry{Topic: st.TopicPartition.Topic, Partition: st.TopicPartition.Partition, Offset: base})
		s := segs[st.TopicPartition]
		recovered += s[len(s)-1] + s[len(s)-2]
	}
	if err := logstore.WriteOffsetCheckpoint(filepath.Join(dir, logstore.RecoveryPointCheckpointFile), rps); err != nil {
		t.Fatal(err)
	}
	m3, unclean := open()
	if got := unclean.logBytes.Load(); got < recovered {
		t.Fatalf("an unclean restart read %d bytes of segment data, want at least the %d above the recovery points", got, recovered)
	} else {
		t.Logf("unclean restart of %d logs: %d bytes of segment data read of %d (%d above the recovery points)", logs, got, total, recovered)
	}
	for _, st := range states {
		if r, _ := m3.get(st.TopicPartition); r.log.LogEndOffset() != batches*10 {
			t.Fatalf("%s LEO %d after an unclean restart, want %d", st.TopicPartition, r.log.LogEndOffset(), batches*10)
		}
	}
}

// failSyncFS fails every fsync of a file under prefix once armed.
type failSyncFS struct {
	logstore.FS
	prefix string
	armed  atomic.Bool
}

func (f *failSyncFS) OpenFile(name string, flag int, perm fs.FileMode) (logstore.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil || !strings.HasPrefix(name, f.prefix) {
		return file, err
	}
	return &failSyncFile{File: file, fs: f}, nil
}

type failSyncFile struct {
	logstore.File
	fs *failSyncFS
}

func (f *failSyncFile) Sync() error {
	if f.fs.armed.Load() {
		return fmt.Errorf("injected fsync failure of %s", f.Name())
	}
	return f.File.Sync()
}

// TestNoCleanShutdownMarkerAfterFailedClose: a log dir where a log failed
// to flush gets no marker, so the next start recovers it; the other dir,
// whose log closed, gets one.
func TestNoCleanShutdownMarkerAfterFailedClose(t *testing.T) {
	root := t.TempDir()
	d1, d2 := filepath.Join(root, "d1"), filepath.Join(root, "d2")
	failing := &failSyncFS{FS: logstore.OSFS, prefix: d1 + string(filepath.Separator)}
	m, err := NewManager(Config{BrokerID: 1, LogDirs: []string{d1, d2},
		HighWatermarkCheckpointInterval: time.Hour, RecoveryPointCheckpointInterval: time.Hour,
		RetentionCheckInterval: time.Hour, Log: zerolog.New(zerolog.NewTestWriter(t)), logFS: failing})
	if err != nil {
		t.Fatal(err)
	}
	a, b := cluster.TopicPartition{Topic: "a", Partition: 0}, cluster.TopicPartition{Topic: "b", Partition: 0}
	if err := m.ApplyPartitionStates([]PartitionState{leaderOf(a), leaderOf(b)}); err != nil {
		t.Fatal(err)
	}
	if ra, _ := m.get(a); filepath.Dir(ra.dir) != d1 {
		t.Fatalf("a in %s, want d1", ra.dir)
	}
	for _, tp := range []cluster.TopicPartition{a, b} {
		if _, err := m.Append(tp, buildBatch(batchSpec{}), 1); err != nil {
			t.Fatal(err)
		}
	}
	failing.armed.Store(true)
	if err := m.Close(); err == nil {
		t.Fatal("close succeeded though a's flush failed")
	}
	if _, err := os.Stat(filepath.Join(d1, CleanShutdownFile)); !os.IsNotExist(err) {
		t.Errorf("d1, whose log failed to flush, has a clean shutdown marker (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(d2, CleanShutdownFile)); err != nil {
		t.Errorf("d2, whose log closed, has no marker: %v", err)
	}
	// The next start: d2's log opens clean, d1's does not.
	m2 := applyTestManager(t, []string{d1, d2}, 1)
	if !m2.cleanDirs[d2] || m2.cleanDirs[d1] {
		t.Fatalf("clean dirs at restart %v, want d2 only", m2.cleanDirs)
	}
}
