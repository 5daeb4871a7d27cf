package partition

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestWaitCommittedAcrossLeaderEpochBump (issue 12 A3): the controller
// removes a dead follower from the ISR, which bumps the leader epoch while
// this broker stays leader. acks=all waits for records appended in the
// old epoch, whether already waiting or called after the change, complete
// once the HW passes them, as Kafka's DelayedProduce does: the records
// were never at risk of truncation, since this broker led throughout.
func TestWaitCommittedAcrossLeaderEpochBump(t *testing.T) {
	m, cfg := newLeaderManager(t, 2, []int32{1, 2, 3}, []int32{1, 2, 3})
	first := mustAppend(t, m, buildBatch(batchSpec{records: 2}), -1)
	second := mustAppend(t, m, buildBatch(batchSpec{records: 1}), -1)
	waiting := make(chan error, 1)
	go func() { waiting <- m.WaitCommitted(context.Background(), tp0, first.LastOffset, first.LeaderEpoch) }()
	r, err := m.get(tp0)
	if err != nil {
		t.Fatal(err)
	}
	waitWaiters(t, r, 1)

	// Broker 3 died: same leader, next epoch, smaller ISR.
	if err := m.ApplyPartitionStates([]PartitionState{leaderState(1, 1, []int32{1, 2, 3}, []int32{1, 2}, cfg)}); err != nil {
		t.Fatal(err)
	}
	late := make(chan error, 1)
	go func() { late <- m.WaitCommitted(context.Background(), tp0, second.LastOffset, second.LeaderEpoch) }()
	select {
	case err := <-waiting:
		t.Fatalf("wait for an epoch-0 append ended at the epoch bump: %v", err)
	case err := <-late:
		t.Fatalf("wait for an epoch-0 append called in epoch 1 ended before the HW passed it: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	followerFetch(t, m, second.LastOffset+1, 1)
	if err := <-waiting; err != nil {
		t.Fatalf("wait registered before the epoch bump: %v, want nil", err)
	}
	if err := <-late; err != nil {
		t.Fatalf("wait called after the epoch bump: %v, want nil", err)
	}
}

// TestWaitCommittedFailsAfterLeadershipLoss: the safety that makes a wait
// fail across a lost leadership (commit 7b59ece) stays: a waiter
// registered in epoch 0 fails when another broker leads epoch 1, and a
// wait for an epoch-0 append called once this broker leads again in
// epoch 2 fails too, although the HW passes the offset, because the
// leader of epoch 1 may have truncated the records.
func TestWaitCommittedFailsAfterLeadershipLoss(t *testing.T) {
	m, cfg := newLeaderManager(t, 1, []int32{1, 2}, []int32{1, 2})
	res := mustAppend(t, m, buildBatch(batchSpec{records: 2}), -1)
	waiting := make(chan error, 1)
	go func() { waiting <- m.WaitCommitted(context.Background(), tp0, res.LastOffset, res.LeaderEpoch) }()
	if err := m.ApplyPartitionStates([]PartitionState{leaderState(2, 1, []int32{1, 2}, []int32{2}, cfg)}); err != nil {
		t.Fatal(err)
	}
	if err := <-waiting; !errors.Is(err, ErrNotLeader) {
		t.Fatalf("waiter across leadership loss: %v, want ErrNotLeader", err)
	}
	if err := m.ApplyPartitionStates([]PartitionState{leaderState(1, 2, []int32{1, 2}, []int32{1, 2}, cfg)}); err != nil {
		t.Fatal(err)
	}
	// Leading epoch 2 with the same epoch-0 records: the HW passes them.
	followerFetch(t, m, res.LastOffset+1, 2)
	if hw := hwOf(t, m); hw <= res.LastOffset {
		t.Fatalf("hw %d, want past %d", hw, res.LastOffset)
	}
	if err := m.WaitCommitted(context.Background(), tp0, res.LastOffset, res.LeaderEpoch); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("wait for an epoch-0 append in epoch 2 after leading elsewhere: %v, want ErrNotLeader", err)
	}
}

// TestWaitersCompleteInOffsetOrder (issue 12 C4): acks=all waiters sit in
// a list ordered by the offset they need, and an HW advance completes
// exactly those it passes: with 1000 waiting, an HW past the first record
// completes one and wakes no other, and appends wake none.
func TestWaitersCompleteInOffsetOrder(t *testing.T) {
	m, cfg := newLeaderManager(t, 1, []int32{1, 2}, []int32{1, 2})
	r, err := m.get(tp0)
	if err != nil {
		t.Fatal(err)
	}
	const n = 1000
	type result struct {
		offset int64
		err    error
	}
	done := make(chan result, n)
	for range n {
		res := mustAppend(t, m, buildBatch(batchSpec{records: 1}), -1)
		go func() {
			done <- result{res.LastOffset, m.WaitCommitted(context.Background(), tp0, res.LastOffset, res.LeaderEpoch)}
		}()
	}
	waiters := func() int {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.waiters)
	}
	waitWaiters(t, r, n)
	r.mu.Lock()
	wakeups := r.waiterWakeups
	r.mu.Unlock()
	if wakeups != 0 {
		t.Fatalf("%d wakeups before the HW moved", wakeups)
	}
	// More appends wake no waiter.
	mustAppend(t, m, buildBatch(batchSpec{records: 1}), 1)
	// The follower has offset 0: the HW moves to 1.
	followerFetch(t, m, 1, 0)
	if got := <-done; got.offset != 0 || got.err != nil {
		t.Fatalf("completed %+v, want the wait for 0 with no error", got)
	}
	r.mu.Lock()
	wakeups, left := r.waiterWakeups, len(r.waiters)
	r.mu.Unlock()
	if wakeups != 1 || left != n-1 {
		t.Fatalf("HW past offset 0: %d wakeups and %d waiters left, want 1 and %d", wakeups, left, n-1)
	}
	// The HW moves to 501: 500 more complete, in offset order.
	followerFetch(t, m, 501, 0)
	seen := map[int64]bool{}
	for range 500 {
		got := <-done
		if got.err != nil || got.offset < 1 || got.offset > 500 || seen[got.offset] {
			t.Fatalf("completed %+v, want each wait for 1..500 once, with no error", got)
		}
		seen[got.offset] = true
	}
	r.mu.Lock()
	wakeups, left = r.waiterWakeups, len(r.waiters)
	r.mu.Unlock()
	if wakeups != 501 || left != n-501 {
		t.Fatalf("HW past offset 500: %d wakeups and %d waiters left, want 501 and %d", wakeups, left, n-501)
	}
	// Losing leadership fails the rest.
	if err := m.ApplyPartitionStates([]PartitionState{leaderState(2, 1, []int32{1, 2}, []int32{2}, cfg)}); err != nil {
		t.Fatal(err)
	}
	for range n - 501 {
		if got := <-done; !errors.Is(got.err, ErrNotLeader) || got.offset <= 500 {
			t.Fatalf("after leadership loss: %+v, want a wait past 500 failing with ErrNotLeader", got)
		}
	}
	if left := waiters(); left != 0 {
		t.Fatalf("%d waiters left after leadership loss", left)
	}
}
