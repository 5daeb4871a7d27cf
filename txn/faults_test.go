package txn

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
)

// snap is what a transactional id is, in memory or as last persisted.
type snap struct {
	found bool
	state string
	pid   int64
	epoch int16
	parts []cluster.TopicPartition
}

func (h *harness) memSnap(id string) snap {
	d := h.describe(id)
	if d.Err != nil {
		return snap{}
	}
	return snap{true, d.State, d.ProducerID, d.ProducerEpoch, nilIfEmpty(d.Partitions)}
}

func (h *harness) logSnap(id string) snap {
	r := h.log.lastCommitted(h.t, PartitionFor(id, testPartitions), id)
	if r == nil || r.value == nil {
		return snap{}
	}
	var parts []cluster.TopicPartition
	for _, t := range r.value.Topics {
		for _, p := range t.Partitions {
			parts = append(parts, tp(t.Topic, p))
		}
	}
	return snap{true, txnState(r.value.State).String(), r.value.ProducerID, r.value.ProducerEpoch, nilIfEmpty(sortedTPs(parts))}
}

func nilIfEmpty(tps []cluster.TopicPartition) []cluster.TopicPartition {
	if len(tps) == 0 {
		return nil
	}
	return tps
}

var errNotYet = errors.New("test: not done yet")

// TestFailedWriteAtEveryLogCall runs one life of a transactional id
// (init, two adds, commit, re-init, add, fence by a new instance, re-init,
// add, timeout abort) once per Log call of a clean run, failing exactly
// that call, the way Kafka's coordinator tests fail each append. Each step
// is retried until it succeeds. After every attempt:
//   - a step that answered success has its state replicated in the log
//     (the last committed record of the id is what was answered);
//   - a step that failed left the cached state as it was (only an epoch
//     fence may leave its bumped epoch behind, Kafka's hasFailedEpochFence);
//   - once the markers are done, the cached state is the last committed one.
func TestFailedWriteAtEveryLogCall(t *testing.T) {
	failures := []struct {
		name string
		err  func(op string) error
	}{
		{"not-enough-replicas/timeout", func(op string) error {
			if op == "append" {
				return partition.ErrNotEnoughReplicas
			}
			return fmt.Errorf("wait: %w", context.DeadlineExceeded)
		}},
		{"not-leader", func(op string) error { return partition.ErrNotLeader }},
	}
	clean := runLife(t, 0, nil)
	if clean < 15 {
		t.Fatalf("clean run made only %d Log calls", clean)
	}
	for _, f := range failures {
		for k := 1; k <= clean; k++ {
			t.Run(fmt.Sprintf("%s/call-%d", f.name, k), func(t *testing.T) {
				runLife(t, k, f.err)
			})
		}
	}
}

// runLife runs the scenario failing Log call failAt (0: none) and returns
// the number of Log calls made.
func runLife(t *testing.T, failAt int, errFor func(op string) error) int {
	h := newHarness(t)
	h.log.mu.Lock()
	h.log.calls = 0
	h.log.fail = func(op string, n int) error {
		if n == failAt {
			return errFor(op)
		}
		return nil
	}
	h.log.mu.Unlock()
	const id = "t1"
	var pid int64 = -1
	var epoch int16 = -1

	consistent := func(what string) {
		t.Helper()
		mem, lg := h.memSnap(id), h.logSnap(id)
		if !lg.found {
			// Nothing persisted yet: at most a fresh Empty entry at epoch -1.
			if mem.found && (mem.state != "Empty" || mem.epoch != -1) {
				t.Fatalf("%s: cached %+v with nothing persisted", what, mem)
			}
			return
		}
		if mem.state != lg.state || mem.pid != lg.pid || !reflect.DeepEqual(mem.parts, lg.parts) {
			if !(mem.state == lg.state && (mem.state == "CompleteCommit" || mem.state == "CompleteAbort") && len(mem.parts) == 0) {
				t.Fatalf("%s: cached %+v, persisted %+v", what, mem, lg)
			}
		}
		if mem.epoch != lg.epoch && mem.epoch != lg.epoch+1 {
			t.Fatalf("%s: cached epoch %d, persisted %d", what, mem.epoch, lg.epoch)
		}
	}
	step := func(what string, op func() error, fenceOK bool, succeeded func() bool) {
		t.Helper()
		for attempt := 0; attempt < 6; attempt++ {
			h.idle()
			before := h.memSnap(id)
			err := op()
			h.idle()
			switch {
			case err == nil:
				if !succeeded() {
					t.Fatalf("%s answered success but the log has %+v", what, h.logSnap(id))
				}
				consistent(what)
				return
			case errors.Is(err, ErrConcurrentTransactions) && fenceOK:
				// The fence was persisted; the retry completes the step.
				consistent(what)
				continue
			}
			after := h.memSnap(id)
			if before.found && (after.state != before.state || after.pid != before.pid || !reflect.DeepEqual(after.parts, before.parts) ||
				(after.epoch != before.epoch && !(fenceOK && after.epoch == before.epoch+1))) {
				t.Fatalf("%s failed (%v) but changed the cached state %+v -> %+v", what, err, before, after)
			}
			consistent(what)
		}
		t.Fatalf("%s never succeeded", what)
	}
	initStep := func(what string, fence bool) {
		step(what, func() error {
			var err error
			p, e, err := h.c.InitProducerID(bg, InitRequest{TransactionalID: id, TransactionTimeoutMs: 5000, ProducerID: -1, ProducerEpoch: -1})
			if err == nil {
				pid, epoch = p, e
			}
			return err
		}, fence, func() bool {
			lg := h.logSnap(id)
			return lg.state == "Empty" && lg.pid == pid && lg.epoch == epoch
		})
	}
	addStep := func(what string, tps ...cluster.TopicPartition) {
		step(what, func() error {
			_, err := h.c.AddPartitions(bg, id, pid, epoch, tps)
			return err
		}, false, func() bool {
			lg := h.logSnap(id)
			if lg.state != "Ongoing" || lg.epoch != epoch {
				return false
			}
			for _, want := range tps {
				found := false
				for _, got := range lg.parts {
					found = found || got == want
				}
				if !found {
					return false
				}
			}
			return true
		})
	}

	initStep("init", false)
	addStep("add", tp("out", 0), tp("out", 1))
	step("add offsets", func() error { return h.c.AddOffsets(bg, id, pid, epoch, "g") }, false, func() bool {
		return len(h.logSnap(id).parts) == 3
	})
	step("commit", func() error { return h.c.EndTxn(bg, id, pid, epoch, true) }, false, func() bool {
		st := h.logSnap(id).state
		return st == "PrepareCommit" || st == "CompleteCommit"
	})
	if st := h.memSnap(id).state; st != "CompleteCommit" {
		t.Fatalf("after commit: %s", st)
	}
	initStep("re-init", false)
	addStep("add again", tp("out", 2))
	initStep("init over an open transaction", true)
	if st := h.memSnap(id).state; st != "Empty" {
		t.Fatalf("after fencing init: %s", st)
	}
	addStep("add for the timeout", tp("out", 3))
	h.clock.Advance(6 * time.Second)
	step("timeout abort", func() error {
		h.clock.Advance(10 * time.Second)
		h.c.Tick()
		h.idle()
		if h.memSnap(id).state != "CompleteAbort" {
			return errNotYet
		}
		return nil
	}, true, func() bool { return h.logSnap(id).state == "CompleteAbort" && h.logSnap(id).epoch == epoch+1 })
	if err := h.c.EndTxn(bg, id, pid, epoch, false); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("timed-out producer: %v", err)
	}
	h.log.mu.Lock()
	defer h.log.mu.Unlock()
	return h.log.calls
}
