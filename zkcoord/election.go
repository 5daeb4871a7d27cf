package zkcoord

import (
	"slices"

	"github.com/kafkazk/broker/cluster"
)

// Pure decisions of the controller (Kafka's PartitionStateMachine election
// strategies and ReplicaStateMachine ISR removal). They read nothing and
// write nothing: the event loop reads the partition state znode fresh,
// asks one of these what the new state should be, and writes it
// conditionally. Replica lists are in assignment order; ISRs keep the order
// they had.

// LeaderDuringDelete is the leader Kafka puts into UpdateMetadata for a
// partition of a topic being deleted; a broker removes such partitions from
// its metadata cache (LeaderAndIsr.LeaderDuringDelete).
const LeaderDuringDelete int32 = -2

// ElectLeader is Kafka's OfflinePartitionLeaderElectionStrategy: the leader
// is the first replica in assignment order that is live and in the ISR, and
// the new ISR is the live members of the old ISR (in ISR order). Failing
// that, if unclean is true, the leader is the first live replica in
// assignment order and the new ISR is just [leader] (an unclean election:
// records acknowledged by the old ISR may be lost). Failing both, ok is
// false, leader is cluster.NoLeader and newIsr is a copy of isr unchanged:
// the partition goes offline and keeps its last ISR so that a member
// coming back can lead it cleanly. live lists the brokers that may lead
// (registered and not shutting down).
func ElectLeader(assignment, isr, live []int32, unclean bool) (leader int32, newIsr []int32, ok bool) {
	for _, r := range assignment {
		if slices.Contains(live, r) && slices.Contains(isr, r) {
			for _, m := range isr {
				if slices.Contains(live, m) {
					newIsr = append(newIsr, m)
				}
			}
			return r, newIsr, true
		}
	}
	if unclean {
		for _, r := range assignment {
			if slices.Contains(live, r) {
				return r, []int32{r}, true
			}
		}
	}
	return cluster.NoLeader, slices.Clone(isr), false
}

// ElectControlledShutdownLeader is Kafka's
// ControlledShutdownPartitionLeaderElectionStrategy: the leader is the
// first replica in assignment order that is live, in the ISR and not
// shutting down, and the new ISR is the old one minus the shutting-down
// brokers. It never elects uncleanly. Without a candidate, ok is false and
// the state must stay as it is (the broker keeps leading until it stops).
func ElectControlledShutdownLeader(assignment, isr, live, shuttingDown []int32) (leader int32, newIsr []int32, ok bool) {
	for _, r := range assignment {
		if slices.Contains(live, r) && slices.Contains(isr, r) && !slices.Contains(shuttingDown, r) {
			for _, m := range isr {
				if !slices.Contains(shuttingDown, m) {
					newIsr = append(newIsr, m)
				}
			}
			return r, newIsr, true
		}
	}
	return cluster.NoLeader, slices.Clone(isr), false
}

// ElectPreferredLeader is Kafka's PreferredReplicaPartitionLeaderElectionStrategy:
// the leader is the head of the assignment, only if it is live and in the
// ISR; the ISR is unchanged.
func ElectPreferredLeader(assignment, isr, live []int32) (leader int32, ok bool) {
	if len(assignment) == 0 {
		return cluster.NoLeader, false
	}
	p := assignment[0]
	if slices.Contains(live, p) && slices.Contains(isr, p) {
		return p, true
	}
	return cluster.NoLeader, false
}

// initialState is the first state of a new partition (PSM
// initializeLeaderAndIsrForPartitions): leader = first live replica, ISR =
// the live replicas in assignment order, leader epoch 0. ok is false when
// no replica is live: the partition then stays without a state znode.
func initialState(assignment, live []int32, controllerEpoch int32) (cluster.LeaderAndIsr, bool) {
	var isr []int32
	for _, r := range assignment {
		if slices.Contains(live, r) {
			isr = append(isr, r)
		}
	}
	if len(isr) == 0 {
		return cluster.LeaderAndIsr{}, false
	}
	return cluster.LeaderAndIsr{Leader: isr[0], LeaderEpoch: 0, Isr: isr, ControllerEpoch: controllerEpoch, ZkVersion: -1}, true
}

// offlineTransition decides a partition's state after brokers died or came
// back (KC onReplicasBecomeOffline and the offline election of
// triggerOnlinePartitionStateChange). alive are the registered brokers
// (including those shutting down); electable are the ones that may become
// leader (alive and not shutting down).
//
//   - The leader is alive: replicas that are not alive leave the ISR
//     (leader epoch + 1, as Kafka's removeReplicasFromIsr does).
//   - The leader is dead or there is none: ElectLeader. On success the
//     leader epoch goes up by one. Without a candidate the partition goes
//     offline (leader -1, leader epoch + 1) and its ISR keeps only the alive
//     members, or is left as it was when none is alive, so the last in-sync
//     replica stays recorded (Kafka never shrinks an ISR below one member).
//     A partition already offline with nothing to change is left alone.
//
// changed is false when st should be kept as it is. ControllerEpoch and
// ZkVersion of the result are the caller's to set.
func offlineTransition(assignment []int32, st cluster.LeaderAndIsr, alive, electable []int32, unclean bool) (next cluster.LeaderAndIsr, changed bool, uncleanElection bool) {
	next = st
	next.Isr = slices.Clone(st.Isr)
	if st.Leader >= 0 && slices.Contains(alive, st.Leader) {
		var isr []int32
		for _, m := range st.Isr {
			if slices.Contains(alive, m) {
				isr = append(isr, m)
			}
		}
		if len(isr) == len(st.Isr) || len(isr) == 0 {
			return st, false, false
		}
		next.Isr = isr
		next.LeaderEpoch++
		return next, true, false
	}
	leader, isr, ok := ElectLeader(assignment, st.Isr, electable, unclean)
	if ok {
		next.Leader, next.Isr = leader, isr
		next.LeaderEpoch++
		return next, true, !hasAny(st.Isr, electable)
	}
	var kept []int32
	for _, m := range st.Isr {
		if slices.Contains(alive, m) {
			kept = append(kept, m)
		}
	}
	if len(kept) == 0 {
		kept = slices.Clone(st.Isr)
	}
	if st.Leader == cluster.NoLeader && slices.Equal(kept, st.Isr) {
		return st, false, false
	}
	next.Leader, next.Isr = cluster.NoLeader, kept
	next.LeaderEpoch++
	return next, true, false
}

// hasAny reports whether some element of a is in b.
func hasAny(a, b []int32) bool {
	for _, x := range a {
		if slices.Contains(b, x) {
			return true
		}
	}
	return false
}

// PartitionLeadership is what the rebalance decision needs of a partition.
type PartitionLeadership struct {
	TopicPartition cluster.TopicPartition
	Replicas       []int32
	Leader         int32
	Isr            []int32
}

// PreferredElections is Kafka's checkAndTriggerAutoLeaderRebalance
// decision: partitions are grouped by preferred replica (Replicas[0]); a
// broker's imbalance is the share of its preferred partitions it does not
// lead; for each live broker whose imbalance is above percentage/100, the
// partitions it prefers but does not lead, where it is in the ISR, are
// returned (sorted) for a preferred-replica election.
func PreferredElections(parts []PartitionLeadership, live []int32, percentage int) []cluster.TopicPartition {
	type tally struct {
		total    int
		notLed   []PartitionLeadership
		eligible []cluster.TopicPartition
	}
	by := map[int32]*tally{}
	for _, p := range parts {
		if len(p.Replicas) == 0 {
			continue
		}
		pref := p.Replicas[0]
		t := by[pref]
		if t == nil {
			t = &tally{}
			by[pref] = t
		}
		t.total++
		if p.Leader != pref {
			t.notLed = append(t.notLed, p)
		}
	}
	var out []cluster.TopicPartition
	for b, t := range by {
		if !slices.Contains(live, b) || len(t.notLed) == 0 {
			continue
		}
		// imbalance > percentage/100, in integers.
		if len(t.notLed)*100 <= percentage*t.total {
			continue
		}
		for _, p := range t.notLed {
			if slices.Contains(p.Isr, b) {
				out = append(out, p.TopicPartition)
			}
		}
	}
	slices.SortFunc(out, compareTP)
	return out
}

func compareTP(a, b cluster.TopicPartition) int {
	if a.Topic != b.Topic {
		if a.Topic < b.Topic {
			return -1
		}
		return 1
	}
	return int(a.Partition - b.Partition)
}
