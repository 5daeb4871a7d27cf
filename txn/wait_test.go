package txn

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/kafkazk/broker/cluster"
)

// waiting reports whether a request waits for id's pending transition
// (awaitSettledLocked registered its channel).
func (h *harness) waiting(id string) bool {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	ps := h.c.parts[h.c.PartitionFor(id)]
	return ps != nil && ps.txns[id] != nil && ps.txns[id].settled != nil
}

// untilWaiting yields until a request waits for id's pending transition.
func (h *harness) untilWaiting(id string) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !h.waiting(id) {
		if time.Now().After(deadline) {
			h.t.Fatalf("no request waits for %q", id)
		}
		runtime.Gosched()
	}
}

// commitWithMarkersBlocked commits id's transaction with the markers
// blocked, so it stays PrepareCommit with its completion pending.
func (h *harness) commitWithMarkersBlocked(id string, pid int64, e int16) {
	h.t.Helper()
	h.markers.mu.Lock()
	h.markers.block = true
	h.markers.mu.Unlock()
	if err := h.c.EndTxn(bg, id, pid, e, true); err != nil {
		h.t.Fatal(err)
	}
	<-h.markers.waiting
	h.wantState(id, "PrepareCommit")
}

// TestAddPartitionsWaitsForCompletion: an AddPartitions for the next
// transaction that arrives while the previous one's markers are out waits
// for the CompleteCommit instead of answering CONCURRENT_TRANSACTIONS, and
// then starts the new transaction after it in the log.
func TestAddPartitionsWaitsForCompletion(t *testing.T) {
	h := newHarness(t)
	h.c.completionWait = time.Hour
	pid, e := h.init("t1", 60000)
	h.add("t1", pid, e, tp("out", 0))
	h.commitWithMarkersBlocked("t1", pid, e)
	done := make(chan error, 1)
	go func() {
		_, err := h.c.AddPartitions(bg, "t1", pid, e, []cluster.TopicPartition{tp("out", 1)})
		done <- err
	}()
	h.untilWaiting("t1")
	select {
	case err := <-done:
		t.Fatalf("AddPartitions answered during the markers: %v", err)
	default:
	}
	h.markers.release <- struct{}{}
	if err := <-done; err != nil {
		t.Fatalf("AddPartitions after the completion: %v", err)
	}
	d := h.wantState("t1", "Ongoing")
	if len(d.Partitions) != 1 || d.Partitions[0] != tp("out", 1) {
		t.Fatalf("partitions %v, want only out-1", d.Partitions)
	}
	states := h.states("t1")
	if n := len(states); n < 2 || states[n-2] != "CompleteCommit" || states[n-1] != "Ongoing" {
		t.Fatalf("states in the log %v: want CompleteCommit then Ongoing last", states)
	}
}

// TestAddOffsetsWaitsForCompletion: AddOffsets goes the same way.
func TestAddOffsetsWaitsForCompletion(t *testing.T) {
	h := newHarness(t)
	h.c.completionWait = time.Hour
	pid, e := h.init("t1", 60000)
	h.add("t1", pid, e, tp("out", 0))
	h.commitWithMarkersBlocked("t1", pid, e)
	done := make(chan error, 1)
	go func() { done <- h.c.AddOffsets(bg, "t1", pid, e, "g") }()
	h.untilWaiting("t1")
	h.markers.release <- struct{}{}
	if err := <-done; err != nil {
		t.Fatalf("AddOffsets after the completion: %v", err)
	}
	h.wantState("t1", "Ongoing")
}

// TestAddPartitionsWaitIsBounded: a completion that does not end within
// completionWait, or the request's context ending, still answers
// CONCURRENT_TRANSACTIONS, leaving the transaction as it was.
func TestAddPartitionsWaitIsBounded(t *testing.T) {
	h := newHarness(t)
	pid, e := h.init("t1", 60000)
	h.add("t1", pid, e, tp("out", 0))
	h.commitWithMarkersBlocked("t1", pid, e)

	h.c.mu.Lock()
	h.c.completionWait = time.Millisecond
	h.c.mu.Unlock()
	if _, err := h.c.AddPartitions(bg, "t1", pid, e, []cluster.TopicPartition{tp("out", 1)}); !errors.Is(err, ErrConcurrentTransactions) {
		t.Fatalf("add after a bounded wait: %v, want CONCURRENT_TRANSACTIONS", err)
	}

	h.c.mu.Lock()
	h.c.completionWait = time.Hour
	h.c.mu.Unlock()
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() {
		_, err := h.c.AddPartitions(ctx, "t1", pid, e, []cluster.TopicPartition{tp("out", 1)})
		done <- err
	}()
	h.untilWaiting("t1")
	cancel()
	if err := <-done; !errors.Is(err, ErrConcurrentTransactions) {
		t.Fatalf("add with its context cancelled: %v, want CONCURRENT_TRANSACTIONS", err)
	}
	h.wantState("t1", "PrepareCommit")

	h.markers.release <- struct{}{}
	h.idle()
	h.wantState("t1", "CompleteCommit")
}

// TestAddPartitionsWaitRechecks: what ends the wait is decided again: an
// unloaded partition answers NOT_COORDINATOR, not a stale success.
func TestAddPartitionsWaitRechecks(t *testing.T) {
	h := newHarness(t)
	h.c.completionWait = time.Hour
	pid, e := h.init("t1", 60000)
	h.add("t1", pid, e, tp("out", 0))
	h.commitWithMarkersBlocked("t1", pid, e)
	done := make(chan error, 1)
	go func() {
		_, err := h.c.AddPartitions(bg, "t1", pid, e, []cluster.TopicPartition{tp("out", 1)})
		done <- err
	}()
	h.untilWaiting("t1")
	h.c.OnBecomeFollower(h.c.PartitionFor("t1"))
	if err := <-done; !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("add after the partition was unloaded: %v, want NOT_COORDINATOR", err)
	}
}
