package protocol

import (
	"context"
	"fmt"
	"net"
	"testing"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
)

// cacheControlPlane applies UpdateMetadata to a real MetadataCache and
// accepts every LeaderAndIsr, as cmd/broker's would with no replica work:
// it isolates the protocol's and the cache's costs.
type cacheControlPlane struct{ meta *MetadataCache }

func (c cacheControlPlane) LeaderAndIsr(context.Context, cluster.LeaderAndIsrRequest) (map[cluster.TopicPartition]error, error) {
	return nil, nil
}
func (c cacheControlPlane) StopReplica(context.Context, cluster.StopReplicaRequest) (map[cluster.TopicPartition]error, error) {
	return nil, nil
}
func (c cacheControlPlane) UpdateMetadata(_ context.Context, req cluster.UpdateMetadataRequest) error {
	c.meta.Apply(req)
	return nil
}
func (c cacheControlPlane) ControlledShutdown(context.Context, int32, int64) ([]cluster.TopicPartition, error) {
	return nil, nil
}

var benchBrokers = []cluster.Broker{
	{ID: 1, Endpoints: []cluster.Endpoint{{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: "127.0.0.1", Port: 9092}}},
	{ID: 2, Endpoints: []cluster.Endpoint{{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: "127.0.0.1", Port: 9093}}},
	{ID: 3, Endpoints: []cluster.Endpoint{{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: "127.0.0.1", Port: 9094}}},
}

// benchControlConn is a connection of a server whose Metadata is meta and
// whose ControlPlane applies UpdateMetadata to it.
func benchControlConn(b *testing.B, meta *MetadataCache) *conn {
	s := NewServer(Config{BrokerID: 1, Replicas: &fixedReplicas{changed: make(chan struct{})}, Metadata: meta,
		ControlPlane: cacheControlPlane{meta}, Log: zerolog.Nop()})
	p1, p2 := net.Pipe()
	b.Cleanup(func() {
		p2.Close()
		p1.Close()
		s.Close()
	})
	return s.newConn(p1, "PLAINTEXT")
}

// benchPartitions is n partitions over replicas 1-3 spread evenly over
// topics topics.
func benchPartitions(n, topics int) []cluster.TopicPartitionInfo {
	out := make([]cluster.TopicPartitionInfo, 0, n)
	per := n / topics
	for i := range n {
		out = append(out, cluster.TopicPartitionInfo{Topic: fmt.Sprintf("topic-%05d", i/per), PartitionInfo: cluster.PartitionInfo{
			Partition: int32(i % per), Replicas: []int32{1, 2, 3},
			State: cluster.LeaderAndIsr{Leader: int32(i%3 + 1), LeaderEpoch: 1, Isr: []int32{1, 2, 3}, ControllerEpoch: 1, ZkVersion: 1},
		}})
	}
	return out
}

// BenchmarkControlRequests runs whole controller requests through a
// connection's handler (decode, fencing, the control plane, encode):
// a LeaderAndIsr and an UpdateMetadata of n partitions in 100 topics.
//
//	go test -run='^$' -bench=ControlRequests -benchmem ./protocol/
func BenchmarkControlRequests(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		parts := benchPartitions(n, 100)
		b.Run(fmt.Sprintf("LeaderAndIsr/partitions=%d", n), func(b *testing.B) {
			c := benchControlConn(b, NewMetadataCache("bench"))
			req := cluster.LeaderAndIsrRequest{ControllerID: 1, ControllerEpoch: 1, BrokerEpoch: -1, LiveLeaders: benchBrokers}
			for _, p := range parts {
				req.Partitions = append(req.Partitions, cluster.PartitionAssignment{TopicPartition: cluster.TopicPartition{Topic: p.Topic, Partition: p.Partition},
					Replicas: p.Replicas, LeaderAndIsr: p.State, IsNew: true})
			}
			kreq, err := leaderAndIsrToKmsg(req, 4, "PLAINTEXT")
			if err != nil {
				b.Fatal(err)
			}
			frame := benchFrame(kreq)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := benchHandle(c, frame); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("UpdateMetadata/partitions=%d", n), func(b *testing.B) {
			meta := NewMetadataCache("bench")
			c := benchControlConn(b, meta)
			frame := benchFrame(updateMetadataToKmsg(cluster.UpdateMetadataRequest{ControllerID: 1, ControllerEpoch: 1,
				BrokerEpoch: -1, LiveBrokers: benchBrokers, Partitions: parts}, 6))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := benchHandle(c, frame); err != nil {
					b.Fatal(err)
				}
			}
			if got := len(meta.Topics()); got != 100 {
				b.Fatalf("%d topics in the cache, want 100", got)
			}
		})
	}
}

// BenchmarkMetadataOneTopic is a Metadata v9 request naming one topic
// while the cache holds partitions partitions in topics topics: its cost
// should follow the asked topic's partitions, not the cache's.
//
//	go test -run='^$' -bench=MetadataOneTopic -benchmem ./protocol/
func BenchmarkMetadataOneTopic(b *testing.B) {
	for _, tc := range []struct{ partitions, topics int }{{10000, 10}, {10000, 1000}, {100000, 10000}} {
		b.Run(fmt.Sprintf("partitions=%d/topics=%d", tc.partitions, tc.topics), func(b *testing.B) {
			meta := NewMetadataCache("bench")
			meta.Apply(cluster.UpdateMetadataRequest{ControllerID: 1, ControllerEpoch: 1, LiveBrokers: benchBrokers,
				Partitions: benchPartitions(tc.partitions, tc.topics)})
			c := benchControlConn(b, meta)
			req := kmsg.NewPtrMetadataRequest()
			req.Version = 9
			rt := kmsg.NewMetadataRequestTopic()
			name := fmt.Sprintf("topic-%05d", tc.topics/2)
			rt.Topic = &name
			req.Topics = append(req.Topics, rt)
			frame := benchFrame(req)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := benchHandle(c, frame); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
