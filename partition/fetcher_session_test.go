package partition

// The fetcher against a leader that answers as an incremental fetch
// session does (KIP-227): every partition asked for is read (the leader
// records the follower's fetch), but the response leaves out those with
// no records, no error and offsets already answered. The fetcher must
// take an omitted partition as "no new data": the follower stays in the
// ISR while idle and catches up after a produce.

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
)

// sessionClient is a LeaderClient over leader that omits unchanged
// partitions, as a session's incremental response does.
type sessionClient struct {
	leader *Manager
	// answered is the HW and log start last answered per partition.
	answered map[cluster.TopicPartition][2]int64
	omitted  int
}

func (c *sessionClient) Fetch(_ context.Context, _ int32, req FetchRequest) (FetchResponse, error) {
	resp := FetchResponse{Partitions: map[cluster.TopicPartition]FetchPartitionResult{}}
	for _, p := range req.Partitions {
		res, err := c.leader.Read(p.TopicPartition, ReadRequest{FetchOffset: p.FetchOffset, MaxBytes: p.MaxBytes,
			ReplicaID: req.ReplicaID, CurrentLeaderEpoch: p.CurrentLeaderEpoch, LogStartOffset: p.LogStartOffset})
		c.leader.waitIsrWrites()
		last, seen := c.answered[p.TopicPartition]
		if err == nil && len(res.Records) == 0 && seen && last == [2]int64{res.HighWatermark, res.LogStartOffset} {
			c.omitted++
			continue
		}
		pr := FetchPartitionResult{Err: err, HighWatermark: res.HighWatermark, LogStartOffset: res.LogStartOffset, Records: res.Records}
		if err != nil {
			pr.HighWatermark, pr.LogStartOffset = -1, -1
		}
		c.answered[p.TopicPartition] = [2]int64{pr.HighWatermark, pr.LogStartOffset}
		resp.Partitions[p.TopicPartition] = pr
	}
	return resp, nil
}

func (c *sessionClient) OffsetsForLeaderEpoch(_ context.Context, _ int32, qs []EpochQuery) ([]EpochAnswer, error) {
	var out []EpochAnswer
	for _, q := range qs {
		e, off, err := c.leader.OffsetForLeaderEpoch(q.TopicPartition, q.CurrentLeaderEpoch, q.LeaderEpoch)
		out = append(out, EpochAnswer{TopicPartition: q.TopicPartition, Err: err, LeaderEpoch: e, EndOffset: off})
	}
	return out, nil
}

func TestFetcherOmittedPartitionsInSession(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	const lag = 10 * time.Second
	zk := &fakeZK{}
	newMgr := func(id int32, lc LeaderClient) *Manager {
		m, err := NewManager(Config{
			BrokerID: id, LogDirs: []string{filepath.Join(t.TempDir(), "logs")},
			HighWatermarkCheckpointInterval: time.Hour, RecoveryPointCheckpointInterval: time.Hour,
			RetentionCheckInterval: time.Hour, Now: clock.Now, ReplicaLagTimeMax: lag,
			LeaderClient: lc, StateWriter: zk, Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		return m
	}
	leader := newMgr(1, nil)
	client := &sessionClient{leader: leader, answered: map[cluster.TopicPartition][2]int64{}}
	follower := newMgr(2, client)
	st := zk.controllerWrite(1, 0, []int32{1, 2})
	ps := PartitionState{TopicPartition: tp0, Replicas: []int32{1, 2}, Config: cluster.DefaultLogConfig(), LeaderAndIsr: st}
	for _, m := range []*Manager{leader, follower} {
		if err := m.ApplyPartitionStates([]PartitionState{ps}); err != nil {
			t.Fatal(err)
		}
	}
	statusOf := func(m *Manager) ReplicaStatus {
		for _, s := range m.PartitionStatus() {
			if s.TopicPartition == tp0 {
				return s
			}
		}
		t.Fatal("no replica of tp0")
		return ReplicaStatus{}
	}
	if _, err := leader.Append(tp0, buildBatch(batchSpec{records: 3, valueSize: 8}), 1); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		follower.replicateOnce()
	}
	if f, l := statusOf(follower), statusOf(leader); f.LogEndOffset != 3 || f.HighWatermark != 3 || l.HighWatermark != 3 {
		t.Fatalf("after catching up: follower LEO %d HW %d, leader HW %d; want 3", f.LogEndOffset, f.HighWatermark, l.HighWatermark)
	}

	// Idle for three lag times, fetching every second: every response
	// omits tp0, the follower stays in the ISR.
	omitted := client.omitted
	for range 30 {
		clock.Advance(time.Second)
		follower.replicateOnce()
		leader.MaybeShrinkIsr(clock.Now())
		leader.waitIsrWrites()
	}
	if client.omitted-omitted < 30 {
		t.Fatalf("only %d of 30 idle responses omitted the partition", client.omitted-omitted)
	}
	if isr := statusOf(leader).Isr; !slices.Equal(isr, []int32{1, 2}) {
		t.Fatalf("ISR %v after idling, want [1 2]", isr)
	}
	if f := statusOf(follower); f.LogEndOffset != 3 || f.HighWatermark != 3 {
		t.Fatalf("idle follower moved: LEO %d HW %d", f.LogEndOffset, f.HighWatermark)
	}

	// A produce: the follower fetches it, and learns the new HW from the
	// answer after the one that moved it.
	if _, err := leader.Append(tp0, buildBatch(batchSpec{records: 2, valueSize: 8, timestamp: 1}), 1); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		follower.replicateOnce()
	}
	if f, l := statusOf(follower), statusOf(leader); f.LogEndOffset != 5 || f.HighWatermark != 5 || l.HighWatermark != 5 {
		t.Fatalf("after a produce: follower LEO %d HW %d, leader HW %d; want 5", f.LogEndOffset, f.HighWatermark, l.HighWatermark)
	}
}
