package protocol

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
)

// These tests serve Metadata from a MetadataCache fed by hand, as the
// controller's UpdateMetadata feeds it in a broker, while the fake Admin
// writes "ZooKeeper": the two disagree until the test applies an update,
// as they do in a cluster until the controller has acted.

func withMetadata(m Metadata) brokerOption { return func(c *Config) { c.Metadata = m } }

// topicUpdate is an UpdateMetadata for partitions [0, n) of topic, led by
// leader (leaderDuringDelete drops them).
func topicUpdate(b *testBroker, topic string, n int32, leader int32) cluster.UpdateMetadataRequest {
	req := cluster.UpdateMetadataRequest{ControllerID: 1, ControllerEpoch: 1, LiveBrokers: []cluster.Broker{b.self()}}
	for p := int32(0); p < n; p++ {
		req.Partitions = append(req.Partitions, cluster.TopicPartitionInfo{Topic: topic, PartitionInfo: cluster.PartitionInfo{
			Partition: p, Replicas: []int32{1},
			State: cluster.LeaderAndIsr{Leader: leader, Isr: []int32{1}},
		}})
	}
	return req
}

// inCache is the answer to a request, and whether the topic was still in
// the metadata cache when the answer arrived.
type inCache[R any] struct {
	resp    R
	present bool
}

// TestDeleteTopicsWaitsForMetadata: DeleteTopics answers only once the
// topic has left the metadata this broker serves, as Kafka's
// DelayedDeleteTopics, so a client that deletes and then asks for metadata
// does not see the topic. A topic still there at timeout_ms answers
// REQUEST_TIMED_OUT, and timeout_ms 0 answers REQUEST_TIMED_OUT at once
// (Kafka's AdminManager.deleteTopics: "if timeout <= 0 ... return
// immediately").
func TestDeleteTopicsWaitsForMetadata(t *testing.T) {
	cache := NewMetadataCache("x")
	b := startBroker(t, withMetadata(cache))
	for _, name := range []string{"gone", "stays", "at-once"} {
		createTopic(t, b, name, 2)
		cache.Apply(topicUpdate(b, name, 2, 1))
	}
	deleteReq := func(timeoutMillis int32, names ...string) *kmsg.DeleteTopicsRequest {
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.Version, req.TimeoutMillis, req.TopicNames = 5, timeoutMillis, names
		return req
	}
	adminDeleted := func(name string) bool {
		b.cluster.mu.Lock()
		defer b.cluster.mu.Unlock()
		_, ok := b.cluster.topics[name]
		return !ok
	}

	t.Run("answers once the topic left the cache", func(t *testing.T) {
		c := b.dial(t)
		got := make(chan inCache[*kmsg.DeleteTopicsResponse], 1)
		go func() {
			resp := c.roundTrip(deleteReq(10000, "gone")).(*kmsg.DeleteTopicsResponse)
			_, present := cache.Topic("gone")
			got <- inCache[*kmsg.DeleteTopicsResponse]{resp, present}
		}()
		deadline := time.Now().Add(10 * time.Second)
		for !adminDeleted("gone") {
			if time.Now().After(deadline) {
				t.Fatal("Admin.DeleteTopic was never called")
			}
			time.Sleep(5 * time.Millisecond)
		}
		// Give a premature answer the time to arrive before the
		// controller's UpdateMetadata drops the topic.
		select {
		case r := <-got:
			t.Fatalf("answered %+v while the topic was still in the metadata cache (present=%v)", r.resp.Topics, r.present)
		case <-time.After(100 * time.Millisecond):
		}
		cache.Apply(topicUpdate(b, "gone", 2, leaderDuringDelete))
		select {
		case r := <-got:
			if r.present || len(r.resp.Topics) != 1 || r.resp.Topics[0].ErrorCode != 0 {
				t.Fatalf("answered %+v, topic in cache %v", r.resp.Topics, r.present)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no answer after the topic left the cache")
		}
	})
	t.Run("times out while the topic is still in the cache", func(t *testing.T) {
		resp := b.dial(t).roundTrip(deleteReq(100, "stays", "missing")).(*kmsg.DeleteTopicsResponse)
		if rt := resp.Topics[0]; rt.ErrorCode != kerr.RequestTimedOut.Code || rt.ErrorMessage == nil {
			t.Fatalf("still in the cache at timeout: %+v", rt)
		}
		if rt := resp.Topics[1]; rt.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("unknown topic: %+v", rt)
		}
	})
	t.Run("timeout 0 answers at once", func(t *testing.T) {
		start := time.Now()
		resp := b.dial(t).roundTrip(deleteReq(0, "at-once")).(*kmsg.DeleteTopicsResponse)
		if rt := resp.Topics[0]; rt.ErrorCode != kerr.RequestTimedOut.Code {
			t.Fatalf("timeout 0: %+v", rt)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("timeout 0 took %v", d)
		}
		if !adminDeleted("at-once") {
			t.Fatal("timeout 0 did not delete the topic")
		}
	})
}

// TestCreateTopicsWaitsForMetadata: CreateTopics answers once every
// partition of the new topic has a leader in the metadata this broker
// serves (Kafka's DelayedCreateTopics), woken by the cache's change rather
// than by polling; timeout_ms 0 answers REQUEST_TIMED_OUT at once for a
// topic it created, as Kafka's AdminManager.createTopics, and the
// validation result for ValidateOnly.
func TestCreateTopicsWaitsForMetadata(t *testing.T) {
	cache := NewMetadataCache("x")
	b := startBroker(t, withMetadata(cache))
	createReq := func(timeoutMillis int32, validateOnly bool, name string) *kmsg.CreateTopicsRequest {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version, req.TimeoutMillis, req.ValidateOnly = 5, timeoutMillis, validateOnly
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 2, 1
		req.Topics = append(req.Topics, rt)
		return req
	}

	t.Run("answers once the partitions have leaders", func(t *testing.T) {
		c := b.dial(t)
		got := make(chan inCache[*kmsg.CreateTopicsResponse], 1)
		go func() {
			resp := c.roundTrip(createReq(10000, false, "new")).(*kmsg.CreateTopicsResponse)
			_, present := cache.Topic("new")
			got <- inCache[*kmsg.CreateTopicsResponse]{resp, present}
		}()
		select {
		case r := <-got:
			t.Fatalf("answered %+v before the topic reached the metadata cache (present=%v)", r.resp.Topics, r.present)
		case <-time.After(100 * time.Millisecond):
		}
		cache.Apply(topicUpdate(b, "new", 1, 1))  // one partition only: not yet
		cache.Apply(topicUpdate(b, "new", 2, -1)) // both, leaderless: not yet
		select {
		case r := <-got:
			t.Fatalf("answered %+v before every partition had a leader", r.resp.Topics)
		case <-time.After(100 * time.Millisecond):
		}
		start := time.Now()
		cache.Apply(topicUpdate(b, "new", 2, 1))
		select {
		case r := <-got:
			if !r.present || r.resp.Topics[0].ErrorCode != 0 {
				t.Fatalf("answered %+v, topic in cache %v", r.resp.Topics, r.present)
			}
			t.Logf("answered %v after the update", time.Since(start))
		case <-time.After(10 * time.Second):
			t.Fatal("no answer after the partitions got leaders")
		}
	})
	t.Run("timeout 0 answers at once", func(t *testing.T) {
		resp := b.dial(t).roundTrip(createReq(0, false, "at-once")).(*kmsg.CreateTopicsResponse)
		if rt := resp.Topics[0]; rt.ErrorCode != kerr.RequestTimedOut.Code {
			t.Fatalf("timeout 0: %+v", rt)
		}
		if _, err := b.cluster.TopicConfig("at-once"); err != nil {
			t.Fatalf("timeout 0 did not create the topic: %v", err)
		}
		resp = b.dial(t).roundTrip(createReq(0, true, "validated")).(*kmsg.CreateTopicsResponse)
		if rt := resp.Topics[0]; rt.ErrorCode != 0 {
			t.Fatalf("timeout 0, validate only: %+v", rt)
		}
	})
	t.Run("times out without leaders", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp := b.dial(t).roundTrip(createReq(100, false, "leaderless")).(*kmsg.CreateTopicsResponse)
		if rt := resp.Topics[0]; rt.ErrorCode != kerr.RequestTimedOut.Code {
			t.Fatalf("leaderless at timeout: %+v", rt)
		}
		if err := ctx.Err(); errors.Is(err, context.DeadlineExceeded) {
			t.Fatal("the 100 ms timeout took 10 s")
		}
	})
}
