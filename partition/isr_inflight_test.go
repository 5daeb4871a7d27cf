package partition

import (
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
)

// errLostReply stands for a ZooKeeper reply lost after the write applied:
// an unknown outcome the StateWriter could not resolve.
var errLostReply = errors.New("test: connection lost, reply unknown")

// landingZK is a StateWriter whose writes always land in its znode, and
// whose reply is chosen per test: success, a lost reply, a conflict (the
// controller wrote over the landed write before the writer read it back),
// or a reply held until release is closed.
type landingZK struct {
	mu      sync.Mutex
	state   cluster.LeaderAndIsr
	reply   func(z *landingZK) error // called with z.mu held; nil means success
	prev    cluster.LeaderAndIsr     // the znode before the last write, for reply
	started chan struct{}            // a write has begun (capacity 1)
	release chan struct{}            // nil: reply at once
}

func (z *landingZK) WriteLeaderAndIsr(_ context.Context, tp cluster.TopicPartition, st cluster.LeaderAndIsr) (int32, error) {
	z.mu.Lock()
	if st.ZkVersion != z.state.ZkVersion {
		// Read back, as zkcoord's writer does on BADVERSION.
		stored := z.state
		stored.Isr = slices.Clone(stored.Isr)
		z.mu.Unlock()
		return -1, fmt.Errorf("write %s at %d: %w", tp, st.ZkVersion, &StateConflictError{Stored: stored})
	}
	st.Isr = slices.Clone(st.Isr)
	st.ZkVersion++
	z.prev, z.state = z.state, st
	var err error
	if z.reply != nil {
		err = z.reply(z)
	}
	z.mu.Unlock()
	select {
	case z.started <- struct{}{}:
	default:
	}
	if z.release != nil {
		<-z.release
	}
	if err != nil {
		return -1, err
	}
	return st.ZkVersion, nil
}

func (z *landingZK) NotifyIsrChange(cluster.TopicPartition) {}

func (z *landingZK) isr() []int32 {
	z.mu.Lock()
	defer z.mu.Unlock()
	return slices.Clone(z.state.Isr)
}

// newLandingLeader makes broker 1, on clock and writing its ISR through
// zk, lead tp0 in leader epoch 0 with replicas [1 2], ISR [1] and
// min.insync.replicas 1.
func newLandingLeader(t *testing.T, clock *fakeClock, zk *landingZK) *Manager {
	t.Helper()
	m, err := NewManager(Config{BrokerID: 1, LogDirs: []string{filepath.Join(t.TempDir(), "logs")},
		HighWatermarkCheckpointInterval: time.Hour, RecoveryPointCheckpointInterval: time.Hour,
		RetentionCheckInterval: time.Hour, Now: clock.Now, StateWriter: zk,
		Log: zerolog.New(zerolog.NewTestWriter(t))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	cfg := cluster.DefaultLogConfig()
	cfg.MinInsyncReplicas = 1
	if err := m.ApplyPartitionStates([]PartitionState{leaderState(1, 0, []int32{1, 2}, []int32{1}, cfg)}); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestAcksAllOverMaximalIsr (issue 12 A2): an ISR expansion whose write
// lands in ZooKeeper puts the new member in the znode ISR, where the
// controller may elect it, whatever reply the leader gets: while the write
// is in flight, and after a reply that is not a success, the leader
// computes the HW over the maximal ISR (its ISR plus the pending
// additions, Kafka's AlterIsr), so acks=all never acknowledges an offset a
// znode ISR member lacks, even once that member has stalled for longer
// than the lag time (which takes it out of the HW rule's "caught up"
// followers).
func TestAcksAllOverMaximalIsr(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply func(z *landingZK) error
		delay bool
	}{
		{name: "reply lost", reply: func(*landingZK) error { return errLostReply }},
		{name: "conflict after landing", reply: func(z *landingZK) error {
			// The controller wrote over it, keeping broker 2 in the ISR.
			z.state.ZkVersion++
			z.state.ControllerEpoch++
			return fmt.Errorf("znode at %d: %w", z.state.ZkVersion, ErrStateConflict)
		}},
		{name: "reply delayed", delay: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{t: time.Unix(1000, 0)}
			zk := &landingZK{state: cluster.LeaderAndIsr{Leader: 1, LeaderEpoch: 0, Isr: []int32{1}},
				reply: tc.reply, started: make(chan struct{}, 1)}
			if tc.delay {
				zk.release = make(chan struct{})
			}
			m := newLandingLeader(t, clock, zk)
			first := mustAppend(t, m, buildBatch(batchSpec{records: 2}), -1)
			// Broker 2 catches up to the HW: the leader proposes ISR [1 2]
			// and the write lands.
			fetched := make(chan error, 1)
			go func() {
				_, err := m.Read(tp0, ReadRequest{FetchOffset: first.LastOffset + 1, MaxBytes: 100, ReplicaID: 2, CurrentLeaderEpoch: 0})
				fetched <- err
			}()
			<-zk.started
			if err := <-fetched; err != nil {
				t.Fatal(err)
			}
			if !tc.delay {
				m.waitIsrWrites()
			}
			if got := zk.isr(); !slices.Equal(got, []int32{1, 2}) {
				t.Fatalf("znode ISR %v, want [1 2]", got)
			}
			// Broker 2 then stalls for longer than replica.lag.time.max.ms,
			// so only its ISR membership can hold the HW back.
			clock.Advance(31 * time.Second)
			second := mustAppend(t, m, buildBatch(batchSpec{records: 1}), -1)
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			err := m.WaitCommitted(ctx, tp0, second.LastOffset, second.LeaderEpoch)
			cancel()
			if err == nil {
				t.Fatalf("acks=all acknowledged offset %d, which znode ISR member 2 lacks (its LEO is %d)",
					second.LastOffset, first.LastOffset+1)
			}
			if !errors.Is(err, ErrRequestTimedOut) {
				t.Fatalf("wait: %v, want ErrRequestTimedOut", err)
			}
			if tc.delay {
				close(zk.release)
				m.waitIsrWrites()
			}
			// Once broker 2 has the record, it commits.
			followerFetch(t, m, second.LastOffset+1, 0)
			if err := m.WaitCommitted(context.Background(), tp0, second.LastOffset, second.LeaderEpoch); err != nil {
				t.Fatalf("wait once broker 2 has it: %v", err)
			}
		})
	}
}

// TestMaximalIsrResolvedByShrink: an expansion write whose outcome stayed
// unknown and which in fact did not land keeps the HW within the maximal
// ISR; once the would-be member has been out of sync for longer than the
// lag time, the ISR expiration pass writes the ISR without it, and that
// write's success proves the first did not land: the HW moves on.
func TestMaximalIsrResolvedByShrink(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	zk := &landingZK{state: cluster.LeaderAndIsr{Leader: 1, LeaderEpoch: 0, Isr: []int32{1}}, started: make(chan struct{}, 1)}
	zk.reply = func(z *landingZK) error {
		z.state = z.prev // lost before it applied
		z.reply = nil
		return errLostReply
	}
	m := newLandingLeader(t, clock, zk)
	first := mustAppend(t, m, buildBatch(batchSpec{records: 2}), -1)
	followerFetch(t, m, first.LastOffset+1, 0)
	m.waitIsrWrites()
	second := mustAppend(t, m, buildBatch(batchSpec{records: 1}), -1)
	clock.Advance(31 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	err := m.WaitCommitted(ctx, tp0, second.LastOffset, second.LeaderEpoch)
	cancel()
	if !errors.Is(err, ErrRequestTimedOut) {
		t.Fatalf("wait while broker 2 may be in the ISR: %v, want ErrRequestTimedOut", err)
	}
	m.MaybeShrinkIsr(clock.Now())
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.WaitCommitted(ctx, tp0, second.LastOffset, second.LeaderEpoch); err != nil {
		t.Fatalf("wait after the ISR was written without broker 2: %v (znode ISR %v)", err, zk.isr())
	}
}

// TestMaximalIsrLandedReplyLostThenShrink (KAFKA-2729, widened by the
// maximal ISR): an expansion write lands but its reply is lost, so the
// leader keeps its old ISR and zkVersion; the new member then lags, and
// the expiration pass's write, conditional on the stale zkVersion,
// conflicts. The conflict's read-back state is the leader's own (same
// leader and leader epoch), so the leader adopts it and the next pass
// shrinks the member out: the HW advances again, where before every write
// conflicted for ever and the HW stayed at the stuck member's LEO.
func TestMaximalIsrLandedReplyLostThenShrink(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	zk := &landingZK{state: cluster.LeaderAndIsr{Leader: 1, LeaderEpoch: 0, Isr: []int32{1}}, started: make(chan struct{}, 1)}
	zk.reply = func(z *landingZK) error {
		z.reply = nil // landed; only this reply is lost
		return errLostReply
	}
	m := newLandingLeader(t, clock, zk)
	first := mustAppend(t, m, buildBatch(batchSpec{records: 2}), -1)
	followerFetch(t, m, first.LastOffset+1, 0)
	m.waitIsrWrites()
	if got := zk.isr(); !slices.Equal(got, []int32{1, 2}) {
		t.Fatalf("znode ISR %v after the expansion, want [1 2]", got)
	}
	// Broker 2 is alive but stuck: it never fetches again.
	second := mustAppend(t, m, buildBatch(batchSpec{records: 1}), -1)
	// The passes every lag/2: broker 2 is out of sync from the third on
	// (45 s without catching up), whose write conflicts; the fourth
	// writes on the adopted state.
	for pass := 0; pass < 4; pass++ {
		clock.Advance(15 * time.Second)
		m.MaybeShrinkIsr(clock.Now())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.WaitCommitted(ctx, tp0, second.LastOffset, second.LeaderEpoch); err != nil {
		t.Fatalf("wait after the expiration passes: %v (znode ISR %v)", err, zk.isr())
	}
	if got := zk.isr(); !slices.Equal(got, []int32{1}) {
		t.Fatalf("znode ISR %v, want [1]", got)
	}
	zk.mu.Lock()
	zs := zk.state
	zk.mu.Unlock()
	for _, st := range m.PartitionStatus() {
		if st.ZkVersion != zs.ZkVersion || !slices.Equal(st.Isr, zs.Isr) {
			t.Fatalf("leader holds isr %v at zk_version %d, znode isr %v at %d", st.Isr, st.ZkVersion, zs.Isr, zs.ZkVersion)
		}
	}
}
