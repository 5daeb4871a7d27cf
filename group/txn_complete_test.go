package group

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
)

// Tests of CompleteTxn's position rule (a marker completes only the
// pending offsets appended below it), of transactional commits carrying
// their verification guard, and of the cache keeping what a failed
// DeleteGroups did not remove from the log. The first four began as a
// reviewer's proofs.

// TestTxnLateCompleteKeepsNextTxnPending: a CompleteTxn that arrives late
// (txn N's WriteTxnMarkers answered after the producer's next transaction
// already wrote its offsets) completes only what is below its marker:
// txn N+1's offset stays pending, and its ABORT then drops it, as a
// reload of the same log finds.
func TestTxnLateCompleteKeepsNextTxnPending(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	log := newFakeLog()
	c := newTestCoordinator(t, log, clock, -1)
	p := c.PartitionFor("g")
	// txn N: offsets, COMMIT marker appended (its CompleteTxn is delayed).
	txnCommit(t, c, txnReq("g", 7, map[cluster.TopicPartition]CommitOffset{tp0: at(10)}))
	res, err := log.Append(c.tp(p), controlBatch(7, 0, true), -1)
	if err != nil {
		t.Fatal(err)
	}
	// txn N+1 of the same producer writes t-1 before the late completion.
	txnCommit(t, c, txnReq("g", 7, map[cluster.TopicPartition]CommitOffset{tp1: at(99)}))
	c.CompleteTxn(p, 7, res.BaseOffset, true) // late completion of txn N
	wantOffsets(t, c, "g", map[cluster.TopicPartition]int64{tp0: 10})
	if !unstable(t, c, "g", tp1) {
		t.Fatal("txn N+1's offset no longer pending after txn N's completion")
	}
	// txn N+1 aborts.
	marker(t, log, c, p, 7, false)

	live := fetch(t, c, "g", false)
	c2 := newTestCoordinator(t, log, clock, -1)
	reloaded := fetch(t, c2, "g", false)
	if _, ok := live[tp1]; ok {
		t.Errorf("live: aborted txn N+1's offset t-1=%d visible; reload has %v", live[tp1].Offset, reloaded)
	}
	wantOffsets(t, c2, "g", map[cluster.TopicPartition]int64{tp0: 10})
	if unstable(t, c, "g", tp1) || unstable(t, c2, "g", tp1) {
		t.Fatal("t-1 still pending after txn N+1's ABORT")
	}
}

// TestTxnLateAbortKeepsNextTxn: a late CompleteTxn(abort) of txn N does
// not drop the pending offsets of the producer's next transaction, which
// then commits: live and reload agree.
func TestTxnLateAbortKeepsNextTxn(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	log := newFakeLog()
	c := newTestCoordinator(t, log, clock, -1)
	p := c.PartitionFor("g")
	txnCommit(t, c, txnReq("g", 7, map[cluster.TopicPartition]CommitOffset{tp0: at(10)}))
	res, err := log.Append(c.tp(p), controlBatch(7, 0, false), -1)
	if err != nil {
		t.Fatal(err)
	}
	txnCommit(t, c, txnReq("g", 7, map[cluster.TopicPartition]CommitOffset{tp1: at(99)}))
	c.CompleteTxn(p, 7, res.BaseOffset, false) // late
	marker(t, log, c, p, 7, true)
	live := fetch(t, c, "g", false)
	c2 := newTestCoordinator(t, log, clock, -1)
	reloaded := fetch(t, c2, "g", false)
	if live[tp1].Offset != 99 || live[tp1].Offset != reloaded[tp1].Offset {
		t.Errorf("committed txn N+1 offset: live %v, reload %v", live, reloaded)
	}
	if _, ok := live[tp0]; ok {
		t.Errorf("aborted txn N's offset visible: %v", live)
	}
}

// TestTxnCompletionRepeatedOrDuringLoad: the same marker completed twice
// (a marker the load read and also got as a deferred CompleteTxn, or a
// retried WriteTxnMarkers) changes nothing the second time, and a
// deferred completion applies to what is below its marker only.
func TestTxnCompletionRepeatedOrDuringLoad(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	log := newFakeLog()
	c := newTestCoordinator(t, log, clock, -1)
	p := c.PartitionFor("g")
	txnCommit(t, c, txnReq("g", 7, map[cluster.TopicPartition]CommitOffset{tp0: at(10)}))
	abortAt := marker(t, log, c, p, 7, false)
	txnCommit(t, c, txnReq("g", 7, map[cluster.TopicPartition]CommitOffset{tp1: at(20)}))

	// Reload, holding the load back: the ABORT (read by the load) is
	// also completed while loading, then txn N+1's COMMIT, appended past
	// the load's end.
	c.OnBecomeFollower(p)
	log.setHold(true)
	log.mu.Lock()
	calls := log.leoCalls
	log.mu.Unlock()
	c.OnBecomeLeader(p, 2)
	waitFor(t, func() bool { log.mu.Lock(); defer log.mu.Unlock(); return log.leoCalls > calls })
	c.CompleteTxn(p, 7, abortAt, false)
	res, err := log.Append(c.tp(p), controlBatch(7, 0, true), -1)
	if err != nil {
		t.Fatal(err)
	}
	c.CompleteTxn(p, 7, res.BaseOffset, true)
	c.CompleteTxn(p, 7, abortAt, false) // a retried, late abort of txn N
	log.setHold(false)
	waitLoaded(t, c)
	wantOffsets(t, c, "g", map[cluster.TopicPartition]int64{tp1: 20})
	if unstable(t, c, "g", tp1) {
		t.Fatal("t-1 pending after its COMMIT was applied")
	}
	c.CompleteTxn(p, 7, abortAt, false) // once more, live
	wantOffsets(t, c, "g", map[cluster.TopicPartition]int64{tp1: 20})
	c.mu.Lock()
	n := len(c.parts[p].txnGroups)
	c.mu.Unlock()
	if n != 0 {
		t.Fatalf("txnGroups holds %d producers after every transaction ended", n)
	}
}

// TestTxnDeferredCompletionsBounded: beyond maxDeferredCompletions while
// a partition loads, the oldest completion is dropped, not the newest.
func TestTxnDeferredCompletionsBounded(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	log := newFakeLog()
	c := newTestCoordinator(t, log, clock, -1)
	p := c.PartitionFor("g")
	c.OnBecomeFollower(p)
	log.setHold(true)
	if _, err := log.Append(c.tp(p), buildBatch([]kv{{offsetKey("other", "t", 0), offsetValue(committed(at(1), -1, clock.Now()))}}, clock.Now()), -1); err != nil {
		t.Fatal(err)
	}
	c.OnBecomeLeader(p, 2)
	for i := 0; i < maxDeferredCompletions+2; i++ {
		c.CompleteTxn(p, int64(i), int64(100+i), true)
	}
	c.mu.Lock()
	d := c.parts[p].deferred
	n, first, last := len(d), d[0], d[len(d)-1]
	c.mu.Unlock()
	if n != maxDeferredCompletions || first.producerID != 2 || last.producerID != maxDeferredCompletions+1 {
		t.Fatalf("deferred: %d, first %+v, last %+v", n, first, last)
	}
	log.setHold(false)
	waitLoaded(t, c)
}

// TestTxnGroupsUntrackedWhenOffsetsGo: a partition's txnGroups entry for
// a producer goes when the group's pending offsets of it go (completed,
// failed write, tombstoned by DeleteOffsets or DeleteGroups), and stays
// while the group holds some.
func TestTxnGroupsUntrackedWhenOffsetsGo(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	log := newFakeLog()
	c := newTestCoordinator(t, log, clock, -1)
	p := c.PartitionFor("g")
	tracked := func(pid int64) bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		_, ok := c.parts[p].txnGroups[pid]["g"]
		return ok
	}
	txnCommit(t, c, txnReq("g", 1, map[cluster.TopicPartition]CommitOffset{tp0: at(1), tp1: at(1)}))
	txnCommit(t, c, txnReq("g", 2, map[cluster.TopicPartition]CommitOffset{tp2: at(2)}))
	txnCommit(t, c, txnReq("g", 3, map[cluster.TopicPartition]CommitOffset{tp3: at(3)}))

	// DeleteOffsets of t-0 leaves producer 1 with t-1: still tracked.
	if _, err := c.DeleteOffsets(context.Background(), "g", []cluster.TopicPartition{tp0}); err != nil {
		t.Fatal(err)
	}
	if !tracked(1) {
		t.Fatal("producer 1 untracked while g holds its t-1")
	}
	if _, err := c.DeleteOffsets(context.Background(), "g", []cluster.TopicPartition{tp1}); err != nil {
		t.Fatal(err)
	}
	if tracked(1) {
		t.Fatal("producer 1 still tracked after DeleteOffsets dropped its offsets")
	}
	marker(t, log, c, p, 2, true)
	if tracked(2) {
		t.Fatal("producer 2 still tracked after its COMMIT")
	}

	// A failed write of producer 4 untracks it (nothing else pending).
	log.mu.Lock()
	log.waitErr = partition.ErrNotEnoughReplicasAfterAppend
	log.mu.Unlock()
	if _, err := c.CommitTxnOffsets(context.Background(), txnReq("g", 4, map[cluster.TopicPartition]CommitOffset{tp4: at(4)})); err != nil {
		t.Fatal(err)
	}
	log.mu.Lock()
	log.waitErr = nil
	log.mu.Unlock()
	if tracked(4) {
		t.Fatal("producer 4 still tracked after its write failed")
	}

	if errs := c.DeleteGroups(context.Background(), []string{"g"}); errs["g"] != nil {
		t.Fatal(errs["g"])
	}
	if tracked(3) {
		t.Fatal("producer 3 still tracked after DeleteGroups")
	}
}

// TestTxnDeleteGroupsFailedAppendKeepsGroup: a DeleteGroups whose
// tombstone append fails keeps the group and its pending transactional
// offsets in the cache, as the log still has them: the producer's COMMIT
// then makes them visible live, as a reload shows.
func TestTxnDeleteGroupsFailedAppendKeepsGroup(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	log := newFakeLog()
	c := newTestCoordinator(t, log, clock, -1)
	p := c.PartitionFor("g")
	commit(t, c, CommitRequest{Group: "g", Generation: -1, Retention: -1, Offsets: map[cluster.TopicPartition]CommitOffset{tp1: at(3)}})
	txnCommit(t, c, txnReq("g", 7, map[cluster.TopicPartition]CommitOffset{tp0: at(10)}))
	log.mu.Lock()
	log.failErr = partition.ErrNotEnoughReplicas
	log.mu.Unlock()
	errs := c.DeleteGroups(context.Background(), []string{"g"})
	log.mu.Lock()
	log.failErr = nil
	log.mu.Unlock()
	if !errors.Is(errs["g"], ErrCoordinatorNotAvailable) {
		t.Fatalf("delete with a failing append: %v, want COORDINATOR_NOT_AVAILABLE", errs["g"])
	}
	if d, err := c.DescribeGroup("g"); err != nil || d.State != "Empty" {
		t.Fatalf("group after the failed delete: %+v %v", d, err)
	}
	if !unstable(t, c, "g", tp0) {
		t.Fatal("pending offset gone after the failed delete")
	}
	marker(t, log, c, p, 7, true)
	live := fetch(t, c, "g", false)
	c2 := newTestCoordinator(t, log, clock, -1)
	reloaded := fetch(t, c2, "g", false)
	if len(live) != 2 || len(live) != len(reloaded) || live[tp0].Offset != 10 || reloaded[tp0].Offset != 10 {
		t.Errorf("after failed DeleteGroups and COMMIT: live %v, reload %v", live, reloaded)
	}
	// And the delete works once the log does.
	if errs := c.DeleteGroups(context.Background(), []string{"g"}); errs["g"] != nil {
		t.Fatal(errs["g"])
	}
	c3 := newTestCoordinator(t, log, clock, -1)
	if offs := fetch(t, c3, "g", false); len(offs) != 0 {
		t.Fatalf("offsets after the delete: %v", offs)
	}
}

// verifyingLog is fakeLog with KIP-890's rule for transactional appends
// through AppendWith, as Kafka's UnifiedLog applies it to client and
// coordinator writes: a transactional batch of a producer with no ongoing
// transaction needs the guard handed out for it; any batch of the
// producer that starts a transaction, and a marker, clears the guard.
type verifyingLog struct {
	*fakeLog
	ongoing   map[int64]bool
	guards    map[int64]uint64
	nextGuard uint64
}

func newVerifyingLog() *verifyingLog {
	return &verifyingLog{fakeLog: newFakeLog(), ongoing: map[int64]bool{}, guards: map[int64]uint64{}}
}

// guard is TxnVerificationGuard for producerID (on every partition).
func (v *verifyingLog) guard(producerID int64) uint64 {
	v.fakeLog.mu.Lock()
	defer v.fakeLog.mu.Unlock()
	v.nextGuard++
	v.guards[producerID] = v.nextGuard
	return v.nextGuard
}

func (v *verifyingLog) Append(tp cluster.TopicPartition, records []byte, acks int16) (partition.AppendResult, error) {
	if attrs := binary.BigEndian.Uint16(records[21:23]); attrs&uint16(attrControl) != 0 {
		pid := int64(binary.BigEndian.Uint64(records[43:51]))
		v.fakeLog.mu.Lock()
		delete(v.ongoing, pid)
		delete(v.guards, pid)
		v.fakeLog.mu.Unlock()
	}
	return v.fakeLog.Append(tp, records, acks)
}

func (v *verifyingLog) AppendWith(tp cluster.TopicPartition, records []byte, opts partition.AppendOptions) (partition.AppendResult, error) {
	pid := int64(binary.BigEndian.Uint64(records[43:51]))
	v.fakeLog.mu.Lock()
	v.fakeLog.opts = append(v.fakeLog.opts, opts)
	if binary.BigEndian.Uint16(records[21:23])&uint16(attrTransactional) != 0 && !v.ongoing[pid] {
		if g := v.guards[pid]; g == 0 || g != opts.VerificationGuard {
			v.fakeLog.mu.Unlock()
			return partition.AppendResult{}, fmt.Errorf("append to %s: %w", tp, partition.ErrInvalidTxnState)
		}
		v.ongoing[pid] = true
		delete(v.guards, pid)
	}
	v.fakeLog.mu.Unlock()
	return v.fakeLog.Append(tp, records, opts.Acks)
}

// TestTxnCommitCarriesGuard: a TxnOffsetCommit whose transaction ended
// while its verification was in flight (a delayed request of an aborted
// transaction) carries a guard the marker cleared: the log refuses it
// with INVALID_TXN_STATE, which is answered as it is (Kafka's
// maybeConvertOffsetCommitError), nothing stays pending, and the
// producer's next COMMIT does not make the stale offset visible. A
// request with the current guard is appended with it.
func TestTxnCommitCarriesGuard(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	log := newVerifyingLog()
	cfg := testCoordinatorConfig(t, log.fakeLog, clock, -1)
	cfg.Log = log
	c := startTestCoordinator(t, cfg)
	p := c.PartitionFor("g")
	commit(t, c, CommitRequest{Group: "g", Generation: -1, Retention: -1, Offsets: map[cluster.TopicPartition]CommitOffset{tp0: at(1)}})

	stale := log.guard(7)                                          // txn N's delayed request was verified...
	res, err := log.Append(c.tp(p), controlBatch(7, 0, false), -1) // ...then txn N aborted
	if err != nil {
		t.Fatal(err)
	}
	c.CompleteTxn(p, 7, res.BaseOffset, false)
	req := txnReq("g", 7, map[cluster.TopicPartition]CommitOffset{tp0: at(50)})
	req.VerificationGuard = stale
	before := log.end(p)
	errs, err := c.CommitTxnOffsets(context.Background(), req)
	if err != nil || !errors.Is(errs[tp0], partition.ErrInvalidTxnState) {
		t.Fatalf("stale guard: %v %v, want INVALID_TXN_STATE", errs, err)
	}
	if log.end(p) != before || unstable(t, c, "g", tp0) {
		t.Fatal("refused commit appended or pending")
	}
	marker(t, log.fakeLog, c, p, 7, true) // txn N+1 commits, no offsets of t-0
	wantOffsets(t, c, "g", map[cluster.TopicPartition]int64{tp0: 1})

	req.VerificationGuard = log.guard(7)
	txnCommit(t, c, req)
	log.fakeLog.mu.Lock()
	last := log.fakeLog.opts[len(log.fakeLog.opts)-1]
	log.fakeLog.mu.Unlock()
	if last != (partition.AppendOptions{Acks: -1, Origin: partition.OriginCoordinator, VerificationGuard: req.VerificationGuard}) {
		t.Fatalf("append options %+v", last)
	}
	if !unstable(t, c, "g", tp0) {
		t.Fatal("verified commit not pending")
	}
}
