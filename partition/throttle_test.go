package partition

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
)

func TestRateWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	var w rateWindow
	if r := w.rate(t0); r != 0 {
		t.Fatalf("empty window rate %v, want 0", r)
	}
	w.record(t0, 1000)
	// Less than one sample's span has passed: the rate is over 1 s.
	for _, d := range []time.Duration{0, 500 * time.Millisecond, time.Second} {
		if r := w.rate(at(d)); r != 1000 {
			t.Fatalf("rate at +%v = %v, want 1000", d, r)
		}
	}
	if r := w.rate(at(2 * time.Second)); r != 500 {
		t.Fatalf("rate at +2s = %v, want 500 (1000 B over 2 s)", r)
	}
	// A second sample begins once the first one's span has passed.
	w.record(at(2*time.Second), 1000)
	if len(w.samples) != 2 {
		t.Fatalf("%d samples after records 2 s apart, want 2", len(w.samples))
	}
	if r := w.rate(at(4 * time.Second)); r != 500 {
		t.Fatalf("rate at +4s = %v, want 500 (2000 B over 4 s)", r)
	}
	// At +11 s the first sample is a whole window (11 x 1 s) old and goes:
	// 1000 B remain, since +2 s.
	if r := w.rate(at(11 * time.Second)); math.Abs(r-1000.0/9) > 1e-9 {
		t.Fatalf("rate at +11s = %v, want %v", r, 1000.0/9)
	}
	if r := w.rate(at(13 * time.Second)); r != 0 {
		t.Fatalf("rate at +13s = %v, want 0 (every sample expired)", r)
	}

	// A steady 100 B/s, recorded every 250 ms for a minute, reads about
	// 100 B/s and never keeps more than 11 samples.
	var s rateWindow
	now := t0
	for i := 0; i < 240; i++ {
		now = now.Add(250 * time.Millisecond)
		s.record(now, 25)
	}
	if len(s.samples) > quotaWindowSamples {
		t.Fatalf("%d samples, want at most %d", len(s.samples), quotaWindowSamples)
	}
	if r := s.rate(now); r < 95 || r > 115 {
		t.Fatalf("steady 100 B/s reads %v", r)
	}
}

func TestReplicationQuotaBound(t *testing.T) {
	now := time.Unix(1000, 0)
	var q replicationQuota
	for _, rate := range []int64{0, -1, math.MaxInt64} {
		q.bound.Store(quotaBound(rate))
		q.record(now, 1<<40)
		if q.exceeded(now) {
			t.Fatalf("rate %d: exceeded, want unlimited", rate)
		}
	}
	q = replicationQuota{}
	q.bound.Store(quotaBound(1000))
	q.record(now, 1000)
	if q.exceeded(now) {
		t.Fatal("1000 B in 1 s exceeds a 1000 B/s bound; Kafka's bound is inclusive")
	}
	q.record(now, 1)
	if !q.exceeded(now) {
		t.Fatal("1001 B in 1 s does not exceed 1000 B/s")
	}
	if q.exceeded(now.Add(2 * time.Second)) {
		t.Fatal("1001 B over 2 s still exceeds 1000 B/s")
	}
}

func TestThrottledReplicaList(t *testing.T) {
	cases := []struct {
		list      string
		partition int32
		broker    int32
		want      bool
	}{
		{"", 0, 1, false},
		{"*", 0, 1, true},
		{"*", 7, 3, true},
		{" * ", 7, 3, true},
		{"0:1,1:2", 0, 1, true},
		{"0:1,1:2", 1, 2, true},
		{"0:1,1:2", 0, 2, false},
		{"0:1,1:2", 1, 1, false},
		{"0:1, 1:2", 1, 2, true},
		{"10:1", 1, 1, false},
		{"1:10", 1, 1, false},
		{"0:1", 0, 1, true},
		{"x:1,0:y", 0, 1, false},
	}
	for _, c := range cases {
		if got := throttledHere(c.list, c.partition, c.broker); got != c.want {
			t.Errorf("throttledHere(%q, %d, %d) = %v, want %v", c.list, c.partition, c.broker, got, c.want)
		}
	}
	// Every value the topic config accepts parses to the same answer after
	// cluster's normalisation.
	cfg, err := cluster.DefaultLogConfig().WithOverrides(map[string]string{"follower.replication.throttled.replicas": "0:1, 1:2"})
	if err != nil {
		t.Fatal(err)
	}
	if !throttledHere(cfg.FollowerReplicationThrottledReplicas, 1, 2) || throttledHere(cfg.FollowerReplicationThrottledReplicas, 2, 1) {
		t.Fatalf("normalised list %q parsed wrong", cfg.FollowerReplicationThrottledReplicas)
	}
}

// quotaClient is a follower's LeaderClient that reads the leader Manager
// directly and, as protocol's Fetch handler does, records the bytes it
// returns of leader-throttled reads.
type quotaClient struct{ leader *Manager }

func (c *quotaClient) Fetch(_ context.Context, _ int32, req FetchRequest) (FetchResponse, error) {
	resp := FetchResponse{Partitions: map[cluster.TopicPartition]FetchPartitionResult{}}
	var throttled int64
	for _, p := range req.Partitions {
		res, err := c.leader.Read(p.TopicPartition, ReadRequest{FetchOffset: p.FetchOffset, MaxBytes: p.MaxBytes,
			ReplicaID: req.ReplicaID, CurrentLeaderEpoch: p.CurrentLeaderEpoch, LogStartOffset: p.LogStartOffset})
		resp.Partitions[p.TopicPartition] = FetchPartitionResult{Err: err, HighWatermark: res.HighWatermark,
			LogStartOffset: res.LogStartOffset, Records: res.Records}
		if res.Throttled {
			throttled += int64(len(res.Records))
		}
	}
	c.leader.RecordLeaderReplication(throttled)
	return resp, nil
}

func (c *quotaClient) OffsetsForLeaderEpoch(_ context.Context, _ int32, queries []EpochQuery) ([]EpochAnswer, error) {
	out := make([]EpochAnswer, 0, len(queries))
	for _, q := range queries {
		e, off, err := c.leader.OffsetForLeaderEpoch(q.TopicPartition, q.CurrentLeaderEpoch, q.LeaderEpoch)
		out = append(out, EpochAnswer{TopicPartition: q.TopicPartition, Err: err, LeaderEpoch: e, EndOffset: off})
	}
	return out, nil
}

// throttlePair is broker 1 leading t-0 and u-0 (replicas [1 2], ISR [1]:
// broker 2 is a new replica catching up; for t-0, a reassignment adds it) with
// `batches` batches of 8 KiB each, and broker 2 following both, with
// replica.fetch.max.bytes 64 KiB, on one fake clock. Both Managers are
// never started: rounds run with replicateOnce.
type throttlePair struct {
	clock            *fakeClock
	leader, follower *Manager
	tT, tU           cluster.TopicPartition
}

const throttleBatch = 8 << 10

func newThrottlePair(t *testing.T, tCfg cluster.LogConfig, batches int) *throttlePair {
	return newThrottlePairMetrics(t, tCfg, batches, nil)
}

// newThrottlePairMetrics is newThrottlePair with both Managers reporting
// to metrics.
func newThrottlePairMetrics(t *testing.T, tCfg cluster.LogConfig, batches int, metrics Metrics) *throttlePair {
	t.Helper()
	p := &throttlePair{clock: &fakeClock{t: time.Unix(1000, 0)},
		tT: cluster.TopicPartition{Topic: "t", Partition: 0}, tU: cluster.TopicPartition{Topic: "u", Partition: 0}}
	base := t.TempDir()
	mk := func(id int32, lc LeaderClient) *Manager {
		m, err := NewManager(Config{BrokerID: id, LogDirs: []string{filepath.Join(base, fmt.Sprint(id))},
			HighWatermarkCheckpointInterval: time.Second, RecoveryPointCheckpointInterval: time.Second,
			RetentionCheckInterval: time.Hour, Now: p.clock.Now, ReplicaFetchMaxBytes: 64 << 10,
			LeaderClient: lc, Metrics: metrics,
			Log: zerolog.New(zerolog.NewTestWriter(t)).With().Int32("broker_id", id).Logger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		return m
	}
	p.leader = mk(1, nil)
	p.follower = mk(2, &quotaClient{leader: p.leader})
	lai := cluster.LeaderAndIsr{Leader: 1, LeaderEpoch: 0, Isr: []int32{1}}
	// t-0 is being reassigned: 2 is the replica it adds.
	states := []PartitionState{
		{TopicPartition: p.tT, Replicas: []int32{1, 2}, LeaderAndIsr: lai, Config: tCfg, AddingReplicas: []int32{2}},
		{TopicPartition: p.tU, Replicas: []int32{1, 2}, LeaderAndIsr: lai, Config: cluster.DefaultLogConfig()},
	}
	for _, m := range []*Manager{p.leader, p.follower} {
		if err := m.ApplyPartitionStates(states); err != nil {
			t.Fatal(err)
		}
	}
	for _, tp := range []cluster.TopicPartition{p.tT, p.tU} {
		for i := 0; i < batches; i++ {
			if _, err := p.leader.Append(tp, buildBatch(batchSpec{records: 1, valueSize: throttleBatch - 80}), 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	return p
}

// logBytes is the size of tp's log on m, segment files' sizes as read.
func logBytes(t *testing.T, m *Manager, tp cluster.TopicPartition) int64 {
	t.Helper()
	r, err := m.get(tp)
	if err != nil {
		t.Fatal(err)
	}
	data, err := r.log.Read(r.log.LogStartOffset(), math.MaxInt32, r.log.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	return int64(len(data))
}

func leo(t *testing.T, m *Manager, tp cluster.TopicPartition) int64 {
	t.Helper()
	r, err := m.get(tp)
	if err != nil {
		t.Fatal(err)
	}
	return r.log.LogEndOffset()
}

// run drives rounds every step of fake time for d, returning the rounds
// it took u-0 to catch up (-1 if it did not).
func (p *throttlePair) run(t *testing.T, d, step time.Duration) int {
	t.Helper()
	caughtUp := -1
	for i := 0; time.Duration(i)*step < d; i++ {
		p.follower.replicateOnce()
		if caughtUp < 0 && leo(t, p.follower, p.tU) == leo(t, p.leader, p.tU) {
			caughtUp = i + 1
		}
		p.clock.Advance(step)
	}
	return caughtUp
}

// checkThrottled asserts t-0 moved within rate over d (plus one fetch of
// replica.fetch.max.bytes, the most a round can take past the bound, and
// the first second's allowance) but not far below it, and u-0 caught up
// as fast as 64 KiB rounds allow.
func (p *throttlePair) checkThrottled(t *testing.T, rate int64, d time.Duration, caughtUp, batches int) {
	t.Helper()
	moved := logBytes(t, p.follower, p.tT)
	limit := rate*int64(d/time.Second) + 2*(64<<10)
	if moved > limit {
		t.Fatalf("throttled partition moved %d B in %v at %d B/s, above %d", moved, d, rate, limit)
	}
	if floor := rate * int64(d/time.Second) / 2; moved < floor {
		t.Fatalf("throttled partition moved only %d B in %v at %d B/s (< %d)", moved, d, rate, floor)
	}
	// 8 batches of 8 KiB per 64 KiB round, plus the truncation round.
	if want := batches/8 + 2; caughtUp < 0 || caughtUp > want {
		t.Fatalf("unthrottled partition caught up after %d rounds, want <= %d", caughtUp, want)
	}
	t.Logf("throttled: %d B in %v (%.0f B/s, bound %d); unthrottled: caught up in %d rounds",
		moved, d, float64(moved)/d.Seconds(), rate, caughtUp)
}

func TestFollowerReplicationThrottle(t *testing.T) {
	const batches, rate = 256, 64 << 10 // 2 MiB each, 64 KiB/s
	cfg := cluster.DefaultLogConfig()
	cfg.FollowerReplicationThrottledReplicas = "0:2" // t-0 on broker 2, the follower
	p := newThrottlePair(t, cfg, batches)
	p.follower.SetReplicationQuotas(0, rate)
	d := 10 * time.Second
	caughtUp := p.run(t, d, 100*time.Millisecond)
	p.checkThrottled(t, rate, d, caughtUp, batches)
	if l, f := p.follower.ReplicationByteRates(); f <= 0 || l != 0 {
		t.Fatalf("follower byte rates leader %v follower %v, want only the follower's above 0", l, f)
	}
	if l, _ := p.leader.ReplicationByteRates(); l != 0 {
		t.Fatalf("leader recorded %v B/s without a leader throttle", l)
	}

	// Unlimited again: t-0 catches up at once.
	p.follower.SetReplicationQuotas(0, math.MaxInt64)
	p.run(t, 5*time.Second, 100*time.Millisecond)
	if got, want := leo(t, p.follower, p.tT), leo(t, p.leader, p.tT); got != want {
		t.Fatalf("t-0 at %d after the throttle went, leader at %d", got, want)
	}
}

func TestLeaderReplicationThrottle(t *testing.T) {
	const batches, rate = 256, 64 << 10
	cfg := cluster.DefaultLogConfig()
	cfg.LeaderReplicationThrottledReplicas = "0:1" // t-0 on broker 1, the leader
	p := newThrottlePair(t, cfg, batches)
	p.leader.SetReplicationQuotas(rate, 0)
	d := 10 * time.Second
	caughtUp := p.run(t, d, 100*time.Millisecond)
	p.checkThrottled(t, rate, d, caughtUp, batches)
	if l, f := p.leader.ReplicationByteRates(); l <= 0 || f != 0 {
		t.Fatalf("leader byte rates leader %v follower %v, want only the leader's above 0", l, f)
	}
}

// TestLeaderThrottleSparesISR: over quota, the leader holds back a
// throttled partition only from followers outside the ISR, and never
// holds back unthrottled partitions or consumers.
func TestLeaderThrottleSparesISR(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	m := newTestManager(t, 1, "", clock)
	cfg := cluster.DefaultLogConfig()
	cfg.LeaderReplicationThrottledReplicas = "*"
	tpU := cluster.TopicPartition{Topic: "u", Partition: 0}
	lai := cluster.LeaderAndIsr{Leader: 1, LeaderEpoch: 0, Isr: []int32{1, 3}}
	if err := m.ApplyPartitionStates([]PartitionState{
		{TopicPartition: tp0, Replicas: []int32{1, 2, 3}, LeaderAndIsr: lai, Config: cfg},
		{TopicPartition: tpU, Replicas: []int32{1, 2, 3}, LeaderAndIsr: lai, Config: cluster.DefaultLogConfig()},
	}); err != nil {
		t.Fatal(err)
	}
	for _, tp := range []cluster.TopicPartition{tp0, tpU} {
		if _, err := m.Append(tp, buildBatch(batchSpec{records: 3, valueSize: 100}), 1); err != nil {
			t.Fatal(err)
		}
	}
	read := func(tp cluster.TopicPartition, replica int32) ReadResult {
		t.Helper()
		res, err := m.Read(tp, ReadRequest{FetchOffset: 0, MaxBytes: 1 << 20, ReplicaID: replica, CurrentLeaderEpoch: -1})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for _, st := range m.PartitionStatus() {
		if st.LeaderThrottled != (st.TopicPartition == tp0) || st.FollowerThrottled || st.SizeBytes <= 0 {
			t.Fatalf("status of %s: leader throttled %v, follower throttled %v, size %d",
				st.TopicPartition, st.LeaderThrottled, st.FollowerThrottled, st.SizeBytes)
		}
	}
	m.SetReplicationQuotas(1000, 0)
	if l, f := m.ReplicationQuotas(); l != 1000 || f != math.MaxInt64 {
		t.Fatalf("quotas %d, %d after SetReplicationQuotas(1000, 0)", l, f)
	}
	if res := read(tp0, 2); len(res.Records) == 0 || !res.Throttled {
		t.Fatalf("under quota: %d bytes, throttled %v; want records of a throttled read", len(res.Records), res.Throttled)
	}
	m.RecordLeaderReplication(5000)
	if res := read(tp0, 2); len(res.Records) != 0 || !res.Throttled {
		t.Fatalf("over quota, follower outside the ISR: %d bytes, throttled %v; want none", len(res.Records), res.Throttled)
	}
	if res := read(tp0, 3); len(res.Records) == 0 {
		t.Fatal("over quota, follower in the ISR got no records")
	}
	if res := read(tpU, 2); len(res.Records) == 0 || res.Throttled {
		t.Fatalf("over quota, unthrottled partition: %d bytes, throttled %v", len(res.Records), res.Throttled)
	}
	// Broker 3 reaching the LEO commits the records for consumers once
	// broker 2 has lagged for replica.lag.time.max.ms (Kafka 2.4+'s HW).
	clock.Advance(31 * time.Second)
	if _, err := m.Read(tp0, ReadRequest{FetchOffset: 3, MaxBytes: 1 << 20, ReplicaID: 3, CurrentLeaderEpoch: -1}); err != nil {
		t.Fatal(err)
	}
	res, err := m.Read(tp0, ReadRequest{FetchOffset: 0, MaxBytes: 1 << 20, ReplicaID: -1, CurrentLeaderEpoch: -1})
	if err != nil || len(res.Records) == 0 || res.Throttled {
		t.Fatalf("consumer read: %d bytes, throttled %v, err %v", len(res.Records), res.Throttled, err)
	}
	// The throttle list is dropped by a config change: no longer held back.
	m.UpdateConfig(tp0.Topic, cluster.DefaultLogConfig())
	if res := read(tp0, 2); len(res.Records) == 0 || res.Throttled {
		t.Fatalf("after the throttle list was removed: %d bytes, throttled %v", len(res.Records), res.Throttled)
	}
	// A higher rate lifts the throttle at once.
	m.UpdateConfig(tp0.Topic, cfg)
	m.SetReplicationQuotas(math.MaxInt64, 0)
	if res := read(tp0, 2); len(res.Records) == 0 {
		t.Fatal("unlimited leader quota still holds back")
	}
}

// TestReplicationQuotasConcurrent: the setter, reads, fetch rounds and
// the metric run at once without a race.
func TestReplicationQuotasConcurrent(t *testing.T) {
	cfg := cluster.DefaultLogConfig()
	cfg.LeaderReplicationThrottledReplicas = "*"
	cfg.FollowerReplicationThrottledReplicas = "*"
	p := newThrottlePair(t, cfg, 16)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for _, m := range []*Manager{p.leader, p.follower} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int64(0); ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				m.SetReplicationQuotas(1000+i, 2000+i)
				m.ReplicationByteRates()
			}
		}()
	}
	for i := 0; i < 50; i++ {
		p.follower.replicateOnce()
	}
	close(stop)
	wg.Wait()
}

// reassignCounter counts ReassignmentBytes.
type reassignCounter struct {
	noMetrics
	mu      sync.Mutex
	in, out int64
}

func (c *reassignCounter) ReassignmentBytes(n int64, in bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if in {
		c.in += n
	} else {
		c.out += n
	}
}

// TestReassignmentBytesMetrics: only t-0, which a reassignment adds broker
// 2 to, counts as reassignment traffic, on both ends (KIP-573).
func TestReassignmentBytesMetrics(t *testing.T) {
	c := &reassignCounter{}
	p := newThrottlePairMetrics(t, cluster.DefaultLogConfig(), 16, c)
	p.run(t, time.Second, 100*time.Millisecond)
	want := logBytes(t, p.leader, p.tT)
	if got := logBytes(t, p.follower, p.tT); got != want || leo(t, p.follower, p.tU) != leo(t, p.leader, p.tU) {
		t.Fatalf("follower did not catch up: t-0 %d of %d bytes", got, want)
	}
	if c.in != want || c.out != want {
		t.Fatalf("reassignment bytes in %d out %d, want %d each (t-0 only, u-0 is not reassigned)", c.in, c.out, want)
	}
}
