package cluster

import (
	"fmt"
	"slices"
)

// TopicPartition names one partition of one topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// IsInternalTopic reports whether topic is one of Kafka's internal topics
// (Topic.isInternal): flagged in Metadata, and its records cannot be
// deleted by DeleteRecords.
func IsInternalTopic(topic string) bool {
	return topic == "__consumer_offsets" || topic == "__transaction_state"
}

// NoLeader is the leader id of a partition that has no live leader.
const NoLeader int32 = -1

// Endpoint is one advertised listener of a broker.
type Endpoint struct {
	Listener         string // listener name, e.g. PLAINTEXT or EXTERNAL
	SecurityProtocol string // PLAINTEXT (the only protocol served)
	Host             string
	Port             int32
}

// Broker is one registered broker as clients should reach it.
type Broker struct {
	ID        int32
	Endpoints []Endpoint // advertised listeners, in configuration order
	Rack      *string
	// Epoch is the broker epoch: the czxid of its registration znode.
	Epoch int64
}

// Clone returns b with its own copies of the endpoints and the rack, so a
// cache can hand it out and keep its own.
func (b Broker) Clone() Broker {
	b.Endpoints = slices.Clone(b.Endpoints)
	if b.Rack != nil {
		r := *b.Rack
		b.Rack = &r
	}
	return b
}

// Endpoint returns the broker's endpoint for the named listener.
func (b Broker) Endpoint(listener string) (Endpoint, bool) {
	for _, e := range b.Endpoints {
		if e.Listener == listener {
			return e, true
		}
	}
	return Endpoint{}, false
}

// LeaderAndIsr is the replication state of one partition as stored in its
// state znode: who leads, in which leader epoch, and which replicas are in
// sync. ZkVersion is the state znode's data version, used for conditional
// writes; it is -1 when unknown.
type LeaderAndIsr struct {
	Leader          int32
	LeaderEpoch     int32
	Isr             []int32
	ControllerEpoch int32
	ZkVersion       int32
}

// PartitionInfo is everything the metadata layer knows of one partition.
type PartitionInfo struct {
	Partition int32
	Replicas  []int32 // assignment order; element 0 is the preferred leader
	State     LeaderAndIsr
	// Offline lists replicas on brokers that are not registered.
	Offline []int32
}

// TopicInfo is one topic with its partitions sorted by partition id.
type TopicInfo struct {
	Name       string
	Partitions []PartitionInfo
	Config     map[string]string // topic-level overrides only
	Internal   bool
}
