package partition

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kafkazk/broker/cluster"
)

// TestReassignmentOnReplicas plays a reassignment of tp0 from 1,2 to 2,3
// on the replicas, as the controller drives it: broker 3 never had the
// partition and gets it from a LeaderAndIsr with RS = 2,3,1 (adding 3,
// removing 1) at a new epoch in which 1 stays leader; the leader tracks 3
// as a follower and lets it into the ISR once it caught up; then 2 leads
// with RS = 2,3 and 1 is stopped and deleted. Every acknowledged record
// is on 2 and 3.
func TestReassignmentOnReplicas(t *testing.T) {
	s := newSim(t, 2, cluster.DefaultLogConfig())
	for i := 0; i < 5; i++ {
		s.produce(2, -1)
	}
	s.catchUp()

	// Broker 3 starts, without the partition.
	s.brokers[3] = &simBroker{id: 3, dir: filepath.Join(t.TempDir(), "broker-3")}
	s.startBroker(3)
	cur := s.zk.get()
	s.replicas = []int32{2, 3, 1}
	s.zk.controllerWrite(cur.Leader, cur.LeaderEpoch+1, cur.Isr)
	s.pushReassigning([]int32{3}, []int32{1})
	if st := s.status(3); st.LeaderEpoch != cur.LeaderEpoch+1 || st.LogEndOffset != 0 {
		t.Fatalf("new replica on broker 3: %+v", st)
	}
	if st := s.status(3); !slices.Equal(st.AddingReplicas, []int32{3}) || !slices.Equal(st.RemovingReplicas, []int32{1}) {
		t.Fatalf("broker 3's replica: adding %v removing %v", st.AddingReplicas, st.RemovingReplicas)
	}
	f := s.status(1).Followers
	if len(f) != 2 {
		t.Fatalf("leader tracks %+v, want followers 2 and 3", f)
	}
	s.produce(1, -1)
	s.catchUp()
	if isr := s.zk.get().Isr; !slices.Contains(isr, 3) || s.zk.notified == 0 {
		t.Fatalf("caught-up adding replica not in the ISR: %v (notified %d)", isr, s.zk.notified)
	}

	// Complete: 2 leads, 1 leaves the ISR and is deleted.
	cur = s.zk.get()
	s.replicas = []int32{2, 3}
	s.zk.controllerWrite(2, cur.LeaderEpoch+1, []int32{2, 3})
	s.push()
	if stopped, err := s.mgr(1).StopReplica(tp0, true, cur.LeaderEpoch+1); err != nil || !stopped {
		t.Fatalf("stop replica on broker 1: %t %v", stopped, err)
	}
	if _, err := os.Stat(filepath.Join(s.brokers[1].dir, fmt.Sprintf("%s-%d", tp0.Topic, tp0.Partition))); !os.IsNotExist(err) {
		t.Fatalf("broker 1's replica directory: %v", err)
	}
	if f := s.status(2).Followers; len(f) != 1 || f[0].BrokerID != 3 {
		t.Fatalf("new leader tracks %+v, want only 3", f)
	}
	s.produce(1, -1)
	s.catchUp()
	if isr := s.zk.get().Isr; !slices.Equal(isr, []int32{2, 3}) {
		t.Fatalf("isr %v", isr)
	}
	s.assertIdentical(2, 3)
}

// pushReassigning is push with the reassignment's adding and removing
// replicas.
func (s *sim) pushReassigning(adding, removing []int32) {
	s.t.Helper()
	lai := s.zk.get()
	for _, id := range s.replicas {
		if !s.alive(id) {
			continue
		}
		st := PartitionState{TopicPartition: tp0, Replicas: s.replicas, Config: s.cfg, LeaderAndIsr: lai,
			AddingReplicas: adding, RemovingReplicas: removing}
		if err := s.mgr(id).ApplyPartitionStates([]PartitionState{st}); err != nil {
			s.t.Fatalf("broker %d: apply state: %v", id, err)
		}
	}
	s.check()
}
