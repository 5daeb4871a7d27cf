package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/group"
	"github.com/kafkazk/broker/partition"
	"github.com/kafkazk/broker/zkcoord"
)

// TestGroupCoordinatorFollowsAppliedState: the group coordinator loads and
// unloads a partition of __consumer_offsets as its replica applied the
// controller's requests, not as the requests said. A stale LeaderAndIsr
// (older leader epoch, ignored by the replica) neither unloads the groups
// of a partition this broker still leads nor starts a load of one it
// follows; a StopReplica of an older epoch leaves the groups; one that
// stops the replica unloads them.
func TestGroupCoordinatorFollowsAppliedState(t *testing.T) {
	log := zerolog.New(zerolog.NewTestWriter(t))
	replicas, err := partition.NewManager(partition.Config{BrokerID: 1, LogDirs: []string{t.TempDir()}, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = replicas.Close() })
	groups := group.New(group.Config{BrokerID: 1, NumPartitions: 1, InitialRebalanceDelay: -1,
		Log: offsetsLog{replicas}, Logger: log})
	t.Cleanup(func() { _ = groups.Close() })
	cp := &controlPlane{brokerID: 1, defaults: cluster.DefaultLogConfig(), session: &zkcoord.Session{},
		replicas: replicas, groups: groups, log: log}
	tp := cluster.TopicPartition{Topic: group.Topic, Partition: 0}

	leaderAndIsr := func(leader, epoch, zkVersion int32) {
		t.Helper()
		errs, err := cp.LeaderAndIsr(context.Background(), cluster.LeaderAndIsrRequest{Partitions: []cluster.PartitionAssignment{{
			TopicPartition: tp, Replicas: []int32{1, 2},
			LeaderAndIsr: cluster.LeaderAndIsr{Leader: leader, LeaderEpoch: epoch, Isr: []int32{leader}, ZkVersion: zkVersion},
		}}})
		if err != nil || errs[tp] != nil {
			t.Fatalf("LeaderAndIsr leader %d epoch %d: %v, %v", leader, epoch, errs, err)
		}
	}
	// coordinating reports FetchOffsets' verdict on the partition's group
	// once a load in progress has had time to finish.
	coordinating := func() error {
		deadline := time.Now().Add(2 * time.Second)
		for {
			_, err := groups.FetchOffsets("g", nil, false)
			if !errors.Is(err, group.ErrCoordinatorLoadInProgress) || time.Now().After(deadline) {
				return err
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	leaderAndIsr(1, 5, 0)
	if err := coordinating(); err != nil {
		t.Fatalf("leader in epoch 5: %v, want to coordinate", err)
	}
	leaderAndIsr(2, 4, 1) // stale: the replica still leads in epoch 5
	if err := coordinating(); err != nil {
		t.Fatalf("after a stale LeaderAndIsr naming broker 2: %v, want to coordinate still", err)
	}
	stop := func(epoch int32) map[cluster.TopicPartition]error {
		t.Helper()
		errs, err := cp.StopReplica(context.Background(), cluster.StopReplicaRequest{
			Partitions: []cluster.TopicPartition{tp}, LeaderEpochs: map[cluster.TopicPartition]int32{tp: epoch}})
		if err != nil {
			t.Fatal(err)
		}
		return errs
	}
	if errs := stop(4); !errors.Is(errs[tp], partition.ErrFencedLeaderEpoch) {
		t.Fatalf("StopReplica in epoch 4: %v, want ErrFencedLeaderEpoch", errs)
	}
	if err := coordinating(); err != nil {
		t.Fatalf("after a stale StopReplica: %v, want to coordinate still", err)
	}

	leaderAndIsr(2, 6, 2)
	if err := coordinating(); !errors.Is(err, group.ErrNotCoordinator) {
		t.Fatalf("follower in epoch 6: %v, want ErrNotCoordinator", err)
	}
	leaderAndIsr(1, 5, 3) // stale: the replica follows in epoch 6
	if err := coordinating(); !errors.Is(err, group.ErrNotCoordinator) {
		t.Fatalf("after a stale LeaderAndIsr naming this broker: %v, want ErrNotCoordinator", err)
	}

	leaderAndIsr(1, 7, 4)
	if err := coordinating(); err != nil {
		t.Fatalf("leader in epoch 7: %v, want to coordinate", err)
	}
	if errs := stop(7); errs[tp] != nil {
		t.Fatalf("StopReplica in epoch 7: %v", errs)
	}
	if err := coordinating(); !errors.Is(err, group.ErrNotCoordinator) {
		t.Fatalf("after the replica stopped: %v, want ErrNotCoordinator", err)
	}
}

// TestLeaderAndIsrTakesDefaultsChangedMeanwhile: a dynamic topic default
// that changes while a LeaderAndIsr opens a partition reaches it. The
// change is pushed to the hosted topics, which do not list the partition
// yet, and the state was built with the old default; LeaderAndIsr sees
// the defaults moved and applies the current config.
func TestLeaderAndIsrTakesDefaultsChangedMeanwhile(t *testing.T) {
	log := zerolog.New(zerolog.NewTestWriter(t))
	d, store, _ := newTestDynamic(t, "")
	d.attach(store)
	replicas, err := partition.NewManager(partition.Config{BrokerID: 3, LogDirs: []string{t.TempDir()}, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = replicas.Close() })
	cp := &controlPlane{brokerID: 3, defaults: cluster.DefaultLogConfig(), dyn: d, session: &zkcoord.Session{},
		replicas: replicas, log: log}
	cp.beforeApply = func() {
		store.set(cluster.BrokerDefaultEntity, map[string]string{"log.retention.ms": "1234"})
		d.reload(true)
	}
	tp := cluster.TopicPartition{Topic: "t", Partition: 0}
	errs, err := cp.LeaderAndIsr(context.Background(), cluster.LeaderAndIsrRequest{Partitions: []cluster.PartitionAssignment{{
		TopicPartition: tp, Replicas: []int32{3},
		LeaderAndIsr: cluster.LeaderAndIsr{Leader: 3, LeaderEpoch: 1, Isr: []int32{3}},
	}}})
	if err != nil || errs[tp] != nil {
		t.Fatalf("LeaderAndIsr: %v, %v", errs, err)
	}
	want := cp.topicConfig("t")
	if want.RetentionMs != 1234 {
		t.Fatalf("effective retention %d, want the new default", want.RetentionMs)
	}
	if n := replicas.UpdateConfig("t", want); n != 0 {
		t.Errorf("the partition opened during the change kept the old defaults (%d replica updated now)", n)
	}
}
