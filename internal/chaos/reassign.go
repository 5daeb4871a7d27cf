package chaos

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Reassign submits target (partition -> replicas) for the scenario's topic
// with AlterPartitionAssignments, as kafka-reassign-partitions.sh does.
func (e *Env) Reassign(target map[int32][]int32) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.C.Seeds()...), kgo.ClientID("chaos-admin"))
	if err != nil {
		return err
	}
	defer cl.Close()
	var req kadm.AlterPartitionAssignmentsReq
	for p, r := range target {
		req.Assign(e.Topic, p, r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).AlterPartitionAssignments(ctx, req)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("AlterPartitionAssignments %v: %w", target, err)
	}
	return nil
}

// reassigned reports nil once the topic znode lists exactly target with
// nothing adding or removing, and every partition's ISR is its target.
func (e *Env) reassigned(target map[int32][]int32) error {
	a, err := e.C.Assignment(e.Topic)
	if err != nil {
		return err
	}
	for p, want := range target {
		if !slices.Equal(a.Partitions[p], want) || len(a.Adding[p]) > 0 || len(a.Removing[p]) > 0 {
			return fmt.Errorf("p%d: replicas %v adding %v removing %v, want %v", p, a.Partitions[p], a.Adding[p], a.Removing[p], want)
		}
		s, err := e.C.State(e.Topic, p)
		if err != nil {
			return err
		}
		isr := slices.Clone(s.ISR)
		slices.Sort(isr)
		w := slices.Clone(want)
		slices.Sort(w)
		if s.Leader < 0 || !slices.Equal(isr, w) {
			return fmt.Errorf("p%d: leader %d isr %v, want the replicas %v", p, s.Leader, s.ISR, want)
		}
	}
	return nil
}

// waitInISR waits until id is back in the ISR of every partition whose
// replicas name it, except where it is still being added.
func (e *Env) waitInISR(id int32, timeout time.Duration) error {
	return waitFor(timeout, func() error {
		a, err := e.C.Assignment(e.Topic)
		if err != nil {
			return err
		}
		for p := int32(0); p < e.Parts; p++ {
			if !slices.Contains(a.Partitions[p], id) || slices.Contains(a.Adding[p], id) {
				continue
			}
			s, err := e.C.State(e.Topic, p)
			if err != nil {
				return err
			}
			if !slices.Contains(s.ISR, id) {
				return fmt.Errorf("broker %d not in the ISR %v of p%d", id, s.ISR, p)
			}
		}
		return nil
	})
}

// ReassignBounce is Kafka's reassign_partitions_test with bounce_brokers:
// brokers 4 and 5 join, every partition moves from its three replicas onto
// both new brokers and one old one, and while the move runs brokers 1, 4
// and 2 are bounced one at a time (SIGTERM, down for 2 s, restart; the next
// only once the last is back in its ISRs, so no partition need drop below
// min.insync.replicas). The move must finish; the checker judges the data.
func (e *Env) ReassignBounce() {
	for _, id := range []int32{4, 5} {
		if _, err := e.C.AddBroker(id); err != nil {
			e.Err = fmt.Errorf("add broker %d: %w", id, err)
			return
		}
	}
	target := map[int32][]int32{}
	for p := int32(0); p < e.Parts; p++ {
		r := []int32{4, 5, 1 + p%3}
		k := int(p) % 3
		target[p] = append(slices.Clone(r[k:]), r[:k]...)
	}
	start := time.Now()
	if err := e.Reassign(target); err != nil {
		e.Err = err
		return
	}
	for _, id := range []int32{1, 4, 2} {
		pending := e.reassigned(target) != nil
		e.Term(id, 2*time.Second)
		if err := e.waitInISR(id, 60*time.Second); err != nil {
			e.note("broker %d after its bounce: %v", id, err)
		}
		e.Logf("bounced broker %d (reassignment still running when it began: %v)", id, pending)
	}
	if err := waitFor(120*time.Second, func() error { return e.reassigned(target) }); err != nil {
		e.Err = fmt.Errorf("reassignment to %v did not finish: %w", target, err)
		return
	}
	e.note("reassignment onto %v finished %s after its submission, brokers 1, 4 and 2 bounced meanwhile", target, time.Since(start).Round(time.Millisecond))
}
