package zkcoord

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/kafkazk/broker/cluster"
)

// deletedReplicas are the brokers sent StopReplica(delete) for tp.
func deletedReplicas(h *ctrlHarness, tp cluster.TopicPartition) map[int32]bool {
	out := map[int32]bool{}
	for _, s := range h.sent {
		if s.stp != nil && s.stp.DeletePartitions && slices.Contains(s.stp.Partitions, tp) {
			out[s.to.ID] = true
		}
	}
	return out
}

func runAll(t *testing.T, h *ctrlHarness, cmds ...string) {
	t.Helper()
	for _, cmd := range cmds {
		if _, err := h.run(cmd); err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
	}
}

// landedCompletion reassigns v/0 from 1,2 to 3,4 and lets phase B's state
// write land while the topic znode write that follows fails.
func landedCompletion(t *testing.T, brokers string) (*ctrlHarness, cluster.TopicPartition) {
	h := newCtrlHarness(t)
	runAll(t, h, brokers, "topic v 0=1,2", "elect 1", "reassign v/0 3,4")
	tp := cluster.TopicPartition{Topic: "v", Partition: 0}
	h.store.writeFaults = map[string][]faultKind{topicPath("v"): {faultLossBefore}}
	runAll(t, h, "hold isr v/0 1,2,3,4")
	h.ctrl.step(h.store.takeEvents())
	if st := h.ctrl.states[tp]; !slices.Equal(st.Isr, []int32{3, 4}) || st.Leader != 3 {
		t.Fatalf("phase B did not land: %+v", st)
	}
	return h, tp
}

func TestReassignCancelAfterLandedCompletionIsNoReassignment(t *testing.T) {
	h, tp := landedCompletion(t, "brokers 1 2 3 4")
	res, _, err := h.ctrl.alterReassignments(map[cluster.TopicPartition][]int32{tp: nil})
	if err != nil || !errors.Is(res[tp], cluster.ErrNoReassignmentInProgress) {
		t.Errorf("cancel after B landed: %v %v, want NO_REASSIGNMENT_IN_PROGRESS", res, err)
	}
	h.settle()
	if del := deletedReplicas(h, tp); del[3] || del[4] {
		t.Errorf("StopReplica(delete) sent to the new replicas: %v", del)
	}
	if got := string(h.store.nodes[topicPath("v")].data); got != `{"version":2,"partitions":{"0":[3,4]},"adding_replicas":{},"removing_replicas":{}}` {
		t.Errorf("topic znode %s", got)
	}
}

func TestReassignNewTargetAfterLandedCompletionStartsFromTarget(t *testing.T) {
	h, tp := landedCompletion(t, "brokers 1 2 3 4 5")
	res, _, err := h.ctrl.alterReassignments(map[cluster.TopicPartition][]int32{tp: {5, 3}})
	if err != nil || res[tp] != nil {
		t.Fatalf("new target: %v %v", res, err)
	}
	h.settle()
	if del := deletedReplicas(h, tp); del[3] || del[4] {
		t.Errorf("StopReplica(delete) sent to replicas of the landed target: %v", del)
	}
	if got := string(h.store.nodes[topicPath("v")].data); got != `{"version":2,"partitions":{"0":[5,3,4]},"adding_replicas":{"0":[5]},"removing_replicas":{"0":[4]}}` {
		t.Errorf("topic znode %s, want RS 5,3,4 from ORS 3,4", got)
	}
}

func TestReassignLandedCompletionFinishesDespiteIsrShrink(t *testing.T) {
	h, tp := landedCompletion(t, "brokers 1 2 3 4")
	runAll(t, h, "isr v/0 3")
	if _, ok := h.ctrl.reassigning[tp]; ok {
		t.Errorf("reassignment whose completing write landed waits for 4 to rejoin the ISR")
	}
	if got := string(h.store.nodes[topicPath("v")].data); got != `{"version":2,"partitions":{"0":[3,4]},"adding_replicas":{},"removing_replicas":{}}` {
		t.Errorf("topic znode %s", got)
	}
}

// The retried step of B whose state write landed but whose reply was lost
// (the ISR shrank meanwhile) finishes rather than waiting.
func TestReassignLandedCompletionReplyLostFinishes(t *testing.T) {
	h := newCtrlHarness(t)
	runAll(t, h, "brokers 1 2 3 4", "topic v 0=1,2", "elect 1", "reassign v/0 3,4")
	tp := cluster.TopicPartition{Topic: "v", Partition: 0}
	h.store.writeFaults = map[string][]faultKind{partitionStatePath("v", 0): {faultLossAfterTwice}}
	runAll(t, h, "hold isr v/0 1,2,3,4")
	h.ctrl.step(h.store.takeEvents())
	runAll(t, h, "isr v/0 3")
	h.settle()
	if _, ok := h.ctrl.reassigning[tp]; ok {
		t.Errorf("reassignment whose completing write landed is stuck: %+v", h.ctrl.reassigning[tp])
	}
	if got := string(h.store.nodes[topicPath("v")].data); got != `{"version":2,"partitions":{"0":[3,4]},"adding_replicas":{},"removing_replicas":{}}` {
		t.Errorf("topic znode %s", got)
	}
}

// TRS 3,4,5 with 3,4 in the ISR and ORS 1,2 dead: a cancel would delete
// every in-sync replica; it is refused.
func TestReassignCancelRefusedWhenItDropsEveryLiveIsrMember(t *testing.T) {
	h := newCtrlHarness(t)
	runAll(t, h, "brokers 1 2 3 4 5 6", "topic v 0=1,2", "elect 6", "reassign v/0 3,4,5", "isr v/0 1,2,3,4", "kill 1", "kill 2")
	tp := cluster.TopicPartition{Topic: "v", Partition: 0}
	res, _, err := h.ctrl.alterReassignments(map[cluster.TopicPartition][]int32{tp: nil})
	if err != nil || !errors.Is(res[tp], cluster.ErrInvalidReplicaAssignment) {
		t.Errorf("cancel: %v %v, want INVALID_REPLICA_ASSIGNMENT", res, err)
	}
	h.settle()
	if del := deletedReplicas(h, tp); len(del) > 0 {
		t.Errorf("StopReplica(delete) sent to %v", del)
	}
	if isr := h.ctrl.states[tp].Isr; !slices.Equal(isr, []int32{3, 4}) {
		t.Errorf("isr %v", isr)
	}
}

// The topic znode write of a new reassignment fails once: the request is
// not answered NONE until the retry wrote it, and a failover then keeps it.
func TestReassignAnsweredOnlyOnceWritten(t *testing.T) {
	h := newCtrlHarness(t)
	runAll(t, h, "brokers 1 2 3", "topic v 0=1,2", "elect 1")
	tp := cluster.TopicPartition{Topic: "v", Partition: 0}
	h.store.writeFaults = map[string][]faultKind{topicPath("v"): {faultLossBefore}}
	res, pending, err := h.ctrl.alterReassignments(map[cluster.TopicPartition][]int32{tp: {2, 3}})
	if err != nil || !errors.Is(res[tp], errReassignmentNotWritten) || pending[tp] == nil {
		t.Fatalf("answer before the topic znode was written: %v %v", res, err)
	}
	if l, _ := h.ctrl.listReassignments(nil); len(l) != 0 {
		t.Errorf("list shows a reassignment not yet written: %v", l)
	}
	h.settle()
	if e := h.ctrl.checkReassignments(pending, false)[tp]; e != nil {
		t.Fatalf("after the retry: %v", e)
	}
	h.newController(2)
	h.settle()
	if l, _ := h.ctrl.listReassignments(nil); len(l) != 1 || !slices.Equal(l[0].Replicas, []int32{2, 3, 1}) {
		t.Errorf("after failover: %v", l)
	}
}

// The topic znode write keeps failing: at the request's deadline it is
// answered REQUEST_TIMED_OUT and dropped, so nothing lands later.
func TestReassignTimedOutIsDropped(t *testing.T) {
	h := newCtrlHarness(t)
	runAll(t, h, "brokers 1 2 3", "topic v 0=1,2", "elect 1")
	tp := cluster.TopicPartition{Topic: "v", Partition: 0}
	faults := slices.Repeat([]faultKind{faultLossBefore}, 3)
	h.store.writeFaults = map[string][]faultKind{topicPath("v"): faults}
	_, pending, err := h.ctrl.alterReassignments(map[cluster.TopicPartition][]int32{tp: {2, 3}})
	if err != nil || pending[tp] == nil {
		t.Fatalf("not pending: %v %v", pending, err)
	}
	h.store.writeFaults = map[string][]faultKind{topicPath("v"): faults}
	if e := h.ctrl.checkReassignments(pending, true)[tp]; !errors.Is(e, context.DeadlineExceeded) {
		t.Fatalf("at the deadline: %v, want REQUEST_TIMED_OUT", e)
	}
	if _, ok := h.ctrl.reassigning[tp]; ok {
		t.Errorf("timed-out reassignment still in memory")
	}
	h.store.writeFaults = nil
	h.settle()
	if got := string(h.store.nodes[topicPath("v")].data); got != `{"version":1,"partitions":{"0":[1,2]}}` && got != `{"version":2,"partitions":{"0":[1,2]},"adding_replicas":{},"removing_replicas":{}}` {
		t.Errorf("topic znode %s: the timed-out reassignment landed later", got)
	}
}

// A broker shutting down is not alive for a reassignment's new replicas
// (Kafka's liveBrokerIds).
func TestReassignRefusesBrokerShuttingDown(t *testing.T) {
	h := newCtrlHarness(t)
	runAll(t, h, "brokers 1 2 3", "topic v 0=1,2", "elect 1", "shutdown 3")
	tp := cluster.TopicPartition{Topic: "v", Partition: 0}
	res, _, err := h.ctrl.alterReassignments(map[cluster.TopicPartition][]int32{tp: {1, 3}})
	if err != nil || !errors.Is(res[tp], cluster.ErrInvalidReplicaAssignment) {
		t.Errorf("reassign to a broker shutting down: %v %v, want INVALID_REPLICA_ASSIGNMENT", res, err)
	}
}

// A reassignment's rewrites of the topic znode keep the fields this code
// does not know (Kafka 2.8's version 3 topic_id).
func TestReassignKeepsTopicID(t *testing.T) {
	h := newCtrlHarness(t)
	runAll(t, h, "brokers 1 2 3", "topic v 0=1,2", "elect 1")
	n := h.store.nodes[topicPath("v")]
	n.data = []byte(`{"version":3,"topic_id":"hK0QnuQbTbKjFh8YiDa5Jg","partitions":{"0":[1,2]},"adding_replicas":{},"removing_replicas":{}}`)
	h.store.nodes[topicPath("v")] = n
	runAll(t, h, "reassign v/0 2,3")
	want := `{"version":3,"partitions":{"0":[2,3,1]},"adding_replicas":{"0":[3]},"removing_replicas":{"0":[1]},"topic_id":"hK0QnuQbTbKjFh8YiDa5Jg"}`
	if got := string(h.store.nodes[topicPath("v")].data); got != want {
		t.Errorf("topic znode %s, want %s", got, want)
	}
	runAll(t, h, "isr v/0 1,2,3")
	want = `{"version":3,"partitions":{"0":[2,3]},"adding_replicas":{},"removing_replicas":{},"topic_id":"hK0QnuQbTbKjFh8YiDa5Jg"}`
	if got := string(h.store.nodes[topicPath("v")].data); got != want {
		t.Errorf("topic znode %s, want %s", got, want)
	}
}

// A topic znode that becomes unreadable mid-reassignment drops the
// reassignment rather than retrying it forever.
func TestReassignDroppedWhenTopicZnodeUnreadable(t *testing.T) {
	h := newCtrlHarness(t)
	runAll(t, h, "brokers 1 2 3", "topic v 0=1,2", "elect 1", "reassign v/0 2,3")
	tp := cluster.TopicPartition{Topic: "v", Partition: 0}
	n := h.store.nodes[topicPath("v")]
	n.data = []byte(`{"version":2,"partitions":`)
	h.store.nodes[topicPath("v")] = n
	runAll(t, h, "isr v/0 1,2,3")
	if _, ok := h.ctrl.reassigning[tp]; ok || h.ctrl.work.reassign[tp] {
		t.Errorf("reassignment still retried against an unreadable topic znode")
	}
	if l, _ := h.ctrl.listReassignments(nil); len(l) != 0 {
		t.Errorf("list %v", l)
	}
}

// runLoop runs h's controller loop, as a Session does, until the test ends.
func runLoop(t *testing.T, h *ctrlHarness) *Session {
	c := h.ctrl
	go c.run()
	t.Cleanup(func() {
		c.stop()
		<-c.exited
	})
	return &Session{ctrl: c}
}

// Session.AlterPartitionReassignments waits for the loop's retry of a
// failed topic znode write, and answers NONE once it landed.
func TestSessionAlterReassignmentsWaitsForTheWrite(t *testing.T) {
	h := newCtrlHarness(t)
	runAll(t, h, "brokers 1 2 3", "topic v 0=1,2", "elect 1")
	tp := cluster.TopicPartition{Topic: "v", Partition: 0}
	h.store.writeFaults = map[string][]faultKind{topicPath("v"): {faultLossBefore, faultLossBefore}}
	s := runLoop(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := s.AlterPartitionReassignments(ctx, map[cluster.TopicPartition][]int32{tp: {2, 3}})
	if err != nil || res[tp] != nil {
		t.Fatalf("alter: %v %v, want NONE after the retry", res, err)
	}
	list, err := s.ListPartitionReassignments(ctx, nil)
	if err != nil || len(list) != 1 || !slices.Equal(list[0].Replicas, []int32{2, 3, 1}) {
		t.Errorf("list after NONE: %v %v", list, err)
	}
}

// Its time up with the write still failing, the answer is
// REQUEST_TIMED_OUT and the reassignment is gone.
func TestSessionAlterReassignmentsTimesOut(t *testing.T) {
	h := newCtrlHarness(t)
	runAll(t, h, "brokers 1 2 3", "topic v 0=1,2", "elect 1")
	tp := cluster.TopicPartition{Topic: "v", Partition: 0}
	h.store.writeFaults = map[string][]faultKind{topicPath("v"): slices.Repeat([]faultKind{faultLossBefore}, 100)}
	s := runLoop(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	res, err := s.AlterPartitionReassignments(ctx, map[cluster.TopicPartition][]int32{tp: {2, 3}})
	if err != nil || !errors.Is(res[tp], context.DeadlineExceeded) {
		t.Fatalf("alter: %v %v, want REQUEST_TIMED_OUT", res, err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("answered after %v, deadline 300ms", d)
	}
	gone := false
	if err := s.callController(context.Background(), "check", func(c *controller) error {
		_, ok := c.reassigning[tp]
		gone = !ok
		return nil
	}); err != nil || !gone {
		t.Errorf("timed-out reassignment still in memory (%v)", err)
	}
}
