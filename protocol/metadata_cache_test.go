package protocol

import (
	"fmt"
	"slices"
	"testing"

	"github.com/kafkazk/broker/cluster"
)

func cachePartition(topic string, p int32, leader int32) cluster.TopicPartitionInfo {
	return cluster.TopicPartitionInfo{Topic: topic, PartitionInfo: cluster.PartitionInfo{
		Partition: p, Replicas: []int32{1, 2, 3}, Offline: []int32{3},
		State: cluster.LeaderAndIsr{Leader: leader, LeaderEpoch: 1, Isr: []int32{1, 2}},
	}}
}

// TestMetadataCacheMergesAndSorts: updates merge partition by partition,
// out of order and with holes; a deleted partition (leader -2) goes, and
// a topic left with none; Topic lists partitions by id.
func TestMetadataCacheMergesAndSorts(t *testing.T) {
	c := NewMetadataCache("x")
	var ps []cluster.TopicPartitionInfo
	for _, p := range []int32{5, 0, 3, 1} {
		ps = append(ps, cachePartition("a", p, 1))
	}
	ps = append(ps, cachePartition("b", 0, 2))
	c.Apply(cluster.UpdateMetadataRequest{Partitions: ps})
	ids := func(topic string) []int32 {
		info, ok := c.Topic(topic)
		if !ok {
			return nil
		}
		var out []int32
		for _, p := range info.Partitions {
			out = append(out, p.Partition)
		}
		return out
	}
	if got := ids("a"); !slices.Equal(got, []int32{0, 1, 3, 5}) {
		t.Fatalf("a: %v", got)
	}
	// A dense topic after the hole is filled, and an update of one
	// partition keeps the others.
	c.Apply(cluster.UpdateMetadataRequest{Partitions: []cluster.TopicPartitionInfo{
		cachePartition("a", 2, 1), cachePartition("a", 4, 3), cachePartition("a", 0, 2)}})
	if got := ids("a"); !slices.Equal(got, []int32{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("a after filling: %v", got)
	}
	if info, _ := c.Topic("a"); info.Partitions[0].State.Leader != 2 || info.Partitions[4].State.Leader != 3 || info.Partitions[5].State.Leader != 1 {
		t.Fatalf("a leaders after the update: %+v", info.Partitions)
	}
	del := func(topic string, p int32) cluster.TopicPartitionInfo {
		d := cachePartition(topic, p, leaderDuringDelete)
		return d
	}
	c.Apply(cluster.UpdateMetadataRequest{Partitions: []cluster.TopicPartitionInfo{del("a", 0), del("a", 3), del("b", 0), del("nope", 0)}})
	if got := ids("a"); !slices.Equal(got, []int32{1, 2, 4, 5}) {
		t.Fatalf("a after deleting 0 and 3: %v", got)
	}
	if _, ok := c.Topic("b"); ok {
		t.Fatal("b still listed with no partitions")
	}
	if te, pe := c.HasPartition(cluster.TopicPartition{Topic: "a", Partition: 3}); !te || pe {
		t.Fatalf("HasPartition(a-3) = %v, %v after its deletion", te, pe)
	}
	if got := c.Topics(); len(got) != 1 || got[0].Name != "a" {
		t.Fatalf("Topics: %+v", got)
	}
	// Deleted and created again within one request: there.
	c.Apply(cluster.UpdateMetadataRequest{Partitions: []cluster.TopicPartitionInfo{del("c", 0), cachePartition("c", 0, 1)}})
	if got := ids("c"); !slices.Equal(got, []int32{0}) {
		t.Fatalf("c: %v", got)
	}
}

// TestMetadataCacheCopies: neither what Apply was given nor what Topic
// returned shares memory with the cache, and appending to a returned list
// does not write into another partition's.
func TestMetadataCacheCopies(t *testing.T) {
	c := NewMetadataCache("x")
	ps := []cluster.TopicPartitionInfo{cachePartition("a", 0, 1), cachePartition("a", 1, 2)}
	c.Apply(cluster.UpdateMetadataRequest{Partitions: ps})
	ps[0].Replicas[0], ps[0].State.Isr[0], ps[0].Offline[0] = 9, 9, 9
	info, _ := c.Topic("a")
	p0, p1 := info.Partitions[0], info.Partitions[1]
	if p0.Replicas[0] != 1 || p0.State.Isr[0] != 1 || p0.Offline[0] != 3 {
		t.Fatalf("the request's slices are shared: %+v", p0)
	}
	_ = append(p0.Replicas, 7)
	_ = append(p0.State.Isr, 7)
	if !slices.Equal(p0.State.Isr, []int32{1, 2}) || !slices.Equal(p0.Offline, []int32{3}) || !slices.Equal(p1.Replicas, []int32{1, 2, 3}) {
		t.Fatalf("an append to a returned list wrote into another: %+v %+v", p0, p1)
	}
	p0.Replicas[1] = 8
	if again, _ := c.Topic("a"); again.Partitions[0].Replicas[1] != 2 {
		t.Fatalf("Topic's result shares the cache's: %+v", again.Partitions[0])
	}
	var none cluster.PartitionInfo
	c.Apply(cluster.UpdateMetadataRequest{Partitions: []cluster.TopicPartitionInfo{{Topic: "n", PartitionInfo: none}}})
	if got, _ := c.Topic("n"); got.Partitions[0].Replicas != nil || got.Partitions[0].Offline != nil {
		t.Fatalf("nil lists came back as %+v", got.Partitions[0])
	}
}

// TestMetadataCacheTopicCostsItsOwnSize: Topic allocates the same for a
// topic of 10 partitions whether the cache holds 100 or 100,000
// partitions, and two allocations (the partitions, their lists) plus
// nothing per partition for a topic of 1,000.
func TestMetadataCacheTopicCostsItsOwnSize(t *testing.T) {
	allocs := func(partitions, topics int) float64 {
		c := NewMetadataCache("x")
		c.Apply(cluster.UpdateMetadataRequest{Partitions: benchPartitions(partitions, topics)})
		name := fmt.Sprintf("topic-%05d", topics/2)
		return testing.AllocsPerRun(20, func() {
			if _, ok := c.Topic(name); !ok {
				t.Fatal(name, "missing")
			}
		})
	}
	small, large := allocs(100, 10), allocs(100000, 10000)
	if small != large || large > 2 {
		t.Errorf("Topic of 10 partitions: %v allocations with 100 cached, %v with 100,000; want the same, at most 2", small, large)
	}
	if big := allocs(10000, 10); big > 2 {
		t.Errorf("Topic of 1,000 partitions: %v allocations, want at most 2", big)
	}
}
