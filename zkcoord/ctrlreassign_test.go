package zkcoord

import (
	"errors"
	"slices"
	"testing"

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
	res, err := h.ctrl.alterReassignments(map[cluster.TopicPartition][]int32{tp: nil})
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
	res, err := h.ctrl.alterReassignments(map[cluster.TopicPartition][]int32{tp: {5, 3}})
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
	h.store.writeFaults = map[string][]faultKind{partitionStatePath("v", 0): {faultLossAfter}}
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
	res, err := h.ctrl.alterReassignments(map[cluster.TopicPartition][]int32{tp: nil})
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
