package partition

// The sim harness: N Managers (broker ids 1..N) over temp dirs, a fake
// LeaderClient that calls the target Manager directly (and can cut a
// broker off), a fake StateWriter keeping versioned partition states in
// memory as ZooKeeper does, and a test-side controller that elects as
// Kafka's does. Replication is driven step by step with replicateOnce on
// Managers that are never started, under a fake clock, so every scenario
// is deterministic. After every step, check asserts the replication
// invariants.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/logstore"
)

// fakeZK is an in-memory StateWriter: the partition state znode with its
// version, plus the ISR change notifications.
type fakeZK struct {
	mu       sync.Mutex
	state    cluster.LeaderAndIsr // ZkVersion is the znode version
	conflict bool                 // every leader write fails with ErrStateConflict
	// loseNext makes the next leader write land but lose its reply: an
	// outcome the writer could not resolve.
	loseNext bool
	writes   []cluster.LeaderAndIsr
	notified int
}

func (z *fakeZK) WriteLeaderAndIsr(_ context.Context, tp cluster.TopicPartition, st cluster.LeaderAndIsr) (int32, error) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.conflict || st.ZkVersion != z.state.ZkVersion {
		return -1, fmt.Errorf("write state of %s at version %d (znode at %d): %w", tp, st.ZkVersion, z.state.ZkVersion, ErrStateConflict)
	}
	st.Isr = slices.Clone(st.Isr)
	st.ZkVersion = z.state.ZkVersion + 1
	z.state = st
	z.writes = append(z.writes, st)
	if z.loseNext {
		z.loseNext = false
		return -1, fmt.Errorf("write state of %s: %w", tp, errLostReply)
	}
	return st.ZkVersion, nil
}

func (z *fakeZK) NotifyIsrChange(cluster.TopicPartition) {
	z.mu.Lock()
	z.notified++
	z.mu.Unlock()
}

// get returns the current znode.
func (z *fakeZK) get() cluster.LeaderAndIsr {
	z.mu.Lock()
	defer z.mu.Unlock()
	st := z.state
	st.Isr = slices.Clone(st.Isr)
	return st
}

// controllerWrite replaces the znode as the controller does (its own
// conditional write always wins in the sim) and returns the new state.
func (z *fakeZK) controllerWrite(leader, leaderEpoch int32, isr []int32) cluster.LeaderAndIsr {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.state = cluster.LeaderAndIsr{Leader: leader, LeaderEpoch: leaderEpoch, Isr: slices.Clone(isr),
		ControllerEpoch: 1, ZkVersion: z.state.ZkVersion + 1}
	return z.state
}

// simClient is broker from's LeaderClient.
type simClient struct {
	s    *sim
	from int32
}

var errCut = errors.New("sim: connection cut")

func (c simClient) target(leader int32) (*Manager, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	b := c.s.brokers[leader]
	if b == nil || b.m == nil || c.s.cut[leader] || c.s.cut[c.from] {
		return nil, fmt.Errorf("broker %d -> %d: %w", c.from, leader, errCut)
	}
	return b.m, nil
}

func (c simClient) Fetch(ctx context.Context, leader int32, req FetchRequest) (FetchResponse, error) {
	m, err := c.target(leader)
	if err != nil {
		return FetchResponse{}, err
	}
	c.s.mu.Lock()
	blocked := c.s.noFetch[c.from]
	c.s.mu.Unlock()
	if blocked {
		return FetchResponse{}, fmt.Errorf("broker %d: fetch blocked: %w", c.from, errCut)
	}
	read := func() (FetchResponse, int) {
		resp := FetchResponse{Partitions: map[cluster.TopicPartition]FetchPartitionResult{}}
		n := 0
		for _, p := range req.Partitions {
			res, err := m.Read(p.TopicPartition, ReadRequest{FetchOffset: p.FetchOffset, MaxBytes: p.MaxBytes,
				ReplicaID: req.ReplicaID, CurrentLeaderEpoch: p.CurrentLeaderEpoch, LogStartOffset: p.LogStartOffset})
			// The expansion write runs on its own goroutine; wait for it so
			// that every step stays deterministic.
			m.waitIsrWrites()
			pr := FetchPartitionResult{Err: err, HighWatermark: res.HighWatermark,
				LogStartOffset: res.LogStartOffset, Records: res.Records}
			if err != nil {
				// As on the wire: an errored partition carries no offsets.
				pr.HighWatermark, pr.LogStartOffset = -1, -1
			}
			resp.Partitions[p.TopicPartition] = pr
			n += len(res.Records)
			if err != nil {
				n += int(req.MinBytes) // an error answers at once
			}
		}
		return resp, n
	}
	changed := m.Changed(true) // a follower's fetch
	resp, n := read()
	if c.s.longPoll && n < int(req.MinBytes) && req.MaxWait > 0 {
		t := time.NewTimer(req.MaxWait)
		defer t.Stop()
		select {
		case <-changed:
			resp, _ = read()
		case <-t.C:
		case <-ctx.Done():
			return FetchResponse{}, ctx.Err()
		}
	}
	c.s.mu.Lock()
	drop := c.s.dropResponses[c.from]
	c.s.mu.Unlock()
	if drop {
		return FetchResponse{}, fmt.Errorf("broker %d: response lost: %w", c.from, errCut)
	}
	return resp, nil
}

func (c simClient) OffsetsForLeaderEpoch(_ context.Context, leader int32, queries []EpochQuery) ([]EpochAnswer, error) {
	m, err := c.target(leader)
	if err != nil {
		return nil, err
	}
	out := make([]EpochAnswer, 0, len(queries))
	for _, q := range queries {
		e, off, err := m.OffsetForLeaderEpoch(q.TopicPartition, q.CurrentLeaderEpoch, q.LeaderEpoch)
		out = append(out, EpochAnswer{TopicPartition: q.TopicPartition, Err: err, LeaderEpoch: e, EndOffset: off})
	}
	return out, nil
}

// ListEarliestOffset makes simClient an EarliestOffsetLister, as
// protocol's client is.
func (c simClient) ListEarliestOffset(_ context.Context, leader int32, tp cluster.TopicPartition, currentLeaderEpoch int32) (int64, error) {
	m, err := c.target(leader)
	if err != nil {
		return -1, err
	}
	off, _, _, err := m.ListOffset(tp, EarliestTimestamp, currentLeaderEpoch, AskerReplica)
	return off, err
}

type simBroker struct {
	id  int32
	dir string
	m   *Manager // nil while dead
}

// pendingAck is an acks=all produce whose wait has not finished.
type pendingAck struct {
	leader      int32
	leaderEpoch int32
	res         AppendResult
}

type sim struct {
	t        *testing.T
	clock    *fakeClock
	zk       *fakeZK
	replicas []int32
	cfg      cluster.LogConfig
	lag      time.Duration
	longPoll bool // real-goroutine mode: Fetch waits for data like a leader does
	realTime bool

	mu            sync.Mutex
	brokers       map[int32]*simBroker
	cut           map[int32]bool
	dropResponses map[int32]bool
	noFetch       map[int32]bool // the broker's Fetch fails; OffsetsForLeaderEpoch still works

	pending      []pendingAck
	acked        map[int64][]byte // base offset -> batch bytes, for every acks=all-acknowledged batch
	leaderHW     map[int32]int64  // leader epoch -> highest HW its leader reported
	epochLeaders map[int32]int32  // leader epoch -> the broker that led it
}

const simLag = 10 * time.Second

// newSim starts n brokers holding tp0 with replicas 1..n and broker 1 as
// leader in epoch 0 with the full ISR.
func newSim(t *testing.T, n int, cfg cluster.LogConfig) *sim {
	t.Helper()
	s := &sim{t: t, clock: &fakeClock{t: time.Unix(1000, 0)}, zk: &fakeZK{}, cfg: cfg, lag: simLag,
		brokers: map[int32]*simBroker{}, cut: map[int32]bool{}, dropResponses: map[int32]bool{}, noFetch: map[int32]bool{},
		acked: map[int64][]byte{}, leaderHW: map[int32]int64{}, epochLeaders: map[int32]int32{}}
	base := t.TempDir()
	for id := int32(1); id <= int32(n); id++ {
		s.replicas = append(s.replicas, id)
		s.brokers[id] = &simBroker{id: id, dir: filepath.Join(base, fmt.Sprintf("broker-%d", id))}
	}
	t.Cleanup(func() {
		for _, b := range s.brokers {
			if b.m != nil {
				_ = b.m.Close()
			}
		}
	})
	for _, id := range s.replicas {
		s.startBroker(id)
	}
	s.zk.controllerWrite(1, 0, s.replicas)
	s.push()
	return s
}

func (s *sim) startBroker(id int32) {
	s.t.Helper()
	b := s.brokers[id]
	now := s.clock.Now
	if s.realTime {
		now = nil
	}
	m, err := NewManager(Config{
		BrokerID: id, LogDirs: []string{b.dir},
		HighWatermarkCheckpointInterval: time.Second, RecoveryPointCheckpointInterval: time.Second,
		RetentionCheckInterval: time.Hour, Now: now,
		Log:               zerolog.New(zerolog.NewTestWriter(s.t)).With().Int32("broker_id", id).Logger(),
		ReplicaLagTimeMax: s.lag, ReplicaFetchBackoff: 10 * time.Millisecond, ReplicaFetchWaitMax: 50 * time.Millisecond,
		LeaderClient: simClient{s: s, from: id}, StateWriter: s.zk,
	})
	if err != nil {
		s.t.Fatal(err)
	}
	s.mu.Lock()
	b.m = m
	s.mu.Unlock()
}

// mgr returns broker id's Manager, failing if it is dead.
func (s *sim) mgr(id int32) *Manager {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.brokers[id].m
	if m == nil {
		s.t.Fatalf("broker %d is dead", id)
	}
	return m
}

func (s *sim) alive(id int32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.brokers[id].m != nil
}

// status returns broker id's view of tp0.
func (s *sim) status(id int32) ReplicaStatus {
	s.t.Helper()
	for _, st := range s.mgr(id).PartitionStatus() {
		if st.TopicPartition == tp0 {
			return st
		}
	}
	s.t.Fatalf("broker %d holds no replica of %s", id, tp0)
	return ReplicaStatus{}
}

// push sends the znode's state to every live replica, as the
// controller's LeaderAndIsr does.
func (s *sim) push() {
	s.t.Helper()
	lai := s.zk.get()
	for _, id := range s.replicas {
		if !s.alive(id) {
			continue
		}
		st := PartitionState{TopicPartition: tp0, Replicas: s.replicas, Config: s.cfg, LeaderAndIsr: lai}
		if err := s.mgr(id).ApplyPartitionStates([]PartitionState{st}); err != nil && s.mgr(id).offlinePartitionErr(tp0) == nil {
			// (A replica of an offline log dir answers ErrStorage.)
			s.t.Fatalf("broker %d: apply state: %v", id, err)
		}
	}
	s.check()
}

// elect runs the controller's election for tp0 with the live brokers:
// the first live replica in assignment order that is in the ISR; with
// unclean election enabled, else the first live replica. With no
// candidate the partition goes offline (leader -1). It returns the leader.
func (s *sim) elect() int32 {
	s.t.Helper()
	cur := s.zk.get()
	var live []int32
	for _, id := range s.replicas {
		if s.alive(id) {
			live = append(live, id)
		}
	}
	leader := cluster.NoLeader
	isr := slices.DeleteFunc(slices.Clone(cur.Isr), func(id int32) bool { return !slices.Contains(live, id) })
	for _, id := range live {
		if slices.Contains(isr, id) {
			leader = id
			break
		}
	}
	if leader < 0 && s.cfg.UncleanLeaderElection && len(live) > 0 {
		leader, isr = live[0], []int32{live[0]}
		// Acknowledged records may be lost by design.
		s.acked = map[int64][]byte{}
	}
	if leader < 0 {
		isr = cur.Isr // the controller never empties the ISR
	}
	s.zk.controllerWrite(leader, cur.LeaderEpoch+1, isr)
	s.pending = nil
	s.push()
	return leader
}

// kill stops broker id (a clean shutdown writes its checkpoints) without
// telling the controller.
func (s *sim) kill(id int32) {
	s.t.Helper()
	m := s.mgr(id)
	if err := m.Close(); err != nil {
		s.t.Fatalf("close broker %d: %v", id, err)
	}
	s.mu.Lock()
	s.brokers[id].m = nil
	s.mu.Unlock()
}

// fail kills broker id and runs the controller's reaction: a new leader
// if it led, else it leaves the ISR (epoch bumped, as Kafka's
// removeReplicasFromIsr does).
func (s *sim) fail(id int32) {
	s.t.Helper()
	s.kill(id)
	cur := s.zk.get()
	if cur.Leader == id {
		s.elect()
		return
	}
	if slices.Contains(cur.Isr, id) && len(cur.Isr) > 1 {
		s.zk.controllerWrite(cur.Leader, cur.LeaderEpoch+1, slices.DeleteFunc(slices.Clone(cur.Isr), func(x int32) bool { return x == id }))
		s.push()
	}
}

// restart starts broker id again on its old log dir and sends it the
// current state; an offline partition elects again.
func (s *sim) restart(id int32) {
	s.t.Helper()
	s.startBroker(id)
	if s.zk.get().Leader < 0 {
		s.elect()
		return
	}
	s.push()
}

// produce appends one batch of n records on the current leader. With
// acks=-1 the ack is tracked until the HW passes it.
func (s *sim) produce(n int, acks int16) AppendResult {
	s.t.Helper()
	leader := s.zk.get().Leader
	m := s.mgr(leader)
	res, err := m.Append(tp0, buildBatch(batchSpec{records: n, valueSize: 8, timestamp: int64(len(s.acked))}), acks)
	if err != nil {
		s.t.Fatalf("produce on %d: %v", leader, err)
	}
	if acks == -1 {
		s.pending = append(s.pending, pendingAck{leader: leader, leaderEpoch: s.status(leader).LeaderEpoch, res: res})
	}
	s.check()
	return res
}

// fetch runs one fetcher round on each given broker.
func (s *sim) fetch(ids ...int32) {
	s.t.Helper()
	for _, id := range ids {
		s.mgr(id).replicateOnce()
		s.check()
	}
}

// catchUp runs fetch rounds on every live non-leader until nothing moves.
func (s *sim) catchUp() {
	s.t.Helper()
	for i := 0; i < 20; i++ {
		before := s.positions()
		for _, id := range s.replicas {
			if s.alive(id) && id != s.zk.get().Leader {
				s.fetch(id)
			}
		}
		if slices.Equal(before, s.positions()) {
			return
		}
	}
	s.t.Fatal("replication did not settle in 20 rounds")
}

func (s *sim) positions() []int64 {
	var out []int64
	for _, id := range s.replicas {
		if s.alive(id) {
			st := s.status(id)
			out = append(out, st.LogEndOffset, st.HighWatermark, int64(len(st.Isr)))
		}
	}
	return out
}

// readBatch returns the stored batch starting at base on broker id, or nil.
func (s *sim) readBatch(id int32, base int64) []byte {
	s.t.Helper()
	r, err := s.mgr(id).get(tp0)
	if err != nil {
		s.t.Fatal(err)
	}
	if base >= r.log.LogEndOffset() || base < r.log.LogStartOffset() {
		return nil
	}
	data, err := r.log.Read(base, 1, base+1)
	if err != nil {
		s.t.Fatalf("broker %d read at %d: %v", id, base, err)
	}
	var out []byte
	_ = forEachBatch(data, func(_ logstore.BatchHeader, raw []byte) error {
		if out == nil {
			out = raw
		}
		return nil
	})
	return out
}

// settle finishes the acks=all waits whose outcome is known.
func (s *sim) settle() {
	s.t.Helper()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	keep := s.pending[:0]
	for _, p := range s.pending {
		if !s.alive(p.leader) || s.status(p.leader).LeaderEpoch != p.leaderEpoch {
			continue // the producer got NOT_LEADER (or nothing): not acknowledged
		}
		err := s.mgr(p.leader).WaitCommitted(done, tp0, p.res.LastOffset, p.res.LeaderEpoch)
		switch {
		case err == nil:
			s.acked[p.res.BaseOffset] = bytes.Clone(s.readBatch(p.leader, p.res.BaseOffset))
		case errors.Is(err, ErrRequestTimedOut):
			keep = append(keep, p)
		}
	}
	s.pending = keep
}

// check asserts the invariants: HW <= LEO everywhere; a leader's HW never
// falls within its epoch; the leader is in its ISR; no two brokers lead
// the same epoch; every acknowledged batch is on every live ISR member,
// the leader's or the znode's.
func (s *sim) check() {
	s.t.Helper()
	s.settle()
	leaders := map[int32]int32{}
	for _, id := range s.replicas {
		if !s.alive(id) || s.mgr(id).offlinePartitionErr(tp0) != nil {
			continue // an offline replica serves nothing
		}
		st := s.status(id)
		if st.HighWatermark > st.LogEndOffset {
			s.t.Fatalf("broker %d: hw %d > leo %d", id, st.HighWatermark, st.LogEndOffset)
		}
		if st.LastStableOffset > st.HighWatermark || st.LastStableOffset < min(st.LogStartOffset, st.HighWatermark) {
			s.t.Fatalf("broker %d: lso %d outside [log start %d, hw %d]", id, st.LastStableOffset, st.LogStartOffset, st.HighWatermark)
		}
		if st.Role != RoleLeader {
			continue
		}
		if other, ok := leaders[st.LeaderEpoch]; ok {
			s.t.Fatalf("brokers %d and %d both lead epoch %d", other, id, st.LeaderEpoch)
		}
		leaders[st.LeaderEpoch] = id
		if prev, ok := s.epochLeaders[st.LeaderEpoch]; ok && prev != id {
			s.t.Fatalf("epoch %d led by %d and later by %d", st.LeaderEpoch, prev, id)
		}
		s.epochLeaders[st.LeaderEpoch] = id
		if !slices.Contains(st.Isr, id) {
			s.t.Fatalf("leader %d not in its isr %v", id, st.Isr)
		}
		if prev, ok := s.leaderHW[st.LeaderEpoch]; ok && st.HighWatermark < prev {
			s.t.Fatalf("leader %d hw fell from %d to %d in epoch %d", id, prev, st.HighWatermark, st.LeaderEpoch)
		}
		s.leaderHW[st.LeaderEpoch] = st.HighWatermark
		// The znode's ISR may hold members the leader does not know of
		// (a write whose reply was lost): the controller may elect them.
		members := slices.Clone(st.Isr)
		if zk := s.zk.get(); zk.Leader == id && zk.LeaderEpoch == st.LeaderEpoch {
			for _, m := range zk.Isr {
				if !slices.Contains(members, m) {
					members = append(members, m)
				}
			}
		}
		for _, member := range members {
			if !s.alive(member) {
				continue
			}
			for base, want := range s.acked {
				if got := s.readBatch(member, base); !bytes.Equal(got, want) {
					s.t.Fatalf("acknowledged batch at %d missing or different on isr member %d", base, member)
				}
			}
		}
	}
}

// logBytes is broker id's log from 'from' to its LEO.
func (s *sim) logBytes(id int32, from int64) []byte {
	s.t.Helper()
	r, err := s.mgr(id).get(tp0)
	if err != nil {
		s.t.Fatal(err)
	}
	leo := r.log.LogEndOffset()
	if from >= leo {
		return nil
	}
	data, err := r.log.Read(from, 1<<30, leo)
	if err != nil {
		s.t.Fatalf("broker %d read log: %v", id, err)
	}
	return data
}

// assertIdentical checks that the given brokers hold byte-identical logs
// above the highest log start offset.
func (s *sim) assertIdentical(ids ...int32) {
	s.t.Helper()
	var start int64
	for _, id := range ids {
		start = max(start, s.status(id).LogStartOffset)
	}
	ref := s.logBytes(ids[0], start)
	for _, id := range ids[1:] {
		if a, b := s.status(ids[0]).LogEndOffset, s.status(id).LogEndOffset; a != b {
			s.t.Fatalf("leo of broker %d = %d, broker %d = %d", ids[0], a, id, b)
		}
		if !bytes.Equal(ref, s.logBytes(id, start)) {
			s.t.Fatalf("logs of brokers %d and %d differ", ids[0], id)
		}
	}
}

// eventually polls fn until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, fn func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !fn() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// deadBrokers lists the brokers that are down.
func (s *sim) deadBrokers() []int32 {
	var out []int32
	for _, id := range s.replicas {
		if !s.alive(id) {
			out = append(out, id)
		}
	}
	return out
}
