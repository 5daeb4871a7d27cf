package protocol

import (
	"context"
	"testing"
	"time"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
)

// TestFetchSessionAnswersPartitionAfterEpochBump: a follower in a session
// whose idle partition gets a new leader epoch with the same leader (a
// controlled shutdown elsewhere removing a replica from the ISR, a
// reassignment step) forgets the leader's HW and learns it only from an
// answer naming the partition. The leader must name it in its next
// answer although nothing changed in its log.
func TestFetchSessionAnswersPartitionAfterEpochBump(t *testing.T) {
	sw := &memStateWriters{states: map[cluster.TopicPartition]cluster.LeaderAndIsr{}}
	tp := cluster.TopicPartition{Topic: "i", Partition: 0}
	tp1 := cluster.TopicPartition{Topic: "i", Partition: 1}
	state := func(x cluster.TopicPartition, epoch, zk int32) partition.PartitionState {
		st := cluster.LeaderAndIsr{Leader: 1, LeaderEpoch: epoch, Isr: []int32{1, 2}, ControllerEpoch: 1, ZkVersion: zk}
		sw.states[x] = st
		return partition.PartitionState{TopicPartition: x, Replicas: []int32{1, 2, 3}, Config: cluster.DefaultLogConfig(), LeaderAndIsr: st}
	}
	leader := lagManager(t, 1, 10*time.Second, nil, sw)
	leader.BecomeLeaderOrFollower([]partition.PartitionState{state(tp, 1, 0), state(tp1, 1, 0)})
	b := startBroker(t, func(c *Config) { c.Replicas, c.LeaderEpochs = leader, leader })
	client := newBrokerClient(t, b)
	appendTo(t, leader, tp, "a", "b")
	fetch := func(off int64, epoch int32) (partition.FetchPartitionResult, bool) {
		t.Helper()
		resp, err := client.Fetch(context.Background(), 1, partition.FetchRequest{ReplicaID: 2, MaxWait: 50 * time.Millisecond, MinBytes: 1, MaxBytes: 1 << 20,
			Partitions: []partition.FetchPartition{
				{TopicPartition: tp, FetchOffset: off, CurrentLeaderEpoch: epoch, LogStartOffset: 0, MaxBytes: 1 << 20},
				{TopicPartition: tp1, FetchOffset: 0, CurrentLeaderEpoch: 1, LogStartOffset: 0, MaxBytes: 1 << 20}}})
		if err != nil {
			t.Fatal(err)
		}
		p, ok := resp.Partitions[tp]
		return p, ok
	}
	fetch(0, 1)
	fetch(2, 1) // reports LEO 2: the HW moves to 2
	var idle bool
	for range 5 {
		if _, ok := fetch(2, 1); !ok {
			idle = true
			break
		}
	}
	if !idle {
		t.Fatal("the idle partition is still named in every incremental answer: no session in use")
	}
	leader.BecomeLeaderOrFollower([]partition.PartitionState{state(tp, 2, 1)})
	p, ok := fetch(2, 2)
	if !ok {
		t.Fatal("after a leader epoch bump the idle partition is left out of the answer: the follower never relearns the HW")
	}
	if p.Err != nil || p.HighWatermark != 2 {
		t.Fatalf("after the bump: err %v, HW %d, want nil and 2", p.Err, p.HighWatermark)
	}
}
