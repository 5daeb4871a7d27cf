package partition

import (
	"errors"
	"testing"
	"time"

	"github.com/kafkazk/broker/cluster"
)

// TestRetryAfterRestartAndDeposedLeader is the broker side of the soak's
// seed-23 duplicates (p0: k0-0-00001560 at 783 under producer epoch 0
// sequence 260, again at 786 under epoch 1 sequence 0). The leader that
// appended the batch above the HW and restarted still knows its sequence:
// a retry under the same producer id and epoch is answered with the
// original offset, not appended. A deposed leader, not yet told, whose own
// log has the producer only up to an older sequence answers the same batch
// OUT_OF_ORDER_SEQUENCE_NUMBER, as Kafka's ProducerAppendInfo does. The
// producer's answer to that (kgo, and Kafka's TransactionManager for an
// idempotent producer) is an epoch bump and a resend from sequence 0,
// which the real leader must append as a new batch: deduplication is per
// producer id and epoch, and a new epoch's first batch starts fresh.
func TestRetryAfterRestartAndDeposedLeader(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	const pid = 7
	batch := func(epoch int16, seq int32) []byte {
		return buildBatch(batchSpec{records: 1, producerID: pid, producerEpoch: epoch, baseSequence: seq})
	}
	cfg := cluster.DefaultLogConfig()

	// The real leader (broker 3) in epoch 1 with a follower that never
	// fetches: acks=1 appends stay above the HW, as 781..785 did.
	dir := t.TempDir()
	st1 := leaderState(3, 1, []int32{3, 2}, []int32{3, 2}, cfg)
	real := newTestManager(t, 3, dir, clock)
	if err := real.ApplyPartitionStates([]PartitionState{st1}); err != nil {
		t.Fatal(err)
	}
	for seq := int32(0); seq <= 260; seq++ {
		mustAppend(t, real, batch(0, seq), 1)
	}
	if err := real.Close(); err != nil {
		t.Fatal(err)
	}
	real = newTestManager(t, 3, dir, clock)
	if err := real.ApplyPartitionStates([]PartitionState{st1, leaderState(3, 2, []int32{3, 2}, []int32{3}, cfg)}); err != nil {
		t.Fatal(err)
	}
	if res := mustAppend(t, real, batch(0, 260), 1); res.BaseOffset != 260 {
		t.Fatalf("retry of sequence 260 after the restart answered offset %d, want the original 260", res.BaseOffset)
	}

	// The deposed leader (broker 1) still leads epoch 0 with the producer
	// at sequence 199.
	dep := newTestManager(t, 1, t.TempDir(), clock)
	if err := dep.ApplyPartitionStates([]PartitionState{leaderState(1, 0, []int32{1, 3, 2}, []int32{1, 3, 2}, cfg)}); err != nil {
		t.Fatal(err)
	}
	for seq := int32(0); seq <= 199; seq++ {
		mustAppend(t, dep, batch(0, seq), 1)
	}
	if _, err := dep.Append(tp0, batch(0, 260), 1); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("deposed leader answered sequence 260 with %v, want ErrOutOfOrderSequence", err)
	}

	// The producer bumps its epoch and resends the record from sequence
	// 0: a new batch to the real leader.
	res := mustAppend(t, real, batch(1, 0), 1)
	if res.BaseOffset != 261 {
		t.Fatalf("epoch 1 sequence 0 appended at %d, want 261 (a new batch)", res.BaseOffset)
	}
	if res := mustAppend(t, real, batch(1, 0), 1); res.BaseOffset != 261 {
		t.Fatalf("retry of epoch 1 sequence 0 answered %d, want 261", res.BaseOffset)
	}
}
