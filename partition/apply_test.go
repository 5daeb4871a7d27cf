package partition

import (
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/logstore"
)

func applyTestManager(t *testing.T, dirs []string, threads int) *Manager {
	t.Helper()
	m, err := NewManager(Config{
		BrokerID: 1, LogDirs: dirs,
		HighWatermarkCheckpointInterval: time.Hour, RecoveryPointCheckpointInterval: time.Hour,
		RetentionCheckInterval: time.Hour, Log: zerolog.New(zerolog.NewTestWriter(t)),
		RecoveryThreadsPerDataDir: threads,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func leaderOf(tp cluster.TopicPartition) PartitionState {
	st := leaderState(1, 0, []int32{1}, []int32{1}, cluster.DefaultLogConfig())
	st.TopicPartition = tp
	return st
}

// onDisk counts the partition directories in dir as a listing finds them.
func onDisk(t *testing.T, dir string) int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if _, ok := parsePartitionDirName(e.Name()); ok && e.IsDir() {
			n++
		}
	}
	return n
}

// TestDirForCountsAcrossCreateDeleteRestart: dirFor places each new
// partition in the log dir holding the fewest, keeping the counts it does
// so by (never listing a dir) equal to what the dirs hold across
// creations, deletions and a restart, and a partition already on disk
// opens where it is.
func TestDirForCountsAcrossCreateDeleteRestart(t *testing.T) {
	root := t.TempDir()
	d1, d2 := filepath.Join(root, "d1"), filepath.Join(root, "d2")
	// From an earlier run: a partition in d2, and entries that are not
	// partitions (a deleted log's directory, a stray file).
	for _, p := range []string{filepath.Join(d2, "old-0"), filepath.Join(d1, "gone-0.0123abc-delete")} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(d1, "stray-3"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	check := func(m *Manager, when string) {
		t.Helper()
		for _, d := range []string{d1, d2} {
			if got, want := m.dirs.count(d), onDisk(t, d); got != want {
				t.Errorf("%s: %s counted %d partitions, holds %d", when, d, got, want)
			}
		}
	}
	m := applyTestManager(t, []string{d1, d2}, 1)
	check(m, "at start")
	if m.dirs.count(d1) != 0 || m.dirs.count(d2) != 1 {
		t.Fatalf("counts at start d1=%d d2=%d, want 0 and 1", m.dirs.count(d1), m.dirs.count(d2))
	}
	var states []PartitionState
	for p := range 5 {
		states = append(states, leaderOf(cluster.TopicPartition{Topic: "new", Partition: int32(p)}))
	}
	old := cluster.TopicPartition{Topic: "old", Partition: 0}
	states = append(states, leaderOf(old))
	if err := m.ApplyPartitionStates(states); err != nil {
		t.Fatal(err)
	}
	check(m, "after creating 5")
	if a, b := m.dirs.count(d1), m.dirs.count(d2); a != 3 || b != 3 {
		t.Fatalf("after creating 5 beside old-0 in d2: d1=%d d2=%d, want 3 and 3", a, b)
	}
	r, err := m.get(old)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(d2, "old-0"); r.dir != want {
		t.Fatalf("old-0 opened in %s, want where it was, %s", r.dir, want)
	}
	// Delete two of d1's: the next two new partitions go there.
	var inD1 []cluster.TopicPartition
	for p := range 5 {
		tp := cluster.TopicPartition{Topic: "new", Partition: int32(p)}
		if r, _ := m.get(tp); filepath.Dir(r.dir) == d1 && len(inD1) < 2 {
			inD1 = append(inD1, tp)
		}
	}
	if err := m.StopReplicas(inD1, true); err != nil {
		t.Fatal(err)
	}
	check(m, "after deleting 2")
	more := []PartitionState{leaderOf(cluster.TopicPartition{Topic: "more", Partition: 0}), leaderOf(cluster.TopicPartition{Topic: "more", Partition: 1})}
	if err := m.ApplyPartitionStates(more); err != nil {
		t.Fatal(err)
	}
	for _, st := range more {
		if r, _ := m.get(st.TopicPartition); filepath.Dir(r.dir) != d1 {
			t.Errorf("%s placed in %s, want d1 (it held the fewest)", st.TopicPartition, filepath.Dir(r.dir))
		}
	}
	check(m, "after creating 2 more")
	// A stopped replica kept on disk keeps its place.
	if err := m.StopReplicas([]cluster.TopicPartition{old}, false); err != nil {
		t.Fatal(err)
	}
	check(m, "after stopping old-0 without delete")
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m2 := applyTestManager(t, []string{d1, d2}, 1)
	check(m2, "after a restart")
	if err := m2.ApplyPartitionStates([]PartitionState{leaderOf(old), leaderOf(cluster.TopicPartition{Topic: "more", Partition: 1})}); err != nil {
		t.Fatal(err)
	}
	if r, _ := m2.get(old); filepath.Dir(r.dir) != d2 {
		t.Errorf("old-0 reopened in %s after a restart, want d2", filepath.Dir(r.dir))
	}
	if r, _ := m2.get(cluster.TopicPartition{Topic: "more", Partition: 1}); filepath.Dir(r.dir) != d1 {
		t.Errorf("more-1 reopened in %s after a restart, want d1", filepath.Dir(r.dir))
	}
	check(m2, "after reopening")
}

func TestParsePartitionDirName(t *testing.T) {
	for name, want := range map[string]*cluster.TopicPartition{
		"t-0":                           {Topic: "t", Partition: 0},
		"a-b-12":                        {Topic: "a-b", Partition: 12},
		"__consumer_offsets-49":         {Topic: "__consumer_offsets", Partition: 49},
		"t-":                            nil,
		"-1":                            nil,
		"t-01":                          nil,
		"t--1":                          {Topic: "t-", Partition: 1},
		"t-0.abc-delete":                nil,
		"t-0.abc-future":                nil,
		"replication-offset-checkpoint": nil,
		"t-99999999999":                 nil,
	} {
		got, ok := parsePartitionDirName(name)
		if ok != (want != nil) || (ok && got != *want) {
			t.Errorf("parsePartitionDirName(%q) = %v, %v; want %v", name, got, ok, want)
		}
	}
}

// TestRecoveryThreadsOpenConcurrently: one BecomeLeaderOrFollower opens
// its new logs with RecoveryThreadsPerDataDir goroutines per log dir, no
// more, which end with the call; every failed open is reported for its
// partition and the others open.
func TestRecoveryThreadsOpenConcurrently(t *testing.T) {
	for _, tc := range []struct {
		threads, dirs, want int
		dynamic             bool // set by SetRecoveryThreadsPerDataDir after a start with 1
	}{{1, 1, 1, false}, {3, 1, 3, false}, {2, 2, 4, false}, {3, 1, 3, true}} {
		root := t.TempDir()
		var dirs []string
		for i := range tc.dirs {
			dirs = append(dirs, filepath.Join(root, "d"+string(rune('1'+i))))
		}
		m := applyTestManager(t, dirs, tc.threads)
		if tc.dynamic {
			m = applyTestManager(t, []string{filepath.Join(root, "dyn")}, 1)
			m.SetRecoveryThreadsPerDataDir(tc.threads)
		}
		var (
			mu            sync.Mutex
			inFlight, top int
			reached       = make(chan struct{})
		)
		m.openHook = func(cluster.TopicPartition) {
			mu.Lock()
			inFlight++
			top = max(top, inFlight)
			if inFlight == tc.want {
				select {
				case <-reached:
				default:
					close(reached)
				}
			}
			mu.Unlock()
			select {
			case <-reached:
			case <-time.After(5 * time.Second):
			}
			mu.Lock()
			inFlight--
			mu.Unlock()
		}
		var states []PartitionState
		for p := range 12 {
			states = append(states, leaderOf(cluster.TopicPartition{Topic: "t", Partition: int32(p)}))
		}
		before := runtime.NumGoroutine()
		start := time.Now()
		for tp, tr := range m.BecomeLeaderOrFollower(states) {
			if tr.Err != nil || !tr.Applied {
				t.Fatalf("threads %d: %s: %+v", tc.threads, tp, tr)
			}
		}
		if top != tc.want {
			t.Errorf("threads %d over %d dirs: %d opens at once, want %d", tc.threads, tc.dirs, top, tc.want)
		}
		if time.Since(start) > 4*time.Second {
			t.Errorf("threads %d over %d dirs: the opens never reached %d at once", tc.threads, tc.dirs, tc.want)
		}
		// A worker that has called wg.Done may still be counted for a
		// moment after wg.Wait returns; a leaked one stays.
		n := runtime.NumGoroutine()
		for deadline := time.Now().Add(2 * time.Second); n > before && time.Now().Before(deadline); n = runtime.NumGoroutine() {
			time.Sleep(5 * time.Millisecond)
		}
		if n > before {
			t.Errorf("threads %d: %d goroutines 2 s after the call, %d before", tc.threads, n, before)
		}
	}

	// Failures: a corrupt leader-epoch-checkpoint fails that log's open,
	// and only that one's (a corrupt file is not an I/O error: the dir
	// stays online, logdir.go).
	dir := filepath.Join(t.TempDir(), "logs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bad := map[cluster.TopicPartition]bool{}
	for _, p := range []int32{1, 4, 6} {
		tp := cluster.TopicPartition{Topic: "t", Partition: p}
		bad[tp] = true
		pd := filepath.Join(dir, partitionDirName(tp))
		if err := os.MkdirAll(pd, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pd, logstore.LeaderEpochCheckpointFile), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := applyTestManager(t, []string{dir}, 3)
	var states []PartitionState
	for p := range 8 {
		states = append(states, leaderOf(cluster.TopicPartition{Topic: "t", Partition: int32(p)}))
	}
	res := m.BecomeLeaderOrFollower(states)
	if len(res) != len(states) {
		t.Fatalf("%d results for %d states", len(res), len(states))
	}
	for tp, tr := range res {
		if bad[tp] && tr.Err == nil {
			t.Errorf("%s: open over a file succeeded: %+v", tp, tr)
		}
		if !bad[tp] && (tr.Err != nil || !tr.Applied) {
			t.Errorf("%s: %+v", tp, tr)
		}
	}
	if got, want := m.dirs.count(dir), onDisk(t, dir); got != want || got != 8 {
		t.Errorf("after 3 failed opens of existing dirs: %d counted, %d on disk, want 8", got, want)
	}
}

// TestBecomeLeaderOrFollowerWakesFetchesOnce: a LeaderAndIsr of many
// states wakes the long-polling fetches once, when every state is
// applied, not once per partition; each replica's own waits still wake.
func TestBecomeLeaderOrFollowerWakesFetchesOnce(t *testing.T) {
	m := applyTestManager(t, []string{filepath.Join(t.TempDir(), "logs")}, 2)
	var states []PartitionState
	for p := range 50 {
		states = append(states, leaderOf(cluster.TopicPartition{Topic: "t", Partition: int32(p)}))
	}
	if err := m.ApplyPartitionStates(states); err != nil {
		t.Fatal(err)
	}
	r, _ := m.get(states[7].TopicPartition)
	r.mu.Lock()
	stateCh := r.stateCh
	r.mu.Unlock()
	followers, consumers := m.Changed(true), m.Changed(false)
	before := m.notifies.Load()
	for i := range states {
		states[i].LeaderAndIsr.LeaderEpoch = 1 // a new epoch for each
	}
	for tp, tr := range m.BecomeLeaderOrFollower(states) {
		if tr.Err != nil || !tr.NewEpoch {
			t.Fatalf("%s: %+v", tp, tr)
		}
	}
	if n := m.notifies.Load() - before; n != 1 {
		t.Errorf("%d wakes of the fetches for %d states, want 1", n, len(states))
	}
	for name, ch := range map[string]<-chan struct{}{"followers'": followers, "consumers'": consumers, "the replica's": stateCh} {
		select {
		case <-ch:
		default:
			t.Errorf("%s channel not closed by the states", name)
		}
	}
}
