package txn

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
)

// TestFailedEpochFenceNotBumpedTwice: an epoch fence whose write fails
// keeps the old producer fenced (the in-memory epoch is bumped, as
// Kafka's), and the next fence reuses that epoch instead of bumping again
// (Kafka's hasFailedEpochFence).
func TestFailedEpochFenceNotBumpedTwice(t *testing.T) {
	for _, via := range []string{"timeout", "init"} {
		t.Run(via, func(t *testing.T) {
			h := newHarness(t)
			pid, e0 := h.init("t1", 1000)
			h.add("t1", pid, e0, tp("out", 0))
			h.log.mu.Lock()
			h.log.fail = func(op string, n int) error {
				if op == "append" {
					return partition.ErrNotEnoughReplicas
				}
				return nil
			}
			h.log.mu.Unlock()
			fence := func() error {
				if via == "timeout" {
					h.clock.Advance(11 * time.Second)
					h.c.Tick()
					return nil
				}
				_, _, err := h.c.InitProducerID(bg, InitRequest{TransactionalID: "t1", TransactionTimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1})
				return err
			}
			if err := fence(); via == "init" && !errors.Is(err, ErrCoordinatorNotAvailable) {
				t.Fatalf("failed fence answered %v", err)
			}
			d := h.wantState("t1", "Ongoing")
			if d.ProducerEpoch != e0+1 {
				t.Fatalf("epoch after a failed fence: %d", d.ProducerEpoch)
			}
			if err := h.c.EndTxn(bg, "t1", pid, e0, true); !errors.Is(err, ErrProducerFenced) {
				t.Fatalf("old producer after a failed fence: %v", err)
			}
			if got := h.states("t1"); len(got) != 2 {
				t.Fatalf("failed fence wrote %v", got)
			}
			if err := fence(); via == "init" && !errors.Is(err, ErrCoordinatorNotAvailable) {
				t.Fatalf("second failed fence answered %v", err)
			}
			if d := h.describe("t1"); d.ProducerEpoch != e0+1 {
				t.Fatalf("epoch bumped again by a second failed fence: %d", d.ProducerEpoch)
			}
			h.log.mu.Lock()
			h.log.fail = nil
			h.log.mu.Unlock()
			if err := fence(); via == "init" && !errors.Is(err, ErrConcurrentTransactions) {
				t.Fatalf("fence answered %v", err)
			}
			h.idle()
			if d := h.wantState("t1", "CompleteAbort"); d.ProducerEpoch != e0+1 {
				t.Fatalf("aborted at epoch %d, want %d", d.ProducerEpoch, e0+1)
			}
			recs := h.records("t1")
			if v := recs[len(recs)-2].value; v.State != 3 || v.ProducerEpoch != e0+1 {
				t.Fatalf("PrepareAbort %+v", v)
			}
		})
	}
}

// TestFailedFenceAtMaxEpochRetried: a fence from epoch 32766 whose write
// fails leaves the in-memory epoch at 32767 (MaxInt16) with the failed
// fence noted. The next fence must reuse 32767 rather than refuse to
// overflow, else the transaction can never be aborted (every timeout pass
// and InitProducerId failing with an illegal transition until a reload).
// Once aborted, the exhausted epoch rotates the producer id.
func TestFailedFenceAtMaxEpochRetried(t *testing.T) {
	for _, via := range []string{"timeout", "init"} {
		t.Run(via, func(t *testing.T) {
			log := newFakeLog()
			clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
			now := clock.Now().UnixMilli()
			loadState(t, log, "t1", transit{producerID: 9, producerEpoch: math.MaxInt16 - 1, timeoutMs: 1000, state: stateOngoing,
				partitions: []cluster.TopicPartition{tp("out", 0)}, startTs: now, updateTs: now})
			h := newHarnessOn(t, log, clock)
			h.lead(testLeaderEpoch)
			fence := func() error {
				if via == "timeout" {
					h.clock.Advance(11 * time.Second)
					h.c.Tick()
					return nil
				}
				_, _, err := h.c.InitProducerID(bg, InitRequest{TransactionalID: "t1", TransactionTimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1})
				return err
			}
			h.log.mu.Lock()
			h.log.fail = func(op string, n int) error {
				if op == "append" {
					return partition.ErrNotEnoughReplicas
				}
				return nil
			}
			h.log.mu.Unlock()
			if err := fence(); via == "init" && !errors.Is(err, ErrCoordinatorNotAvailable) {
				t.Fatalf("failed fence answered %v", err)
			}
			if d := h.wantState("t1", "Ongoing"); d.ProducerEpoch != math.MaxInt16 {
				t.Fatalf("epoch after the failed fence: %d", d.ProducerEpoch)
			}
			h.log.mu.Lock()
			h.log.fail = nil
			h.log.mu.Unlock()
			if err := fence(); via == "init" && !errors.Is(err, ErrConcurrentTransactions) {
				t.Fatalf("retried fence answered %v (illegal transition: %v)", err, errors.Is(err, errIllegalTransition))
			}
			h.idle()
			if d := h.wantState("t1", "CompleteAbort"); d.ProducerEpoch != math.MaxInt16 || d.ProducerID != 9 {
				t.Fatalf("aborted as %d/%d", d.ProducerID, d.ProducerEpoch)
			}
			recs := h.records("t1")
			if v := recs[len(recs)-2].value; v.State != 3 || v.ProducerEpoch != math.MaxInt16 {
				t.Fatalf("PrepareAbort %+v", v)
			}
			if calls := h.markers.Calls(); len(calls) != 1 || calls[0].Commit || calls[0].ProducerEpoch != math.MaxInt16 {
				t.Fatalf("markers %+v", calls)
			}
			pid, e, err := h.c.InitProducerID(bg, InitRequest{TransactionalID: "t1", TransactionTimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1})
			if err != nil || pid == 9 || e != 0 {
				t.Fatalf("init after the abort: %d/%d %v, want a new producer id at epoch 0", pid, e, err)
			}
		})
	}
}

// TestTimeoutSkipsPendingTransition: a timed-out transaction whose
// transition is being written is not aborted (Kafka's
// shouldNotAbortExpiredTransactionsThatHaveAPendingStateTransition).
func TestTimeoutSkipsPendingTransition(t *testing.T) {
	h := newHarness(t)
	pid, e := h.init("t1", 1000)
	h.add("t1", pid, e, tp("out", 0))
	h.log.mu.Lock()
	h.log.block = true
	h.log.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- h.c.EndTxn(bg, "t1", pid, e, true) }()
	<-h.log.waiting
	h.clock.Advance(time.Minute)
	h.c.Tick()
	if got := h.states("t1"); len(got) != 3 || got[2] != "PrepareCommit" {
		t.Fatalf("log %v", got)
	}
	h.log.mu.Lock()
	h.log.block = false
	h.log.mu.Unlock()
	h.log.release <- struct{}{}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	h.idle()
	if d := h.wantState("t1", "CompleteCommit"); d.ProducerEpoch != e {
		t.Fatalf("epoch %d", d.ProducerEpoch)
	}
}

// TestWriteErrorMapping follows Kafka's appendTransactionToLog error
// mapping, for a failed append and a failed wait.
func TestWriteErrorMapping(t *testing.T) {
	cases := []struct {
		err  error
		want error // nil: neither coordinator error (UNKNOWN_SERVER_ERROR)
	}{
		{partition.ErrUnknownTopicOrPartition, ErrCoordinatorNotAvailable},
		{partition.ErrNotEnoughReplicas, ErrCoordinatorNotAvailable},
		{partition.ErrNotEnoughReplicasAfterAppend, ErrCoordinatorNotAvailable},
		{partition.ErrRequestTimedOut, ErrCoordinatorNotAvailable},
		{context.DeadlineExceeded, ErrCoordinatorNotAvailable},
		{partition.ErrNotLeader, ErrNotCoordinator},
		{partition.ErrStorage, ErrNotCoordinator},
		{partition.ErrFencedLeaderEpoch, ErrNotCoordinator},
		{partition.ErrMessageTooLarge, nil},
		{partition.ErrRecordListTooLarge, nil},
	}
	for _, op := range []string{"append", "wait"} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s/%v", op, tc.err), func(t *testing.T) {
				h := newHarness(t)
				pid, e := h.init("t1", 60000)
				h.log.mu.Lock()
				h.log.fail = func(o string, n int) error {
					if o == op {
						return tc.err
					}
					return nil
				}
				h.log.mu.Unlock()
				_, err := h.c.AddPartitions(bg, "t1", pid, e, []cluster.TopicPartition{tp("out", 0)})
				if !errors.Is(err, tc.err) {
					t.Fatalf("cause lost: %v", err)
				}
				coord := errors.Is(err, ErrCoordinatorNotAvailable) || errors.Is(err, ErrNotCoordinator)
				if tc.want == nil && coord || tc.want != nil && !errors.Is(err, tc.want) {
					t.Fatalf("%v mapped to %v, want %v", tc.err, err, tc.want)
				}
				h.wantState("t1", "Empty")
			})
		}
	}
}

// TestLoadRetriesCorruptBatch: a batch that fails its CRC is never
// skipped: the load retries it (backing off) and the partition stays
// loading until it reads.
func TestLoadRetriesCorruptBatch(t *testing.T) {
	corrupt := map[string]func(b []byte){
		// A flipped bit near the end fails the CRC.
		"crc": func(b []byte) { b[len(b)-2] ^= 0xff },
		// A batch length shorter than a v2 header is corrupt, not a
		// partial tail: taken for one, the load ended before the batch
		// and lost its records.
		"length": func(b []byte) { binary.BigEndian.PutUint32(b[8:12], 20) },
	}
	for name, spoil := range corrupt {
		t.Run(name, func(t *testing.T) {
			log := newFakeLog()
			clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
			p := PartitionFor("a", testPartitions)
			now := clock.Now().UnixMilli()
			loadState(t, log, "a", transit{producerID: 1, producerEpoch: 0, timeoutMs: 1000, state: stateEmpty, startTs: -1, updateTs: now})
			loadState(t, log, "a", transit{producerID: 1, producerEpoch: 4, timeoutMs: 1000, state: stateEmpty, startTs: -1, updateTs: now})
			good := append([]byte(nil), log.batches[p][1]...)
			spoil(log.batches[p][1])
			h := newHarnessOn(t, log, clock)
			var backoffs []time.Duration
			h.c.sleep = func(ctx context.Context, d time.Duration) bool {
				backoffs = append(backoffs, d)
				if len(backoffs) == 3 {
					// Still loading while the batch is unreadable.
					if d := h.describe("a"); !errors.Is(d.Err, ErrCoordinatorLoadInProgress) {
						t.Errorf("during a failing load: %+v", d)
					}
					log.mu.Lock()
					log.batches[p][1] = good
					log.mu.Unlock()
				}
				return true
			}
			h.c.OnBecomeLeader(p, 1)
			<-h.loaded
			if d := h.wantState("a", "Empty"); d.ProducerEpoch != 4 {
				t.Fatalf("loaded epoch %d", d.ProducerEpoch)
			}
			if len(backoffs) != 3 || backoffs[0] != 100*time.Millisecond || backoffs[1] != 200*time.Millisecond || backoffs[2] != 400*time.Millisecond {
				t.Fatalf("backoffs %v", backoffs)
			}
		})
	}
}

// TestAddPartitionsWhileCompleting: while a transaction's markers are out,
// AddPartitions answers CONCURRENT_TRANSACTIONS.
func TestAddPartitionsWhileCompleting(t *testing.T) {
	h := newHarness(t)
	pid, e := h.init("t1", 60000)
	h.add("t1", pid, e, tp("out", 0))
	h.markers.mu.Lock()
	h.markers.block = true
	h.markers.mu.Unlock()
	if err := h.c.EndTxn(bg, "t1", pid, e, false); err != nil {
		t.Fatal(err)
	}
	<-h.markers.waiting
	if _, err := h.c.AddPartitions(bg, "t1", pid, e, []cluster.TopicPartition{tp("out", 1)}); !errors.Is(err, ErrConcurrentTransactions) {
		t.Fatalf("add during abort markers: %v", err)
	}
	if err := h.c.AddOffsets(bg, "t1", pid, e, "g"); !errors.Is(err, ErrConcurrentTransactions) {
		t.Fatalf("add offsets during abort markers: %v", err)
	}
	if d := h.wantState("t1", "PrepareAbort"); len(d.Partitions) != 1 {
		t.Fatalf("describe during markers %+v", d)
	}
	h.markers.release <- struct{}{}
	h.idle()
	h.wantState("t1", "CompleteAbort")
	h.add("t1", pid, e, tp("out", 1))
}
