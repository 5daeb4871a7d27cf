package partition

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/logstore"
)

func mustAppend(t *testing.T, m *Manager, b []byte, acks int16) AppendResult {
	t.Helper()
	res, err := m.Append(tp0, b, acks)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return res
}

func hwOf(t *testing.T, m *Manager) int64 {
	t.Helper()
	res, err := m.Read(tp0, ReadRequest{FetchOffset: 0, MaxBytes: 1, ReplicaID: -1, CurrentLeaderEpoch: -1})
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return res.HighWatermark
}

// TestSingleReplicaLeader: with the ISR {self}, an append moves the HW to
// the LEO at once and consumers read it back; offsets are assigned in order.
func TestSingleReplicaLeader(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	m := newTestManager(t, 1, "", clock)
	if err := m.ApplyPartitionStates([]PartitionState{leaderState(1, 0, []int32{1}, []int32{1}, cluster.DefaultLogConfig())}); err != nil {
		t.Fatal(err)
	}
	var want int64
	for i := 0; i < 5; i++ {
		res := mustAppend(t, m, buildBatch(batchSpec{records: 3, valueSize: 10}), -1)
		if res.BaseOffset != want || res.LastOffset != want+2 {
			t.Fatalf("batch %d: offsets [%d,%d], want [%d,%d]", i, res.BaseOffset, res.LastOffset, want, want+2)
		}
		want += 3
		if err := m.WaitCommitted(context.Background(), tp0, res.LastOffset, res.LeaderEpoch); err != nil {
			t.Fatalf("wait committed: %v", err)
		}
	}
	if hw := hwOf(t, m); hw != 15 {
		t.Fatalf("hw = %d, want 15", hw)
	}
	res, err := m.Read(tp0, ReadRequest{FetchOffset: 0, MaxBytes: 1 << 20, ReplicaID: -1, CurrentLeaderEpoch: 0})
	if err != nil || len(res.Records) == 0 {
		t.Fatalf("read: %d bytes, %v", len(res.Records), err)
	}
	if off, _, epoch, err := m.ListOffset(tp0, LatestTimestamp, -1, AskerConsumer); err != nil || off != 15 || epoch != 0 {
		t.Fatalf("latest offset = %d epoch %d (%v), want 15 epoch 0", off, epoch, err)
	}
	if off, _, _, err := m.ListOffset(tp0, EarliestTimestamp, -1, AskerConsumer); err != nil || off != 0 {
		t.Fatalf("earliest offset = %d (%v)", off, err)
	}
}

// TestSeedHighWatermark is seed 000's picture: leader LEO 5, follower1 LEO
// 5, follower2 LEO 4, so HW is 4 and a consumer reads offsets 0..3 only;
// when follower2 reaches 5 the HW becomes 5.
func TestSeedHighWatermark(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	m := newTestManager(t, 1, "", clock)
	if err := m.ApplyPartitionStates([]PartitionState{leaderState(1, 0, []int32{1, 2, 3}, []int32{1, 2, 3}, cluster.DefaultLogConfig())}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		mustAppend(t, m, buildBatch(batchSpec{records: 1, valueSize: 5}), 1)
	}
	if hw := hwOf(t, m); hw != 0 {
		t.Fatalf("before followers fetch, hw = %d, want 0", hw)
	}
	follow := func(id int32, off int64) ReadResult {
		res, err := m.Read(tp0, ReadRequest{FetchOffset: off, MaxBytes: 1 << 20, ReplicaID: id, CurrentLeaderEpoch: 0})
		if err != nil {
			t.Fatalf("follower %d fetch at %d: %v", id, off, err)
		}
		return res
	}
	follow(2, 5)
	follow(3, 4)
	if hw := hwOf(t, m); hw != 4 {
		t.Fatalf("hw = %d, want 4 (min LEO over ISR)", hw)
	}
	// A consumer sees offsets 0..3 and nothing at 4.
	res, err := m.Read(tp0, ReadRequest{FetchOffset: 0, MaxBytes: 1 << 20, ReplicaID: -1, CurrentLeaderEpoch: -1})
	if err != nil {
		t.Fatal(err)
	}
	if n := countBatches(t, res.Records); n != 4 {
		t.Fatalf("consumer read %d batches, want 4", n)
	}
	if res, err := m.Read(tp0, ReadRequest{FetchOffset: 4, MaxBytes: 1 << 20, ReplicaID: -1, CurrentLeaderEpoch: -1}); err != nil || len(res.Records) != 0 {
		t.Fatalf("consumer at offset 4 got %d bytes (%v), want none", len(res.Records), err)
	}
	// A follower reads up to the LEO.
	if n := countBatches(t, follow(3, 4).Records); n != 1 {
		t.Fatalf("follower read %d batches, want 1", n)
	}
	follow(3, 5)
	if hw := hwOf(t, m); hw != 5 {
		t.Fatalf("hw = %d, want 5 once follower2 reached 5", hw)
	}
}

func countBatches(t *testing.T, records []byte) int {
	t.Helper()
	n := 0
	if err := forEachBatch(records, func(_ logstore.BatchHeader, _ []byte) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestAcksAllWaitsForISR: acks=all completes only when every ISR member has
// the batch, times out otherwise, and fails when leadership is lost.
func TestAcksAllWaitsForISR(t *testing.T) {
	m, cfg := newLeaderManager(t, 2, []int32{1, 2}, []int32{1, 2})
	res := mustAppend(t, m, buildBatch(batchSpec{records: 2}), -1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := m.WaitCommitted(ctx, tp0, res.LastOffset, res.LeaderEpoch); !errors.Is(err, ErrRequestTimedOut) {
		t.Fatalf("wait without follower: %v, want ErrRequestTimedOut", err)
	}
	done := make(chan error, 1)
	go func() { done <- m.WaitCommitted(context.Background(), tp0, res.LastOffset, res.LeaderEpoch) }()
	followerFetch(t, m, 2, -1)
	if err := <-done; err != nil {
		t.Fatalf("wait after follower caught up: %v", err)
	}
	// A second append, then the replica becomes follower: the waiter fails.
	res = mustAppend(t, m, buildBatch(batchSpec{records: 1}), -1)
	go func() { done <- m.WaitCommitted(context.Background(), tp0, res.LastOffset, res.LeaderEpoch) }()
	st := leaderState(2, 1, []int32{1, 2}, []int32{2}, cfg)
	if err := m.ApplyPartitionStates([]PartitionState{st}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrNotLeader) {
		t.Fatalf("wait across leadership loss: %v, want ErrNotLeader", err)
	}
	if _, err := m.Append(tp0, buildBatch(batchSpec{}), 1); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("append on follower: %v, want ErrNotLeader", err)
	}
}

// TestMinInsyncReplicas: acks=all with the ISR below min.insync.replicas is
// refused before anything is written; acks=1 still appends.
func TestMinInsyncReplicas(t *testing.T) {
	m, _ := newLeaderManager(t, 2, []int32{1, 2}, []int32{1})
	if _, err := m.Append(tp0, buildBatch(batchSpec{}), -1); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("acks=all with isr {1}: %v, want ErrNotEnoughReplicas", err)
	}
	if off, _, _, _ := m.ListOffset(tp0, LatestTimestamp, -1, AskerConsumer); off != 0 {
		t.Fatalf("nothing may be written, latest = %d", off)
	}
	res := mustAppend(t, m, buildBatch(batchSpec{}), 1)
	if res.BaseOffset != 0 {
		t.Fatalf("acks=1 base offset %d", res.BaseOffset)
	}
	// Written and committed with the ISR at {1}: acks=all would report
	// NOT_ENOUGH_REPLICAS_AFTER_APPEND.
	if err := m.WaitCommitted(context.Background(), tp0, res.LastOffset, res.LeaderEpoch); !errors.Is(err, ErrNotEnoughReplicasAfterAppend) {
		t.Fatalf("wait with short isr: %v, want ErrNotEnoughReplicasAfterAppend", err)
	}
}

// TestBatchValidation: corrupt, oversized and multi-batch produce payloads
// are refused and nothing is appended.
func TestBatchValidation(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	m := newTestManager(t, 1, "", clock)
	cfg := cluster.DefaultLogConfig()
	cfg.MaxMessageBytes = 500
	if err := m.ApplyPartitionStates([]PartitionState{leaderState(1, 0, []int32{1}, []int32{1}, cfg)}); err != nil {
		t.Fatal(err)
	}
	corrupt := buildBatch(batchSpec{valueSize: 20})
	corrupt[len(corrupt)-3] ^= 0x40
	two := append(buildBatch(batchSpec{}), buildBatch(batchSpec{})...)
	cases := []struct {
		name    string
		records []byte
		want    error
	}{
		{"bad crc", corrupt, ErrCorruptMessage},
		{"too large", buildBatch(batchSpec{valueSize: 600}), ErrMessageTooLarge},
		{"two batches", two, ErrInvalidRecord},
		{"truncated", buildBatch(batchSpec{valueSize: 20})[:40], ErrCorruptMessage},
		{"empty", nil, ErrInvalidRecord},
	}
	for _, c := range cases {
		if _, err := m.Append(tp0, c.records, 1); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if off, _, _, _ := m.ListOffset(tp0, LatestTimestamp, -1, AskerConsumer); off != 0 {
		t.Fatalf("nothing may be written, latest = %d", off)
	}
}

// TestIdempotentProducer: a retried batch gets its original offsets and is
// not written twice; gaps and old epochs are refused; the state survives a
// restart because it is rebuilt from the log.
func TestIdempotentProducer(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	dir := t.TempDir()
	m := newTestManager(t, 1, dir, clock)
	st := leaderState(1, 0, []int32{1}, []int32{1}, cluster.DefaultLogConfig())
	if err := m.ApplyPartitionStates([]PartitionState{st}); err != nil {
		t.Fatal(err)
	}
	b0 := buildBatch(batchSpec{records: 2, producerID: 7, producerEpoch: 1, baseSequence: 0})
	b1 := buildBatch(batchSpec{records: 3, producerID: 7, producerEpoch: 1, baseSequence: 2})
	r0 := mustAppend(t, m, b0, -1)
	r1 := mustAppend(t, m, b1, -1)
	if dup := mustAppend(t, m, b0, -1); dup.BaseOffset != r0.BaseOffset {
		t.Fatalf("duplicate of b0 got offset %d, want %d", dup.BaseOffset, r0.BaseOffset)
	}
	if dup := mustAppend(t, m, b1, -1); dup.BaseOffset != r1.BaseOffset {
		t.Fatalf("duplicate of b1 got offset %d, want %d", dup.BaseOffset, r1.BaseOffset)
	}
	gap := buildBatch(batchSpec{records: 1, producerID: 7, producerEpoch: 1, baseSequence: 9})
	if _, err := m.Append(tp0, gap, -1); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("gap: %v, want ErrOutOfOrderSequence", err)
	}
	old := buildBatch(batchSpec{records: 1, producerID: 7, producerEpoch: 0, baseSequence: 5})
	if _, err := m.Append(tp0, old, -1); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("old epoch: %v, want ErrInvalidProducerEpoch", err)
	}
	unknown := buildBatch(batchSpec{records: 1, producerID: 8, producerEpoch: 0, baseSequence: 4})
	if _, err := m.Append(tp0, unknown, -1); !errors.Is(err, ErrUnknownProducerID) {
		t.Fatalf("unknown producer: %v, want ErrUnknownProducerID", err)
	}
	if off, _, _, _ := m.ListOffset(tp0, LatestTimestamp, -1, AskerConsumer); off != 5 {
		t.Fatalf("latest = %d, want 5 (no duplicate written)", off)
	}

	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m2 := newTestManager(t, 1, dir, clock)
	if err := m2.ApplyPartitionStates([]PartitionState{st}); err != nil {
		t.Fatal(err)
	}
	if dup := mustAppend(t, m2, b1, -1); dup.BaseOffset != r1.BaseOffset {
		t.Fatalf("after restart, duplicate of b1 got offset %d, want %d", dup.BaseOffset, r1.BaseOffset)
	}
	next := buildBatch(batchSpec{records: 1, producerID: 7, producerEpoch: 1, baseSequence: 5})
	if res := mustAppend(t, m2, next, -1); res.BaseOffset != 5 {
		t.Fatalf("after restart, next batch at %d, want 5", res.BaseOffset)
	}
	if hw := hwOf(t, m2); hw != 6 {
		t.Fatalf("hw after restart = %d, want 6", hw)
	}
}

// TestLeaderEpochFencing: a client's leader epoch older than ours is
// fenced, a newer one unknown; stale partition states are ignored.
func TestLeaderEpochFencing(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	m := newTestManager(t, 1, "", clock)
	if err := m.ApplyPartitionStates([]PartitionState{leaderState(1, 3, []int32{1}, []int32{1}, cluster.DefaultLogConfig())}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		epoch int32
		want  error
	}{{2, ErrFencedLeaderEpoch}, {4, ErrUnknownLeaderEpoch}, {3, nil}, {-1, nil}} {
		_, err := m.Read(tp0, ReadRequest{FetchOffset: 0, MaxBytes: 10, ReplicaID: -1, CurrentLeaderEpoch: c.epoch})
		if !errors.Is(err, c.want) {
			t.Errorf("epoch %d: %v, want %v", c.epoch, err, c.want)
		}
	}
	// An older state (epoch 2 naming broker 2 leader) is ignored.
	if err := m.ApplyPartitionStates([]PartitionState{leaderState(2, 2, []int32{1, 2}, []int32{2}, cluster.DefaultLogConfig())}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Append(tp0, buildBatch(batchSpec{}), 1); err != nil {
		t.Fatalf("still leader after a stale state: %v", err)
	}
	if _, err := m.Read(cluster.TopicPartition{Topic: "nope"}, ReadRequest{}); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("unknown partition: %v", err)
	}
}

// TestStopReplicaRemovesDirectory: topic deletion removes the replica's directory.
func TestStopReplicaRemovesDirectory(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	m := newTestManager(t, 1, "", clock)
	if err := m.ApplyPartitionStates([]PartitionState{leaderState(1, 0, []int32{1}, []int32{1}, cluster.DefaultLogConfig())}); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, m, buildBatch(batchSpec{}), 1)
	if err := m.StopReplicas([]cluster.TopicPartition{tp0}, true); err != nil {
		t.Fatal(err)
	}
	if len(m.Hosted()) != 0 {
		t.Fatalf("hosted after stop: %v", m.Hosted())
	}
	if _, err := m.Read(tp0, ReadRequest{}); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("read after delete: %v", err)
	}
}

// TestWaitCommittedAcrossEpochs: an acks=all append waits for commitment
// in its own leader epoch. If leadership moves away and back before the
// waiter looks, the wait fails with ErrNotLeader even though this broker
// leads again and its HW later passes the offset: the leader in between
// may have truncated the records, and the HW would then speak of others.
func TestWaitCommittedAcrossEpochs(t *testing.T) {
	m, cfg := newLeaderManager(t, 1, []int32{1, 2}, []int32{1, 2})
	old := mustAppend(t, m, buildBatch(batchSpec{records: 2}), -1)
	if old.LeaderEpoch != 0 {
		t.Fatalf("append in epoch %d, want 0", old.LeaderEpoch)
	}
	for _, st := range []PartitionState{
		leaderState(2, 1, []int32{1, 2}, []int32{2}, cfg),    // broker 2 leads
		leaderState(1, 2, []int32{1, 2}, []int32{1, 2}, cfg), // and this broker again
	} {
		if err := m.ApplyPartitionStates([]PartitionState{st}); err != nil {
			t.Fatal(err)
		}
	}
	cur := mustAppend(t, m, buildBatch(batchSpec{records: 1}), -1)
	if cur.LeaderEpoch != 2 {
		t.Fatalf("append in epoch %d, want 2", cur.LeaderEpoch)
	}
	followerFetch(t, m, cur.LastOffset+1, 2)
	if hw := hwOf(t, m); hw <= old.LastOffset {
		t.Fatalf("hw %d, want past %d", hw, old.LastOffset)
	}
	if err := m.WaitCommitted(context.Background(), tp0, old.LastOffset, old.LeaderEpoch); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("wait for an epoch-0 append in epoch 2: %v, want ErrNotLeader", err)
	}
	if err := m.WaitCommitted(context.Background(), tp0, cur.LastOffset, cur.LeaderEpoch); err != nil {
		t.Fatalf("wait for the epoch-2 append: %v", err)
	}
}

// TestListOffsetLaggingHighWatermark is KIP-207: a leader re-elected with
// records past its HW (written in the previous epoch, not yet known to be
// replicated) answers a consumer's "latest" with ErrOffsetNotAvailable
// rather than an offset that may go backwards, until the HW reaches the
// start of the new epoch; a v0 consumer gets the HW and any other replica
// id the LEO, as in Kafka.
func TestListOffsetLaggingHighWatermark(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	m := newTestManager(t, 1, "", clock)
	isr := []int32{1, 2}
	if err := m.ApplyPartitionStates([]PartitionState{leaderState(1, 0, isr, isr, cluster.DefaultLogConfig())}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		mustAppend(t, m, buildBatch(batchSpec{records: 1, valueSize: 5, timestamp: 2000 + int64(i)}), 1)
	}
	follow := func(off int64, epoch int32) {
		t.Helper()
		if _, err := m.Read(tp0, ReadRequest{FetchOffset: off, MaxBytes: 1 << 20, ReplicaID: 2, CurrentLeaderEpoch: epoch}); err != nil {
			t.Fatalf("follower fetch at %d: %v", off, err)
		}
	}
	follow(2, 0) // HW 2
	st := leaderState(1, 1, isr, isr, cluster.DefaultLogConfig())
	st.LeaderAndIsr.ZkVersion = 1
	if err := m.ApplyPartitionStates([]PartitionState{st}); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := m.ListOffset(tp0, LatestTimestamp, -1, AskerConsumer); !errors.Is(err, ErrOffsetNotAvailable) {
		t.Fatalf("consumer's latest with HW 2 behind epoch start 5: err %v, want ErrOffsetNotAvailable", err)
	}
	if _, _, _, err := m.ListOffset(tp0, 2003, -1, AskerConsumer); !errors.Is(err, ErrOffsetNotAvailable) {
		t.Fatalf("consumer's timestamp past the HW while lagging: err %v, want ErrOffsetNotAvailable", err)
	}
	if off, _, _, err := m.ListOffset(tp0, 2001, -1, AskerConsumer); err != nil || off != 1 {
		t.Fatalf("consumer's timestamp below the HW while lagging: offset %d (%v), want 1", off, err)
	}
	if off, _, _, err := m.ListOffset(tp0, EarliestTimestamp, -1, AskerConsumer); err != nil || off != 0 {
		t.Fatalf("earliest while lagging: offset %d (%v), want 0", off, err)
	}
	if _, _, _, err := m.ListOffset(tp0, MaxTimestamp, -1, AskerConsumer); !errors.Is(err, ErrOffsetNotAvailable) {
		t.Fatalf("consumer's max timestamp past the HW while lagging: err %v, want ErrOffsetNotAvailable", err)
	}
	// A v0 consumer has no isolation level: the HW, no error.
	if off, _, _, err := m.ListOffset(tp0, LatestTimestamp, -1, AskerLegacyConsumer); err != nil || off != 2 {
		t.Fatalf("v0 consumer's latest while lagging: offset %d (%v), want the HW 2", off, err)
	}
	// Any other replica id is bounded by the LEO.
	if off, _, _, err := m.ListOffset(tp0, LatestTimestamp, -1, AskerReplica); err != nil || off != 5 {
		t.Fatalf("replica's latest while lagging: offset %d (%v), want the LEO 5", off, err)
	}
	if off, ts, _, err := m.ListOffset(tp0, MaxTimestamp, -1, AskerReplica); err != nil || off != 4 || ts != 2004 {
		t.Fatalf("replica's max timestamp: offset %d timestamp %d (%v), want 4 at 2004", off, ts, err)
	}
	follow(5, 1) // the follower has everything: HW 5, the epoch's start
	if off, _, epoch, err := m.ListOffset(tp0, LatestTimestamp, -1, AskerConsumer); err != nil || off != 5 || epoch != 1 {
		t.Fatalf("consumer's latest after the HW caught up: offset %d epoch %d (%v), want 5 epoch 1", off, epoch, err)
	}
	if off, ts, _, err := m.ListOffset(tp0, MaxTimestamp, -1, AskerConsumer); err != nil || off != 4 || ts != 2004 {
		t.Fatalf("consumer's max timestamp after the HW caught up: offset %d timestamp %d (%v), want 4 at 2004", off, ts, err)
	}
}
