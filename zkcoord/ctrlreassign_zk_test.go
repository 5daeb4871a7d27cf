package zkcoord

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/internal/zktest"
)

// TestZKReassignAndElect drives reassignment and elections through three
// Sessions on a real ZooKeeper: the API calls on the controller (and
// NOT_CONTROLLER elsewhere), the ISR change notification that completes a
// reassignment, and the watches on /admin/reassign_partitions and
// /admin/preferred_replica_election that 2.x tools write.
func TestZKReassignAndElect(t *testing.T) {
	srv := zktest.Start(t)
	sender := &fakeSender{}
	sessions := []*Session{
		startBrokerWith(t, srv.Connect(), 1, sender),
		startBrokerWith(t, srv.Connect(), 2, sender),
		startBrokerWith(t, srv.Connect(), 3, sender),
	}
	var ctrl, other *Session
	eventually(t, 10*time.Second, func() error {
		ctrl, other = nil, nil
		for _, s := range sessions {
			if len(s.Brokers()) != 3 {
				return fmt.Errorf("broker %d sees %d brokers", s.cfg.BrokerID, len(s.Brokers()))
			}
			if s.IsController() {
				ctrl = s
			} else {
				other = s
			}
		}
		if ctrl == nil {
			return errors.New("no controller")
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := ctrl.CreateTopic(ctx, TopicSpec{Name: "mv", Assignment: map[int32][]int32{0: {1, 2}}, NumPartitions: -1, ReplicationFactor: -1}); err != nil {
		t.Fatal(err)
	}
	raw := rawConn(t, srv.Connect())
	tp := cluster.TopicPartition{Topic: "mv", Partition: 0}
	mustGet(t, raw, partitionStatePath("mv", 0))

	if _, err := other.AlterPartitionReassignments(ctx, map[cluster.TopicPartition][]int32{tp: {2, 3}}); !errors.Is(err, cluster.ErrNotController) {
		t.Fatalf("alter on broker %d (not the controller): %v", other.cfg.BrokerID, err)
	}
	if _, err := other.ElectLeaders(ctx, cluster.ElectPreferred, nil); !errors.Is(err, cluster.ErrNotController) {
		t.Fatalf("elect on a broker that is not the controller: %v", err)
	}
	res, err := ctrl.AlterPartitionReassignments(ctx, map[cluster.TopicPartition][]int32{tp: {2, 3}})
	if err != nil || res[tp] != nil {
		t.Fatalf("alter: %v %v", res, err)
	}
	topicIs := func(want string) func() error {
		return func() error {
			data, _, err := raw.Get(topicPath("mv"))
			if err != nil {
				return err
			}
			if string(data) != want {
				return fmt.Errorf("topic znode %s, want %s", data, want)
			}
			return nil
		}
	}
	eventually(t, 10*time.Second, topicIs(`{"version":2,"partitions":{"0":[2,3,1]},"adding_replicas":{"0":[3]},"removing_replicas":{"0":[1]}}`))
	// Kafka refuses to add partitions while one is being reassigned.
	if _, err := other.CreatePartitions(ctx, PartitionSpec{Topic: "mv", Count: 2}); !errors.Is(err, cluster.ErrReassignmentInProgress) {
		t.Fatalf("create partitions during a reassignment: %v", err)
	}
	list, err := ctrl.ListPartitionReassignments(ctx, nil)
	if err != nil || len(list) != 1 || !slices.Equal(list[0].Replicas, []int32{2, 3, 1}) || !slices.Equal(list[0].AddingReplicas, []int32{3}) {
		t.Fatalf("list: %+v %v", list, err)
	}

	// The leader (1) lets 3 in and notifies: the reassignment completes,
	// 2 leads (1 is not in the target) and 1 is told to delete its replica.
	leaderAddsToIsr := func(isr ...int32) {
		t.Helper()
		data, st, err := raw.Get(partitionStatePath("mv", 0))
		if err != nil {
			t.Fatal(err)
		}
		s, err := decodePartitionState(data, st.Version)
		if err != nil {
			t.Fatal(err)
		}
		s.Isr = isr
		if _, err := raw.Set(partitionStatePath("mv", 0), encodePartitionState(s), st.Version); err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Create(isrChangeNotificationSeqPrefix, encodeIsrChangeNotification([]cluster.TopicPartition{tp}), zk.FlagSequence); err != nil {
			t.Fatal(err)
		}
	}
	leaderAddsToIsr(1, 2, 3)
	eventually(t, 10*time.Second, topicIs(`{"version":2,"partitions":{"0":[2,3]},"adding_replicas":{},"removing_replicas":{}}`))
	st, err := stateOf(raw, "mv", 0)
	if err != nil || st.Leader != 2 || !slices.Equal(st.Isr, []int32{2, 3}) {
		t.Fatalf("state after reassignment: %+v %v", st, err)
	}
	eventually(t, 10*time.Second, func() error {
		sender.mu.Lock()
		defer sender.mu.Unlock()
		for _, s := range sender.stop {
			if s.to.ID == 1 && s.req.DeletePartitions && slices.Contains(s.req.Partitions, tp) {
				return nil
			}
		}
		return errors.New("broker 1 not told to delete mv-0")
	})

	// A 2.x tool writes /admin/reassign_partitions: back to 3,1.
	if _, err := raw.Create(reassignPartitionsPath, []byte(`{"version":1,"partitions":[{"topic":"mv","partition":0,"replicas":[3,1]}]}`), 0); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, topicIs(`{"version":2,"partitions":{"0":[3,1,2]},"adding_replicas":{"0":[1]},"removing_replicas":{"0":[2]}}`))
	leaderAddsToIsr(2, 3, 1)
	eventually(t, 10*time.Second, topicIs(`{"version":2,"partitions":{"0":[3,1]},"adding_replicas":{},"removing_replicas":{}}`))
	eventually(t, 10*time.Second, func() error {
		if ok, _, err := raw.Exists(reassignPartitionsPath); err != nil || ok {
			return fmt.Errorf("%s still there (%v)", reassignPartitionsPath, err)
		}
		return nil
	})
	// 3 leads (2 was not in the target); its preferred replica, 3, does.
	if st, err := stateOf(raw, "mv", 0); err != nil || st.Leader != 3 {
		t.Fatalf("state after the znode's reassignment: %+v %v", st, err)
	}
	el, err := ctrl.ElectLeaders(ctx, cluster.ElectPreferred, []cluster.TopicPartition{tp})
	if err != nil || !errors.Is(el[tp], cluster.ErrElectionNotNeeded) {
		t.Fatalf("preferred election: %v %v", el, err)
	}

	// /admin/preferred_replica_election is read and deleted.
	if _, err := raw.Create(preferredReplicaElectionPath, encodePreferredElection([]cluster.TopicPartition{tp}), 0); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() error {
		if ok, _, err := raw.Exists(preferredReplicaElectionPath); err != nil || ok {
			return fmt.Errorf("%s still there (%v)", preferredReplicaElectionPath, err)
		}
		return nil
	})
}
