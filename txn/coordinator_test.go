package txn

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
)

var bg = context.Background()

func TestInitProducerIDNewAndBump(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.init("t1", 60000)
	if pid != 1000 || epoch != 0 {
		t.Fatalf("first init: %d/%d", pid, epoch)
	}
	recs := h.records("t1")
	if len(recs) != 1 || !recs[0].committed {
		t.Fatalf("records %+v", recs)
	}
	v := recs[0].value
	if v.ProducerID != 1000 || v.ProducerEpoch != 0 || v.TimeoutMillis != 60000 || v.State != 0 || v.Topics != nil || v.StartTimestamp != -1 {
		t.Fatalf("value %+v", v)
	}
	pid2, epoch2 := h.init("t1", 30000)
	if pid2 != pid || epoch2 != 1 {
		t.Fatalf("second init: %d/%d", pid2, epoch2)
	}
	if d := h.wantState("t1", "Empty"); d.TimeoutMs != 30000 || d.ProducerEpoch != 1 {
		t.Fatalf("describe %+v", d)
	}
	if h.pids.n != 1 {
		t.Fatalf("allocated %d producer ids", h.pids.n)
	}
}

func TestInitProducerIDValidation(t *testing.T) {
	h := newHarness(t)
	for _, ms := range []int32{0, -1, int32((15*time.Minute)/time.Millisecond) + 1} {
		_, _, err := h.c.InitProducerID(bg, InitRequest{TransactionalID: "t", TransactionTimeoutMs: ms, ProducerID: -1, ProducerEpoch: -1})
		if !errors.Is(err, ErrInvalidTransactionTimeout) {
			t.Errorf("timeout %d: %v", ms, err)
		}
	}
	if _, _, err := h.c.InitProducerID(bg, InitRequest{TransactionalID: "t", TransactionTimeoutMs: int32((15 * time.Minute) / time.Millisecond), ProducerID: -1, ProducerEpoch: -1}); err != nil {
		t.Errorf("max timeout: %v", err)
	}
	if _, _, err := h.c.InitProducerID(bg, InitRequest{TransactionalID: "", TransactionTimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1}); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("empty id: %v", err)
	}
	if _, _, err := h.c.InitProducerID(bg, InitRequest{TransactionalID: "t", TransactionTimeoutMs: 1000, ProducerID: 5, ProducerEpoch: -1}); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("half a producer id/epoch: %v", err)
	}
	h.pids.err = errors.New("zk down")
	if _, _, err := h.c.InitProducerID(bg, InitRequest{TransactionalID: "new", TransactionTimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1}); !errors.Is(err, ErrCoordinatorNotAvailable) {
		t.Errorf("allocator failure: %v", err)
	}
	if d := h.describe("new"); !errors.Is(d.Err, ErrTransactionalIDNotFound) {
		t.Errorf("failed allocation left %+v", d)
	}
}

// TestCommitFlow follows one transaction through every state it persists,
// and the markers it sends.
func TestCommitFlow(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.init("t1", 60000)
	h.add("t1", pid, epoch, tp("out", 1), tp("out", 0))
	d := h.wantState("t1", "Ongoing")
	if d.StartTimestamp != h.clock.Now().UnixMilli() {
		t.Fatalf("start %d", d.StartTimestamp)
	}
	h.clock.Advance(time.Second)
	// Adding partitions already in the transaction writes nothing.
	n := len(h.records("t1"))
	h.add("t1", pid, epoch, tp("out", 0))
	if len(h.records("t1")) != n {
		t.Fatal("re-adding a partition wrote a record")
	}
	if err := h.c.AddOffsets(bg, "t1", pid, epoch, "my-group"); err != nil {
		t.Fatal(err)
	}
	offsets := tp("__consumer_offsets", PartitionFor("my-group", 50))
	d = h.wantState("t1", "Ongoing")
	if want := sortedTPs([]cluster.TopicPartition{tp("out", 0), tp("out", 1), offsets}); !reflect.DeepEqual(d.Partitions, want) {
		t.Fatalf("partitions %v, want %v", d.Partitions, want)
	}
	if d.StartTimestamp != h.clock.Now().Add(-time.Second).UnixMilli() {
		t.Fatal("start timestamp moved when partitions were added")
	}
	if err := h.c.EndTxn(bg, "t1", pid, epoch, true); err != nil {
		t.Fatal(err)
	}
	h.idle()
	h.wantState("t1", "CompleteCommit")
	if got, want := h.states("t1"), []string{"Empty", "Ongoing", "Ongoing", "PrepareCommit", "CompleteCommit"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("log states %v, want %v", got, want)
	}
	recs := h.records("t1")
	if prep := recs[3].value; len(prep.Topics) != 2 || prep.ProducerEpoch != epoch {
		t.Fatalf("PrepareCommit %+v", prep)
	}
	if done := recs[4].value; done.Topics == nil || len(done.Topics) != 0 {
		t.Fatalf("CompleteCommit partitions %+v", done.Topics)
	}
	calls := h.markers.Calls()
	want := Markers{ProducerID: pid, ProducerEpoch: epoch, CoordinatorEpoch: testLeaderEpoch, Commit: true,
		Partitions: sortedTPs([]cluster.TopicPartition{tp("out", 0), tp("out", 1), offsets})}
	if len(calls) != 1 || !reflect.DeepEqual(calls[0], want) {
		t.Fatalf("markers %+v, want %+v", calls, want)
	}
	// Retries after completion: same outcome succeeds, the other is invalid.
	if err := h.c.EndTxn(bg, "t1", pid, epoch, true); err != nil {
		t.Fatalf("commit retry: %v", err)
	}
	if err := h.c.EndTxn(bg, "t1", pid, epoch, false); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("abort after commit: %v", err)
	}
	// The next transaction starts from CompleteCommit.
	h.add("t1", pid, epoch, tp("out", 2))
	if d := h.wantState("t1", "Ongoing"); len(d.Partitions) != 1 {
		t.Fatalf("next transaction has %v", d.Partitions)
	}
}

func TestAbortFlow(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.init("t1", 60000)
	h.add("t1", pid, epoch, tp("out", 0))
	if err := h.c.EndTxn(bg, "t1", pid, epoch, false); err != nil {
		t.Fatal(err)
	}
	h.idle()
	h.wantState("t1", "CompleteAbort")
	if got, want := h.states("t1"), []string{"Empty", "Ongoing", "PrepareAbort", "CompleteAbort"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("log states %v", got)
	}
	if c := h.markers.Calls(); len(c) != 1 || c[0].Commit {
		t.Fatalf("markers %+v", c)
	}
	if err := h.c.EndTxn(bg, "t1", pid, epoch, false); err != nil {
		t.Fatalf("abort retry: %v", err)
	}
	if err := h.c.EndTxn(bg, "t1", pid, epoch, true); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("commit after abort: %v", err)
	}
}

func TestEndTxnErrors(t *testing.T) {
	h := newHarness(t)
	if err := h.c.EndTxn(bg, "nobody", 1, 0, true); !errors.Is(err, ErrInvalidProducerIDMapping) {
		t.Errorf("unknown id: %v", err)
	}
	pid, epoch := h.init("t1", 60000)
	if err := h.c.EndTxn(bg, "t1", pid, epoch, true); !errors.Is(err, ErrInvalidTxnState) {
		t.Errorf("commit of no transaction: %v", err)
	}
	if err := h.c.EndTxn(bg, "t1", pid+1, epoch, true); !errors.Is(err, ErrInvalidProducerIDMapping) {
		t.Errorf("wrong producer id: %v", err)
	}
	if err := h.c.EndTxn(bg, "t1", pid, epoch+1, true); !errors.Is(err, ErrProducerFenced) {
		t.Errorf("newer epoch from a client: %v", err)
	}
	if _, err := h.c.AddPartitions(bg, "t1", pid+1, epoch, []cluster.TopicPartition{tp("a", 0)}); !errors.Is(err, ErrInvalidProducerIDMapping) {
		t.Errorf("add with wrong producer id: %v", err)
	}
	if _, err := h.c.AddPartitions(bg, "nobody", pid, epoch, []cluster.TopicPartition{tp("a", 0)}); !errors.Is(err, ErrInvalidProducerIDMapping) {
		t.Errorf("add to unknown id: %v", err)
	}
	if err := h.c.EndTxn(bg, "", pid, epoch, true); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("empty id: %v", err)
	}
	if got := h.states("t1"); len(got) != 1 {
		t.Fatalf("refused requests wrote %v", got)
	}
}

// TestFencingByNewInstance: a second InitProducerID fences the first
// instance and aborts its transaction with the bumped epoch.
func TestFencingByNewInstance(t *testing.T) {
	h := newHarness(t)
	pid, e0 := h.init("t1", 60000)
	h.add("t1", pid, e0, tp("out", 0), tp("out", 1))
	_, _, err := h.c.InitProducerID(bg, InitRequest{TransactionalID: "t1", TransactionTimeoutMs: 60000, ProducerID: -1, ProducerEpoch: -1})
	if !errors.Is(err, ErrConcurrentTransactions) {
		t.Fatalf("init over an open transaction: %v", err)
	}
	// The old instance is fenced at once.
	if err := h.c.EndTxn(bg, "t1", pid, e0, true); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("old instance commit: %v", err)
	}
	if _, err := h.c.AddPartitions(bg, "t1", pid, e0, []cluster.TopicPartition{tp("out", 2)}); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("old instance add: %v", err)
	}
	h.idle()
	d := h.wantState("t1", "CompleteAbort")
	if d.ProducerEpoch != e0+1 {
		t.Fatalf("fenced epoch %d", d.ProducerEpoch)
	}
	if got, want := h.states("t1"), []string{"Empty", "Ongoing", "PrepareAbort", "CompleteAbort"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("log states %v", got)
	}
	if rec := h.records("t1")[2].value; rec.ProducerEpoch != e0+1 {
		t.Fatalf("PrepareAbort written with epoch %d", rec.ProducerEpoch)
	}
	calls := h.markers.Calls()
	if len(calls) != 1 || calls[0].Commit || calls[0].ProducerEpoch != e0+1 {
		t.Fatalf("markers %+v", calls)
	}
	// The retry gets a second bump.
	pid2, e2 := h.init("t1", 60000)
	if pid2 != pid || e2 != e0+2 {
		t.Fatalf("retry init %d/%d", pid2, e2)
	}
	if err := h.c.EndTxn(bg, "t1", pid, e0+1, false); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("fence epoch after re-init: %v", err)
	}
}

func TestConcurrentTransactionsDuringPrepare(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.init("t1", 60000)
	h.add("t1", pid, epoch, tp("out", 0))
	h.log.mu.Lock()
	h.log.block = true
	h.log.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- h.c.EndTxn(bg, "t1", pid, epoch, true) }()
	<-h.log.waiting // PrepareCommit appended, waiting for replication
	h.wantState("t1", "Ongoing")
	if _, err := h.c.AddPartitions(bg, "t1", pid, epoch, []cluster.TopicPartition{tp("out", 9)}); !errors.Is(err, ErrConcurrentTransactions) {
		t.Errorf("add during prepare: %v", err)
	}
	if err := h.c.EndTxn(bg, "t1", pid, epoch, true); !errors.Is(err, ErrConcurrentTransactions) {
		t.Errorf("commit during prepare: %v", err)
	}
	if err := h.c.EndTxn(bg, "t1", pid, epoch, false); !errors.Is(err, ErrConcurrentTransactions) {
		t.Errorf("abort during prepare: %v", err)
	}
	if _, _, err := h.c.InitProducerID(bg, InitRequest{TransactionalID: "t1", TransactionTimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1}); !errors.Is(err, ErrConcurrentTransactions) {
		t.Errorf("init during prepare: %v", err)
	}
	// Markers block so the transaction stays PrepareCommit with the
	// completion pending.
	h.markers.mu.Lock()
	h.markers.block = true
	h.markers.mu.Unlock()
	h.log.mu.Lock()
	h.log.block = false
	h.log.mu.Unlock()
	h.log.release <- struct{}{}
	if err := <-done; err != nil {
		t.Fatalf("EndTxn: %v", err)
	}
	<-h.markers.waiting
	h.wantState("t1", "PrepareCommit")
	if err := h.c.EndTxn(bg, "t1", pid, epoch, true); !errors.Is(err, ErrConcurrentTransactions) {
		t.Errorf("commit retry during markers: %v", err)
	}
	if err := h.c.EndTxn(bg, "t1", pid, epoch, false); !errors.Is(err, ErrConcurrentTransactions) {
		// Kafka checks the pending completion first: CONCURRENT_TRANSACTIONS.
		t.Errorf("abort during markers: %v", err)
	}
	if _, _, err := h.c.InitProducerID(bg, InitRequest{TransactionalID: "t1", TransactionTimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1}); !errors.Is(err, ErrConcurrentTransactions) {
		t.Errorf("init during markers: %v", err)
	}
	if res, err := h.c.VerifyPartitions(bg, "t1", pid, epoch, []cluster.TopicPartition{tp("out", 0)}); !errors.Is(err, ErrConcurrentTransactions) || !errors.Is(res[tp("out", 0)], ErrConcurrentTransactions) {
		t.Errorf("verify during markers: %v %v", res, err)
	}
	h.markers.release <- struct{}{}
	h.idle()
	h.wantState("t1", "CompleteCommit")
}

func TestVerifyPartitions(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.init("t1", 60000)
	h.add("t1", pid, epoch, tp("out", 0))
	res, err := h.c.VerifyPartitions(bg, "t1", pid, epoch, []cluster.TopicPartition{tp("out", 0), tp("out", 1)})
	if err != nil || res[tp("out", 0)] != nil || !errors.Is(res[tp("out", 1)], ErrInvalidTxnState) {
		t.Fatalf("verify: %v %v", res, err)
	}
	if _, err := h.c.VerifyPartitions(bg, "t1", pid, epoch-1+2, []cluster.TopicPartition{tp("out", 0)}); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("verify with another epoch: %v", err)
	}
	if _, err := h.c.VerifyPartitions(bg, "t2", pid, epoch, []cluster.TopicPartition{tp("out", 0)}); !errors.Is(err, ErrInvalidProducerIDMapping) {
		t.Fatalf("verify of unknown id: %v", err)
	}
	if got := h.states("t1"); len(got) != 2 {
		t.Fatalf("verify wrote: %v", got)
	}
}

func TestTimedOutTransactionAborted(t *testing.T) {
	h := newHarness(t)
	pid, e0 := h.init("slow", 1000)
	h.add("slow", pid, e0, tp("out", 0))
	fpid, fe := h.init("fast", 60000)
	h.add("fast", fpid, fe, tp("out", 1))
	h.clock.Advance(999 * time.Millisecond)
	h.c.Tick() // interval not yet elapsed
	h.clock.Advance(10 * time.Second)
	h.c.Tick()
	h.idle()
	d := h.wantState("slow", "CompleteAbort")
	if d.ProducerEpoch != e0+1 {
		t.Fatalf("aborted at epoch %d", d.ProducerEpoch)
	}
	h.wantState("fast", "Ongoing")
	if err := h.c.EndTxn(bg, "slow", pid, e0, true); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("commit of the timed-out producer: %v", err)
	}
	if _, err := h.c.AddPartitions(bg, "slow", pid, e0, []cluster.TopicPartition{tp("out", 0)}); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("add of the timed-out producer: %v", err)
	}
	calls := h.markers.Calls()
	if len(calls) != 1 || calls[0].Commit || calls[0].ProducerEpoch != e0+1 || calls[0].ProducerID != pid {
		t.Fatalf("markers %+v", calls)
	}
	// The producer re-initializes (KIP-360 with its old epoch is fenced:
	// the coordinator bumped it, and the last epoch is unknown).
	_, _, err := h.c.InitProducerID(bg, InitRequest{TransactionalID: "slow", TransactionTimeoutMs: 1000, ProducerID: pid, ProducerEpoch: e0})
	if !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("KIP-360 init with the fenced epoch: %v", err)
	}
}

// TestTimedOutAbortsWrittenTogether: one pass appends the PrepareAbort of
// every timed-out transaction before waiting for any, so the pass waits
// for replication once, not once per transaction (each up to
// WriteTimeout). Each abort still takes effect only once replicated: while
// the records wait, the transactions are Ongoing (the fence's epoch bump
// excepted) and answer CONCURRENT_TRANSACTIONS.
func TestTimedOutAbortsWrittenTogether(t *testing.T) {
	h := newHarness(t)
	ids := []string{"t1", "t2", "t3", "t4"}
	epochs := map[string]int16{}
	for i, id := range ids {
		pid, e := h.init(id, 1000)
		h.add(id, pid, e, tp("out", int32(i)))
		epochs[id] = e
	}
	// No write times out here: a pass waiting for each record in turn
	// would wait for the first until it is released.
	h.c.cfg.WriteTimeout = time.Hour
	h.log.mu.Lock()
	h.log.block = true
	h.log.mu.Unlock()
	h.clock.Advance(11 * time.Second)
	done := make(chan struct{})
	go func() { h.c.Tick(); close(done) }()
	for i := range ids {
		select {
		case <-h.log.waiting:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d aborts waiting for replication together", i, len(ids))
		}
	}
	for _, id := range ids {
		if st := h.states(id); st[len(st)-1] != "PrepareAbort" {
			t.Fatalf("%s: records %v while the pass waits", id, st)
		}
		if d := h.wantState(id, "Ongoing"); d.ProducerEpoch != epochs[id]+1 {
			t.Fatalf("%s: epoch %d while its fence is written", id, d.ProducerEpoch)
		}
		if err := h.c.EndTxn(bg, id, h.describe(id).ProducerID, epochs[id]+1, false); !errors.Is(err, ErrConcurrentTransactions) {
			t.Fatalf("%s: EndTxn while its abort is written: %v", id, err)
		}
	}
	h.log.mu.Lock()
	h.log.block = false
	h.log.mu.Unlock()
	for range ids {
		h.log.release <- struct{}{}
	}
	<-done
	h.idle()
	for _, id := range ids {
		if d := h.wantState(id, "CompleteAbort"); d.ProducerEpoch != epochs[id]+1 {
			t.Fatalf("%s aborted at epoch %d", id, d.ProducerEpoch)
		}
	}
}

func TestExpiredTransactionalIDsRemoved(t *testing.T) {
	log := newFakeLog()
	clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
	// An Ongoing transaction last updated long ago with a timeout longer
	// than the expiry (as a coordinator with a larger max timeout wrote it).
	now := clock.Now().UnixMilli()
	loadState(t, log, "open", transit{producerID: 3, producerEpoch: 0, timeoutMs: math.MaxInt32, state: stateOngoing,
		partitions: []cluster.TopicPartition{tp("out", 1)}, startTs: now, updateTs: now})
	h := newHarnessOn(t, log, clock)
	h.lead(testLeaderEpoch)
	pid, e := h.init("old", 60000)
	h.add("old", pid, e, tp("out", 0))
	if err := h.c.EndTxn(bg, "old", pid, e, true); err != nil {
		t.Fatal(err)
	}
	h.idle()
	h.init("empty", 60000)
	h.clock.Advance(7*24*time.Hour - time.Minute)
	h.c.Tick() // not yet expired (and the open one not timed out)
	for _, id := range []string{"old", "empty", "open"} {
		if d := h.describe(id); d.Err != nil {
			t.Fatalf("%s gone early: %v", id, d.Err)
		}
	}
	// Fail the tombstone writes: the ids stay.
	h.clock.Advance(time.Hour + time.Minute)
	h.log.mu.Lock()
	h.log.fail = func(op string, n int) error {
		if op == "append" {
			return partition.ErrNotEnoughReplicas
		}
		return nil
	}
	h.log.mu.Unlock()
	h.c.Tick()
	for _, id := range []string{"old", "empty"} {
		if d := h.describe(id); d.Err != nil {
			t.Fatalf("%s removed without a tombstone: %v", id, d.Err)
		}
	}
	h.log.mu.Lock()
	h.log.fail = nil
	h.log.mu.Unlock()
	h.clock.Advance(time.Hour)
	h.c.Tick()
	for _, id := range []string{"old", "empty"} {
		if d := h.describe(id); !errors.Is(d.Err, ErrTransactionalIDNotFound) {
			t.Fatalf("%s not expired: %+v", id, d)
		}
		st := h.states(id)
		if st[len(st)-1] != "-" {
			t.Fatalf("%s: no tombstone: %v", id, st)
		}
	}
	if d := h.describe("open"); d.Err != nil {
		t.Fatalf("an Ongoing transaction expired: %v", d.Err)
	}
	// A removed id starts afresh with a new producer id.
	if pid2, e2 := h.init("old", 60000); pid2 == pid || e2 != 0 {
		t.Fatalf("re-created: %d/%d", pid2, e2)
	}
}

// TestExpiryRechecksIDsOfEachBatch: the expiry writes its tombstones in
// batches of at most 256 KiB and releases c.mu while each replicates. An
// id chosen for a later batch that a producer re-initialized meanwhile is
// no longer expired and must keep its state (Kafka re-checks shouldExpire
// under the lock); the ids still expired are removed.
func TestExpiryRechecksIDsOfEachBatch(t *testing.T) {
	log := newFakeLog()
	clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
	old := clock.Now().UnixMilli()
	const p = int32(0)
	pad := strings.Repeat("x", 250)
	var ids []string
	for i := 0; len(ids) < 1500; i++ {
		id := fmt.Sprintf("%s-%05d", pad, i)
		if PartitionFor(id, testPartitions) == p {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	var recs []kv
	for i, id := range ids {
		recs = append(recs, kv{txnKey(id), txnValue(transit{producerID: int64(i + 1), producerEpoch: 0, timeoutMs: 1000,
			state: stateEmpty, startTs: -1, updateTs: old})})
	}
	log.appendRaw(t, p, recs)
	h := newHarnessOn(t, log, clock)
	h.lead(testLeaderEpoch)
	target := ids[len(ids)-1] // in the second tombstone batch
	other := ids[len(ids)-2]  // also in it, still expired

	clock.Advance(7*24*time.Hour + 2*time.Hour)
	h.log.mu.Lock()
	h.log.block = true
	h.log.mu.Unlock()
	done := make(chan struct{})
	go func() { h.c.Tick(); close(done) }()
	<-h.log.waiting // the first tombstone batch replicates, c.mu released

	h.log.mu.Lock()
	h.log.block = false
	h.log.mu.Unlock()
	pid, e, err := h.c.InitProducerID(bg, InitRequest{TransactionalID: target, TransactionTimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1})
	if err != nil {
		t.Fatal(err)
	}
	h.log.release <- struct{}{}
	<-done

	if d := h.describe(target); d.Err != nil || d.State != "Empty" || d.ProducerID != pid || d.ProducerEpoch != e {
		t.Fatalf("%q initialized (pid %d epoch %d) during the expiry, then %+v; log %v", target, pid, e, d, h.states(target))
	}
	if st := h.states(target); st[len(st)-1] != "Empty" {
		t.Fatalf("%q tombstoned after its re-initialization: %v", target, st)
	}
	if _, err := h.c.AddPartitions(bg, target, pid, e, []cluster.TopicPartition{tp("out", 0)}); err != nil {
		t.Fatalf("the fresh producer's AddPartitions: %v", err)
	}
	for _, id := range []string{ids[0], other} {
		if d := h.describe(id); !errors.Is(d.Err, ErrTransactionalIDNotFound) {
			t.Fatalf("expired %q not removed: %+v", id, d)
		}
	}
}

func TestKIP360EpochBump(t *testing.T) {
	h := newHarness(t)
	pid, e0 := h.init("t1", 60000)
	req := InitRequest{TransactionalID: "t1", TransactionTimeoutMs: 60000, ProducerID: pid, ProducerEpoch: e0}
	p1, e1, err := h.c.InitProducerID(bg, req)
	if err != nil || p1 != pid || e1 != e0+1 {
		t.Fatalf("bump: %d/%d %v", p1, e1, err)
	}
	// A retry of the same request (the response was lost) gets the same epoch.
	p2, e2, err := h.c.InitProducerID(bg, req)
	if err != nil || p2 != pid || e2 != e1 {
		t.Fatalf("retry: %d/%d %v", p2, e2, err)
	}
	// An unrelated epoch, or another producer id, is fenced.
	for _, bad := range []InitRequest{
		{TransactionalID: "t1", TransactionTimeoutMs: 60000, ProducerID: pid, ProducerEpoch: 9},
		{TransactionalID: "t1", TransactionTimeoutMs: 60000, ProducerID: pid + 77, ProducerEpoch: e1},
	} {
		if _, _, err := h.c.InitProducerID(bg, bad); !errors.Is(err, ErrProducerFenced) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	// A producer recovering with an id the coordinator never saw gets a new one.
	pn, en, err := h.c.InitProducerID(bg, InitRequest{TransactionalID: "fresh", TransactionTimeoutMs: 60000, ProducerID: 5, ProducerEpoch: 3})
	if err != nil || pn == 5 || en != 0 {
		t.Fatalf("unknown id with an epoch: %d/%d %v", pn, en, err)
	}
	// A bump with the current epoch during an open transaction aborts it.
	h.add("t1", pid, e1, tp("out", 0))
	_, _, err = h.c.InitProducerID(bg, InitRequest{TransactionalID: "t1", TransactionTimeoutMs: 60000, ProducerID: pid, ProducerEpoch: e1})
	if !errors.Is(err, ErrConcurrentTransactions) {
		t.Fatalf("bump over an open transaction: %v", err)
	}
	h.idle()
	h.wantState("t1", "CompleteAbort")
}

// loadState writes one state record for id into the fake log (as another
// coordinator would have) before the harness leads the partition.
func loadState(t *testing.T, log *fakeLog, id string, tr transit) {
	log.appendRaw(t, PartitionFor(id, testPartitions), []kv{{txnKey(id), txnValue(tr)}})
}

func TestEpochExhaustionRotatesProducerID(t *testing.T) {
	log := newFakeLog()
	clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
	loadState(t, log, "done", transit{producerID: 7, producerEpoch: math.MaxInt16 - 1, timeoutMs: 1000, state: stateCompleteCommit, startTs: 1, updateTs: clock.Now().UnixMilli()})
	loadState(t, log, "kip360", transit{producerID: 8, producerEpoch: math.MaxInt16 - 1, timeoutMs: 1000, state: stateEmpty, startTs: -1, updateTs: clock.Now().UnixMilli()})
	loadState(t, log, "open", transit{producerID: 9, producerEpoch: math.MaxInt16 - 1, timeoutMs: 60000, state: stateOngoing,
		partitions: []cluster.TopicPartition{tp("out", 0)}, startTs: clock.Now().UnixMilli(), updateTs: clock.Now().UnixMilli()})
	h := newHarnessOn(t, log, clock)
	h.lead(testLeaderEpoch)

	pid, e := h.init("done", 1000)
	if pid != 1000 || e != 0 {
		t.Fatalf("exhausted epoch: %d/%d, want a new producer id at 0", pid, e)
	}
	if st := h.states("done"); st[len(st)-1] != "Empty" {
		t.Fatalf("states %v", st)
	}
	// KIP-360: the producer at the exhausted epoch gets a new id; a retry
	// with the old id and exhausted epoch is recognised (previous id).
	req := InitRequest{TransactionalID: "kip360", TransactionTimeoutMs: 1000, ProducerID: 8, ProducerEpoch: math.MaxInt16 - 1}
	pid, e, err := h.c.InitProducerID(bg, req)
	if err != nil || pid != 1001 || e != 0 {
		t.Fatalf("KIP-360 at exhaustion: %d/%d %v", pid, e, err)
	}
	pid, e, err = h.c.InitProducerID(bg, req)
	if err != nil || pid != 1001 || e != 0 {
		t.Fatalf("KIP-360 retry at exhaustion: %d/%d %v", pid, e, err)
	}
	// Fencing an open transaction at the last epoch uses the spare epoch;
	// the retry then rotates the producer id.
	if _, _, err := h.c.InitProducerID(bg, InitRequest{TransactionalID: "open", TransactionTimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1}); !errors.Is(err, ErrConcurrentTransactions) {
		t.Fatalf("fence at exhaustion: %v", err)
	}
	h.idle()
	if d := h.wantState("open", "CompleteAbort"); d.ProducerEpoch != math.MaxInt16 || d.ProducerID != 9 {
		t.Fatalf("fenced %+v", d)
	}
	pid, e = h.init("open", 1000)
	if pid != 1002 || e != 0 {
		t.Fatalf("after the fence: %d/%d", pid, e)
	}
}

// TestFailoverCompletesPreparedTransactions writes state with one
// coordinator and loads it with another from the same log.
func TestFailoverCompletesPreparedTransactions(t *testing.T) {
	log := newFakeLog()
	clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
	a := newHarnessOn(t, log, clock)
	a.lead(4)
	// Markers never get through to the old coordinator's partitions.
	a.markers.fail = func(int, cluster.TopicPartition) error { return partition.ErrNotLeader }
	cpid, ce := a.init("committing", 60000)
	a.add("committing", cpid, ce, tp("out", 0), tp("out", 1))
	if err := a.c.EndTxn(bg, "committing", cpid, ce, true); err != nil {
		t.Fatal(err)
	}
	apid, ae := a.init("aborting", 60000)
	a.add("aborting", apid, ae, tp("out", 2))
	if err := a.c.EndTxn(bg, "aborting", apid, ae, false); err != nil {
		t.Fatal(err)
	}
	spid, se := a.init("stale", 2000)
	a.add("stale", spid, se, tp("out", 3))
	opid, oe := a.init("open", 60000)
	a.add("open", opid, oe, tp("out", 4))
	a.init("idle", 60000)
	for p := int32(0); p < testPartitions; p++ {
		a.c.OnBecomeFollower(p)
	}
	a.idle() // resigning stopped the retrying fan-outs
	if _, err := a.c.AddPartitions(bg, "open", opid, oe, []cluster.TopicPartition{tp("x", 0)}); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("old coordinator after resigning: %v", err)
	}

	clock.Advance(3 * time.Second) // "stale" is past its timeout
	b := newHarnessOn(t, log, clock)
	b.lead(9)
	b.idle()
	b.wantState("committing", "CompleteCommit")
	b.wantState("aborting", "CompleteAbort")
	if d := b.wantState("stale", "CompleteAbort"); d.ProducerEpoch != se+1 {
		t.Fatalf("stale aborted at epoch %d", d.ProducerEpoch)
	}
	if d := b.wantState("open", "Ongoing"); !reflect.DeepEqual(d.Partitions, []cluster.TopicPartition{tp("out", 4)}) || d.ProducerEpoch != oe {
		t.Fatalf("open %+v", d)
	}
	b.wantState("idle", "Empty")
	got := map[int64]Markers{}
	for _, m := range b.markers.Calls() {
		if m.CoordinatorEpoch != 9 {
			t.Fatalf("marker with coordinator epoch %d: %+v", m.CoordinatorEpoch, m)
		}
		got[m.ProducerID] = m
	}
	if m := got[cpid]; !m.Commit || !reflect.DeepEqual(m.Partitions, []cluster.TopicPartition{tp("out", 0), tp("out", 1)}) {
		t.Fatalf("commit markers %+v", m)
	}
	if m := got[apid]; m.Commit || !reflect.DeepEqual(m.Partitions, []cluster.TopicPartition{tp("out", 2)}) {
		t.Fatalf("abort markers %+v", m)
	}
	if m := got[spid]; m.Commit || m.ProducerEpoch != se+1 {
		t.Fatalf("timeout abort markers %+v", m)
	}
	if len(got) != 3 {
		t.Fatalf("markers for %d producers", len(got))
	}
	// The committed producer continues on the new coordinator.
	b.add("committing", cpid, ce, tp("out", 5))
	if err := b.c.EndTxn(bg, "open", opid, oe, true); err != nil {
		t.Fatal(err)
	}
	b.idle()
	b.wantState("open", "CompleteCommit")
}

// TestMarkerRetriesAndDeletedTopics: retriable marker errors are retried
// with backoff until written, including UNKNOWN_TOPIC_OR_PARTITION from a
// broker (it may not hold the replica yet: dropping the marker would leave
// the transaction open there); only cluster.ErrUnknownTopic (the metadata
// has no such topic) drops the partition's marker.
func TestMarkerRetriesAndDeletedTopics(t *testing.T) {
	h := newHarness(t)
	h.markers.fail = func(call int, p cluster.TopicPartition) error {
		switch {
		case p == tp("gone", 0):
			return fmt.Errorf("leader lookup: %w", cluster.ErrUnknownTopic)
		case p == tp("moving", 0) && call <= 2:
			// No replica on the broker asked (yet): not a deleted topic.
			return fmt.Errorf("write txn markers to broker 3: %w", partition.ErrUnknownTopicOrPartition)
		case p == tp("slow", 0) && call <= 3:
			return partition.ErrNotLeader
		case p == tp("isr", 0) && call <= 1:
			return partition.ErrNotEnoughReplicas
		}
		return nil
	}
	pid, e := h.init("t1", 60000)
	h.add("t1", pid, e, tp("gone", 0), tp("isr", 0), tp("moving", 0), tp("ok", 0), tp("slow", 0))
	if err := h.c.EndTxn(bg, "t1", pid, e, true); err != nil {
		t.Fatal(err)
	}
	h.idle()
	h.wantState("t1", "CompleteCommit")
	calls := h.markers.Calls()
	var sent [][]cluster.TopicPartition
	for _, c := range calls {
		sent = append(sent, c.Partitions)
	}
	want := [][]cluster.TopicPartition{
		{tp("gone", 0), tp("isr", 0), tp("moving", 0), tp("ok", 0), tp("slow", 0)},
		{tp("isr", 0), tp("moving", 0), tp("slow", 0)}, // isr written at the second call
		{tp("moving", 0), tp("slow", 0)},               // moving at the third
		{tp("slow", 0)},
	}
	if !reflect.DeepEqual(sent, want) {
		t.Fatalf("marker calls %v, want %v", sent, want)
	}
	h.mu.Lock()
	sleeps := append([]time.Duration(nil), h.sleeps...)
	h.mu.Unlock()
	if !reflect.DeepEqual(sleeps, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}) {
		t.Fatalf("backoffs %v", sleeps)
	}
}

func TestMarkerRefusedByNewerProducerEpochStops(t *testing.T) {
	h := newHarness(t)
	h.markers.fail = func(int, cluster.TopicPartition) error { return partition.ErrInvalidProducerEpoch }
	pid, e := h.init("t1", 60000)
	h.add("t1", pid, e, tp("out", 0))
	if err := h.c.EndTxn(bg, "t1", pid, e, true); err != nil {
		t.Fatal(err)
	}
	h.idle()
	if len(h.markers.Calls()) != 1 {
		t.Fatalf("retried a refused marker: %d calls", len(h.markers.Calls()))
	}
	h.wantState("t1", "PrepareCommit")
}

// TestMarkerRefusedByNewerCoordinatorStops: a partition leader refusing a
// marker because a coordinator with a newer epoch wrote one for the
// producer (TRANSACTION_COORDINATOR_FENCED) ends the fan-out, as an
// INVALID_PRODUCER_EPOCH refusal does (Kafka cancels the markers on both):
// no retries, and no completion written by the deposed coordinator.
func TestMarkerRefusedByNewerCoordinatorStops(t *testing.T) {
	h := newHarness(t)
	h.markers.fail = func(call int, p cluster.TopicPartition) error {
		// Only at first, so that a coordinator retrying the refusal ends.
		if p == tp("out", 1) && call <= 3 {
			return fmt.Errorf("write txn markers to broker 2: %w", partition.ErrTransactionCoordinatorFenced)
		}
		return nil
	}
	pid, e := h.init("t1", 60000)
	h.add("t1", pid, e, tp("out", 0), tp("out", 1))
	if err := h.c.EndTxn(bg, "t1", pid, e, true); err != nil {
		t.Fatal(err)
	}
	h.idle()
	if n := len(h.markers.Calls()); n != 1 {
		t.Fatalf("retried a fenced marker: %d calls", n)
	}
	h.wantState("t1", "PrepareCommit")
	if st := h.states("t1"); st[len(st)-1] != "PrepareCommit" {
		t.Fatalf("deposed coordinator wrote %v", st)
	}
}

func TestCompletionWriteRetried(t *testing.T) {
	h := newHarness(t)
	pid, e := h.init("t1", 60000)
	h.add("t1", pid, e, tp("out", 0))
	waits := 0
	h.log.mu.Lock()
	h.log.fail = func(op string, n int) error {
		if op != "wait" {
			return nil
		}
		waits++
		if waits == 1 || waits == 3 {
			return partition.ErrRequestTimedOut
		}
		return nil
	}
	h.log.mu.Unlock()
	// The first and third waits fail: the first PrepareCommit (EndTxn
	// answers an error, state unchanged), then the first CompleteCommit
	// (retried in the background).
	if err := h.c.EndTxn(bg, "t1", pid, e, true); !errors.Is(err, ErrCoordinatorNotAvailable) {
		t.Fatalf("EndTxn with a timed-out write: %v", err)
	}
	h.wantState("t1", "Ongoing")
	if err := h.c.EndTxn(bg, "t1", pid, e, true); err != nil {
		t.Fatal(err)
	}
	h.idle()
	h.wantState("t1", "CompleteCommit")
	if got, want := h.states("t1"), []string{"Empty", "Ongoing", "PrepareCommit", "PrepareCommit", "CompleteCommit", "CompleteCommit"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("log states %v, want %v", got, want)
	}
}

func TestResignAnswersWaitersNotCoordinator(t *testing.T) {
	h := newHarness(t)
	pid, e := h.init("t1", 60000)
	h.add("t1", pid, e, tp("out", 0))
	h.log.mu.Lock()
	h.log.block = true
	h.log.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- h.c.EndTxn(bg, "t1", pid, e, true) }()
	<-h.log.waiting
	h.c.OnBecomeFollower(PartitionFor("t1", testPartitions))
	if err := <-done; !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("waiting EndTxn after resigning: %v", err)
	}
	if d := h.describe("t1"); !errors.Is(d.Err, ErrNotCoordinator) {
		t.Fatalf("describe after resigning: %+v", d)
	}
	if len(h.markers.Calls()) != 0 {
		t.Fatal("markers sent for an unpersisted prepare")
	}
}

func TestLoadInProgressAndNotCoordinator(t *testing.T) {
	log := newFakeLog()
	clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
	loadState(t, log, "t1", transit{producerID: 7, producerEpoch: 1, timeoutMs: 1000, state: stateEmpty, startTs: -1, updateTs: 1})
	log.readErr = partition.ErrNotLeader
	h := newHarnessOn(t, log, clock)
	p := PartitionFor("t1", testPartitions)
	if _, _, err := h.c.InitProducerID(bg, InitRequest{TransactionalID: "t1", TransactionTimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1}); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("not leader: %v", err)
	}
	h.c.OnBecomeLeader(p, 3)
	for _, err := range []error{
		h.c.EndTxn(bg, "t1", 7, 1, true),
		h.describe("t1").Err,
	} {
		if !errors.Is(err, ErrCoordinatorLoadInProgress) {
			t.Fatalf("while loading: %v", err)
		}
	}
	if _, err := h.c.ListTransactions(nil, nil); !errors.Is(err, ErrCoordinatorLoadInProgress) {
		t.Fatalf("list while loading: %v", err)
	}
	log.mu.Lock()
	log.readErr = nil
	log.mu.Unlock()
	<-h.loaded
	if d := h.wantState("t1", "Empty"); d.ProducerID != 7 || d.ProducerEpoch != 1 {
		t.Fatalf("loaded %+v", d)
	}
	// Same epoch again: ignored; newer: reloaded.
	h.c.OnBecomeLeader(p, 3)
	h.c.OnBecomeLeader(p, 4)
	<-h.loaded
	h.wantState("t1", "Empty")
}

func TestLoadAppliesTombstonesAndLastRecord(t *testing.T) {
	log := newFakeLog()
	clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
	now := clock.Now().UnixMilli()
	p := PartitionFor("a", testPartitions)
	// Hand-made records in Kafka's byte layout, and one bad batch skipped
	// per record (unknown key version).
	log.appendRaw(t, p, []kv{
		{kafkaKeyV0("a"), kafkaValueV0(1, 0, 1000, 0, nil, nil, true, 1, -1)},
		{kafkaKeyV0("a"), kafkaValueV0(1, 3, 60000, 1, map[string][]int32{"t": {2}}, []string{"t"}, false, now, now)},
		{[]byte{0, 9, 1}, []byte{1}},
	})
	pb := PartitionFor("b", testPartitions)
	log.appendRaw(t, pb, []kv{{kafkaKeyV0("b"), kafkaValueV0(2, 0, 1000, 0, nil, nil, true, 1, -1)}})
	log.appendRaw(t, pb, []kv{{kafkaKeyV0("b"), nil}})
	h := newHarnessOn(t, log, clock)
	h.lead(2)
	if d := h.wantState("a", "Ongoing"); d.ProducerEpoch != 3 || !reflect.DeepEqual(d.Partitions, []cluster.TopicPartition{tp("t", 2)}) {
		t.Fatalf("a: %+v", d)
	}
	if d := h.describe("b"); !errors.Is(d.Err, ErrTransactionalIDNotFound) {
		t.Fatalf("tombstoned b: %+v", d)
	}
}

func TestListAndDescribe(t *testing.T) {
	h := newHarness(t)
	p1, e1 := h.init("a", 60000)
	h.add("a", p1, e1, tp("x", 0))
	h.init("b", 30000)
	got, err := h.c.ListTransactions(nil, nil)
	if err != nil || len(got) != 2 || got[0] != (Listing{"a", p1, "Ongoing"}) || got[1].State != "Empty" {
		t.Fatalf("list all: %+v %v", got, err)
	}
	if got, _ := h.c.ListTransactions([]string{"Ongoing"}, nil); len(got) != 1 || got[0].TransactionalID != "a" {
		t.Fatalf("list Ongoing: %+v", got)
	}
	if got, _ := h.c.ListTransactions(nil, []int64{p1 + 1}); len(got) != 1 || got[0].TransactionalID != "b" {
		t.Fatalf("list by producer id: %+v", got)
	}
	if got, _ := h.c.ListTransactions([]string{"Bogus"}, nil); len(got) != 0 {
		t.Fatalf("unknown state filter: %+v", got)
	}
	ds := h.c.DescribeTransactions([]string{"a", "zzz", ""})
	if ds[0].State != "Ongoing" || ds[0].TimeoutMs != 60000 || ds[0].ProducerID != p1 || len(ds[0].Partitions) != 1 || ds[0].StartTimestamp < 0 {
		t.Fatalf("describe a: %+v", ds[0])
	}
	if !errors.Is(ds[1].Err, ErrTransactionalIDNotFound) || !errors.Is(ds[2].Err, ErrInvalidRequest) {
		t.Fatalf("describe errors: %+v", ds[1:])
	}
}

func TestCloseStopsEverything(t *testing.T) {
	h := newHarness(t)
	h.c.Start()
	h.markers.fail = func(int, cluster.TopicPartition) error { return partition.ErrNotLeader }
	pid, e := h.init("t1", 60000)
	h.add("t1", pid, e, tp("out", 0))
	if err := h.c.EndTxn(bg, "t1", pid, e, true); err != nil {
		t.Fatal(err)
	}
	h.c.Close()
	h.c.Close()
	h.idle()
	if _, _, err := h.c.InitProducerID(bg, InitRequest{TransactionalID: "t1", TransactionTimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1}); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("after close: %v", err)
	}
}

// TestTickKeepsScheduleWhenReadLate: the timed-out abort is due every
// AbortTimedOutInterval from New, not from the time a Tick happened to
// read; a tick read 5 ms late followed by one read 1 ms late runs both
// passes (before, the second was skipped, so timeouts were enforced up to
// twice late).
func TestTickKeepsScheduleWhenReadLate(t *testing.T) {
	h := newHarness(t)
	pid, e := h.init("t1", 1000)
	h.add("t1", pid, e, tp("out", 0))
	h.clock.Advance(10*time.Second + 5*time.Millisecond) // tick 1, read 5 ms late
	h.c.Tick()
	h.idle()
	h.wantState("t1", "CompleteAbort")
	pid2, e2 := h.init("t2", 1000)
	h.add("t2", pid2, e2, tp("out", 1))
	h.clock.Advance(10*time.Second - 4*time.Millisecond) // tick 2, read 1 ms late
	h.c.Tick()
	h.idle()
	h.wantState("t2", "CompleteAbort")
	// Missed intervals run one pass, and the schedule keeps its phase:
	// due at New+30 s, ticked at New+55 s, next due at New+60 s.
	pid3, e3 := h.init("t3", 1000)
	h.add("t3", pid3, e3, tp("out", 2))
	h.clock.Advance(35*time.Second - time.Millisecond)
	h.c.Tick()
	h.idle()
	h.wantState("t3", "CompleteAbort")
	pid4, e4 := h.init("t4", 1000)
	h.add("t4", pid4, e4, tp("out", 0))
	h.clock.Advance(4 * time.Second)
	h.c.Tick() // New+59 s: not due
	h.idle()
	h.wantState("t4", "Ongoing")
	h.clock.Advance(time.Second)
	h.c.Tick() // New+60 s
	h.idle()
	h.wantState("t4", "CompleteAbort")
}

// TestBackgroundLoopRunsPassOnEveryTick: the loop started by Start runs
// the timed-out abort on every tick of its AbortTimedOutInterval ticker
// and the expiry on every tick of its RemoveExpiredInterval ticker,
// whatever the clock says about the previous pass; a second Start starts
// no second loop.
func TestBackgroundLoopRunsPassOnEveryTick(t *testing.T) {
	h := newHarness(t)
	var mu sync.Mutex
	made := map[time.Duration]int{}
	abort, expire := make(chan time.Time), make(chan time.Time)
	h.c.ticker = func(d time.Duration) (<-chan time.Time, func()) {
		mu.Lock()
		defer mu.Unlock()
		made[d]++
		if d == 10*time.Second {
			return abort, func() {}
		}
		return expire, func() {}
	}
	h.c.Start()
	h.c.Start()
	// tick sends one tick and then another, which the loop takes only
	// once the pass of the first ended.
	tick := func(ch chan time.Time) {
		ch <- time.Time{}
		ch <- time.Time{}
		h.idle()
	}
	for i, id := range []string{"t1", "t2"} {
		pid, e := h.init(id, 1000)
		h.add(id, pid, e, tp("out", int32(i)))
		h.clock.Advance(2 * time.Second) // past the timeout, well within the interval
		tick(abort)
		h.wantState(id, "CompleteAbort")
	}
	h.clock.Advance(7 * 24 * time.Hour)
	tick(expire)
	for _, id := range []string{"t1", "t2"} {
		if d := h.describe(id); !errors.Is(d.Err, ErrTransactionalIDNotFound) {
			t.Fatalf("%s not expired by the expiry tick: %+v", id, d)
		}
	}
	h.c.Close()
	mu.Lock()
	defer mu.Unlock()
	if made[10*time.Second] != 1 || made[time.Hour] != 1 || len(made) != 2 {
		t.Fatalf("tickers made %v, want one of 10s and one of 1h", made)
	}
}
