package txn

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/kafkazk/broker/cluster"
)

// TestConcurrentProducers runs producers on their own and on shared
// transactional ids at once, with the timeout task, listing and describing
// alongside (run with -race). Every answer is one of Kafka's for the
// situation, and at the end each id's cached state is its last committed
// record.
func TestConcurrentProducers(t *testing.T) {
	h := newHarness(t)
	ids := []string{"own-0", "own-1", "own-2", "shared", "shared"}
	allowed := func(err error) bool {
		return err == nil || errors.Is(err, ErrConcurrentTransactions) || errors.Is(err, ErrProducerFenced) ||
			errors.Is(err, ErrInvalidTxnState) || errors.Is(err, ErrInvalidProducerIDMapping)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for w, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 30; i++ {
				pid, e, err := h.c.InitProducerID(bg, InitRequest{TransactionalID: id, TransactionTimeoutMs: 60000, ProducerID: -1, ProducerEpoch: -1})
				if !allowed(err) {
					errs <- fmt.Errorf("%s init: %w", id, err)
					return
				}
				if err != nil {
					continue
				}
				tps := []cluster.TopicPartition{tp("out", int32(w)), tp("out", int32(i%3))}
				if _, err := h.c.AddPartitions(bg, id, pid, e, tps); !allowed(err) {
					errs <- fmt.Errorf("%s add: %w", id, err)
					return
				}
				if err := h.c.EndTxn(bg, id, pid, e, i%2 == 0); !allowed(err) {
					errs <- fmt.Errorf("%s end: %w", id, err)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 50; i++ {
			h.c.Tick()
			if _, err := h.c.ListTransactions(nil, nil); err != nil {
				errs <- err
				return
			}
			h.c.DescribeTransactions([]string{"shared", "own-0"})
		}
	}()
	wg.Wait()
	h.idle()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, id := range []string{"own-0", "own-1", "own-2", "shared"} {
		d := h.describe(id)
		r := h.log.lastCommitted(t, PartitionFor(id, testPartitions), id)
		if d.Err != nil || r == nil {
			t.Fatalf("%s: %+v %v", id, d, r)
		}
		if d.State != txnState(r.value.State).String() || d.ProducerID != r.value.ProducerID || d.ProducerEpoch != r.value.ProducerEpoch {
			t.Fatalf("%s: cached %+v, last committed %+v", id, d, r.value)
		}
		var parts []cluster.TopicPartition
		for _, tt := range r.value.Topics {
			for _, p := range tt.Partitions {
				parts = append(parts, tp(tt.Topic, p))
			}
		}
		if !reflect.DeepEqual(nilIfEmpty(d.Partitions), nilIfEmpty(parts)) {
			t.Fatalf("%s: partitions %v, logged %v", id, d.Partitions, parts)
		}
	}
}

// TestIdleWhileFanOutsStart: the harness's idle (waiting for every marker
// fan-out to end) runs while fan-outs start from none running, which a
// sync.WaitGroup forbids (Add from zero concurrent with Wait: the race
// detector reports it). After idle, every fan-out started before it has
// ended.
func TestIdleWhileFanOutsStart(t *testing.T) {
	h := newHarness(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				h.idle()
			}
		}
	}()
	for i := 0; i < 200; i++ {
		id := fmt.Sprintf("t%d", i%5)
		pid, e := h.init(id, 60000)
		h.add(id, pid, e, tp("out", int32(i%3)))
		if err := h.c.EndTxn(bg, id, pid, e, true); err != nil {
			t.Fatal(err)
		}
		h.idle()
		h.wantState(id, "CompleteCommit")
	}
	close(stop)
	wg.Wait()
}
