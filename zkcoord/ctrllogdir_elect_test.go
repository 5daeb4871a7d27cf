package zkcoord

import (
	"strings"
	"testing"

	"github.com/kafkazk/broker/cluster"
)

// TestAdminElectionsSkipOfflineReplica: a replica on an offline log dir
// that its leader wrote back into the ISR (its fetch landed before the
// dir failed) is still no candidate for a preferred election (ElectLeaders
// or /admin/preferred_replica_election), nor for the leader a
// reassignment elects when it drops the old one. Not a script: the ISR write that
// names an offline replica is undone by a new controller, which the
// fault runs of the scripts bring in.
func TestAdminElectionsSkipOfflineReplica(t *testing.T) {
	h := newCtrlHarness(t)
	run := func(cmd string) string {
		t.Helper()
		out, err := h.run(cmd)
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return out
	}
	leader := func(tp cluster.TopicPartition) int32 {
		t.Helper()
		return h.ctrl.states[tp].Leader
	}
	w := cluster.TopicPartition{Topic: "w", Partition: 0}
	x := cluster.TopicPartition{Topic: "x", Partition: 0}
	run("brokers 1 2 3")
	run("topic w 0=2,1")
	run("topic x 0=1,2,3")
	run("elect 1")
	run("logdir_fail 2 w/0,x/0")
	if l := leader(w); l != 1 {
		t.Fatalf("w/0 led by %d after 2's log dir failed, want 1", l)
	}
	run("isr w/0 1,2")
	run("isr x/0 1,2,3")
	if out := run("leaders preferred w/0"); !strings.Contains(out, "result w/0 PREFERRED_LEADER_NOT_AVAILABLE") {
		t.Errorf("preferred election of w/0 with preferred 2 offline:\n%s\nwant PREFERRED_LEADER_NOT_AVAILABLE", out)
	}
	run("preferred w/0")
	if l := leader(w); l != 1 {
		t.Errorf("w/0 led by %d after /admin/preferred_replica_election, want 1 (2 is offline)", l)
	}
	// The reassignment drops leader 1: 3 leads, not the offline 2.
	if out := run("reassign x/0 2,3"); !strings.Contains(out, "result x/0 NONE") {
		t.Fatalf("reassign x/0 2,3:\n%s", out)
	}
	if l := leader(x); l != 3 {
		t.Errorf("x/0 led by %d after its reassignment dropped 1, want 3 (2 is offline)", l)
	}
}
