package partition

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/kafkazk/broker/cluster"
)

// dirLayout is where the partition directories are: which log dir holds
// each partition this Manager knows of, and how many each log dir holds.
// NewManager fills it with one listing per log dir; after that dirFor
// places a new partition in the log dir holding the fewest, as Kafka's
// LogManager.nextLogDirs does, without listing or stat-ing anything, and
// a deletion gives its place back. Safe for concurrent use.
type dirLayout struct {
	mu      sync.Mutex
	dirs    []string                          // filepath.Clean of Config.LogDirs, in order
	located map[cluster.TopicPartition]string // the log dir holding the partition's directory
	counts  map[string]int                    // partition directories per log dir
	offline map[string]bool                   // log dirs taken offline (logdir.go): no new partition goes there
}

func newDirLayout(logDirs []string) *dirLayout {
	l := &dirLayout{located: map[cluster.TopicPartition]string{}, counts: map[string]int{}}
	for _, d := range logDirs {
		d = filepath.Clean(d)
		l.dirs = append(l.dirs, d)
		l.counts[d] = 0
	}
	return l
}

// parsePartitionDirName reads Kafka's <topic>-<partition> directory name;
// ok is false for anything else (checkpoint files, a "-delete" or
// "-future" directory, a topic name without a partition).
func parsePartitionDirName(name string) (cluster.TopicPartition, bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || i == len(name)-1 {
		return cluster.TopicPartition{}, false
	}
	p, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || p < 0 || strconv.FormatInt(p, 10) != name[i+1:] {
		return cluster.TopicPartition{}, false
	}
	return cluster.TopicPartition{Topic: name[:i], Partition: int32(p)}, true
}

// scan lists dir, a clean log dir, once and records its partition
// directories. A partition found in two log dirs stays in the first
// scanned, as dirFor found it before.
func (l *dirLayout) scan(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("list log dir %s: %w", dir, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		tp, ok := parsePartitionDirName(e.Name())
		if !ok {
			continue
		}
		l.counts[dir]++
		if _, dup := l.located[tp]; !dup {
			l.located[tp] = dir
		}
	}
	return nil
}

// holds reports whether the clean log dir dir holds tp's directory.
func (l *dirLayout) holds(dir string, tp cluster.TopicPartition) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.located[tp] == dir
}

// dirFor returns tp's partition directory: in the log dir already holding
// it, else in the one holding the fewest (the first of those), which is
// counted as holding it from now on.
func (l *dirLayout) dirFor(tp cluster.TopicPartition) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if d, ok := l.located[tp]; ok {
		return filepath.Join(d, partitionDirName(tp))
	}
	best := ""
	for _, d := range l.dirs {
		if l.offline[d] {
			continue
		}
		if best == "" || l.counts[d] < l.counts[best] {
			best = d
		}
	}
	if best == "" { // every dir offline: logDirFor refuses the open
		best = l.dirs[0]
	}
	l.located[tp] = best
	l.counts[best]++
	return filepath.Join(best, partitionDirName(tp))
}

// openFailed gives back the place dirFor gave tp in path's log dir when
// the failed open left no directory there.
func (l *dirLayout) openFailed(tp cluster.TopicPartition, path string) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return
	}
	l.forget(tp, filepath.Dir(path))
}

// removed notes that tp's directory path was deleted, if it is gone.
func (l *dirLayout) removed(tp cluster.TopicPartition, path string) {
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		return
	}
	l.forget(tp, filepath.Dir(path))
}

func (l *dirLayout) forget(tp cluster.TopicPartition, dir string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.located[tp] == dir {
		delete(l.located, tp)
		l.counts[dir]--
	}
}

// setOffline keeps new partitions off the clean log dir dir from now on.
func (l *dirLayout) setOffline(dir string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.offline == nil {
		l.offline = map[string]bool{}
	}
	l.offline[dir] = true
}

// count is how many partition directories the log dir dir holds.
func (l *dirLayout) count(dir string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.counts[filepath.Clean(dir)]
}

// pendingOpen is a log BecomeLeaderOrFollower opens: its placeholder in
// m.opening, the checkpointed offsets and the partition directory.
type pendingOpen struct {
	st    PartitionState
	op    *opening
	saved savedOffsets
	dir   string
}

// BecomeLeaderOrFollower is what a LeaderAndIsr request becomes. A state
// naming this broker leader makes the replica leader (epoch start offset
// recorded at the LEO, follower state reset); any other makes it a
// follower: acks=all waiters fail with ErrNotLeader and the partition
// moves to the fetcher of the new leader in the Truncating state (leader
// -1: no fetching). An older leader epoch is ignored; the same epoch and
// leader only refresh the assignment, ISR and zkVersion. The result has
// an entry for every partition of states, saying what was applied.
//
// The logs of partitions this broker holds no replica of are opened first,
// all of them, by RecoveryThreadsPerDataDir goroutines per log dir (as
// Kafka's LogManager.loadLogs) that end with the call; then the states are
// applied in their order. An open that fails fails only its partition.
func (m *Manager) BecomeLeaderOrFollower(states []PartitionState) map[cluster.TopicPartition]Transition {
	now := m.cfg.Now()
	out := make(map[cluster.TopicPartition]Transition, len(states))
	failed := m.openAll(m.placeOpens(states))
	var leaders, followers, stale int
	var woken wake
	// Once for every state, after the loop: each applied state closed its
	// replica's stateCh but left the fetch long-polls to this.
	defer func() {
		if woken != 0 {
			m.notifyChanged(woken)
		}
	}()
	for _, st := range states {
		if err, ok := failed[st.TopicPartition]; ok {
			out[st.TopicPartition] = Transition{Err: err}
			continue
		}
		r, err := m.getOrOpen(st)
		if err != nil {
			out[st.TopicPartition] = Transition{Err: err}
			continue
		}
		rc, err := r.applyState(st, now)
		if err != nil {
			out[st.TopicPartition] = Transition{Err: err}
			continue
		}
		woken |= rc.wake
		t := Transition{Applied: rc.applied, NewEpoch: rc.newEpoch, LeaderEpoch: rc.leaderEpoch, Role: RoleFollower}
		if rc.leader == m.cfg.BrokerID {
			t.Role = RoleLeader
		}
		if !rc.applied {
			t = Transition{}
			stale++
		}
		out[st.TopicPartition] = t
		if !rc.applied || !rc.newEpoch {
			continue
		}
		if rc.leader == m.cfg.BrokerID {
			leaders++
			m.unfollow(r.tp)
		} else {
			followers++
			// Even with the same leader a new epoch redoes truncation
			// (KAFKA-7164).
			m.followPartition(r, rc.leader, rc.leaderEpoch)
		}
	}
	if len(states) > 0 {
		// One line per request; each partition's is at debug level.
		m.log.Info().Int("partitions", len(states)).Int("new_leaders", leaders).Int("new_followers", followers).
			Int("stale", stale).Int("failed", len(failed)).Msg("partition states applied")
	}
	return out
}

// placeOpens places an opening placeholder, and picks the partition
// directory, for each partition of states that has neither a replica nor
// an open in progress (another call's open is waited for by getOrOpen).
func (m *Manager) placeOpens(states []PartitionState) []pendingOpen {
	var pending []pendingOpen
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil // getOrOpen answers errManagerClosed
	}
	for _, st := range states {
		tp := st.TopicPartition
		if m.replicas[tp] != nil || m.opening[tp] != nil {
			continue
		}
		op := &opening{done: make(chan struct{})}
		m.opening[tp] = op
		pending = append(pending, pendingOpen{st: st, op: op, saved: m.saved[tp], dir: m.dirs.dirFor(tp)})
	}
	return pending
}

// openAll opens the logs of pending, RecoveryThreadsPerDataDir at a time
// per log dir, and returns the error of each that failed.
func (m *Manager) openAll(pending []pendingOpen) map[cluster.TopicPartition]error {
	failed := map[cluster.TopicPartition]error{}
	if len(pending) == 0 {
		return failed
	}
	threads := int(m.recoveryThreads.Load())
	byDir := map[string][]int{}
	var order []string
	for i, p := range pending {
		d := filepath.Dir(p.dir)
		if byDir[d] == nil {
			order = append(order, d)
		}
		byDir[d] = append(byDir[d], i)
	}
	errs := make([]error, len(pending))
	var wg sync.WaitGroup
	for _, d := range order {
		idx := byDir[d]
		next := make(chan int, len(idx))
		for _, i := range idx {
			next <- i
		}
		close(next)
		for range min(threads, len(idx)) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					p := pending[i]
					_, errs[i] = m.open(p.st, p.op, p.saved, p.dir)
				}
			}()
		}
	}
	wg.Wait()
	var first error
	for i, err := range errs {
		if err != nil {
			failed[pending[i].st.TopicPartition] = err
			if first == nil {
				first = err
			}
		}
	}
	if first != nil {
		// One line, not one per log: a full disk or the open-file limit
		// fails them all alike. Each error is in the result.
		m.log.Error().Err(first).Int("failed", len(failed)).Int("opened", len(pending)-len(failed)).Msg("open logs")
	}
	return failed
}

// SetRecoveryThreadsPerDataDir changes num.recovery.threads.per.data.dir
// (a dynamic broker config in Kafka) for the next BecomeLeaderOrFollower;
// n <= 0 means 1.
func (m *Manager) SetRecoveryThreadsPerDataDir(n int) {
	m.recoveryThreads.Store(int32(min(max(n, 1), math.MaxInt32)))
}
