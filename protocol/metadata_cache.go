package protocol

import (
	"slices"
	"sort"
	"sync"

	"github.com/kafkazk/broker/cluster"
)

// leaderDuringDelete is the leader id the controller sends in
// UpdateMetadata for a partition of a topic being deleted (Kafka's
// LeaderAndIsr.LeaderDuringDelete): the cache drops the partition.
const leaderDuringDelete int32 = -2

// MetadataCache is a broker's view of the cluster built only from the
// controller's UpdateMetadata requests, as Kafka's MetadataCache is. It
// implements Metadata. Safe for concurrent use; every method copies in
// and out, so callers never share its slices.
type MetadataCache struct {
	clusterID string

	mu           sync.RWMutex
	controllerID int32
	brokers      map[int32]cluster.Broker
	topics       map[string]map[int32]cluster.PartitionInfo
	changed      chan struct{} // closed by the next Apply, then replaced
}

// MetadataNotifier is a capability beside Metadata: Changed returns a
// channel closed at the next change of what Metadata answers. Requests
// that wait for the metadata to show something (CreateTopics,
// CreatePartitions and DeleteTopics, as Kafka's delayed operations) take
// the channel, check, and wait on it; with a Metadata that does not
// implement it they check every 20 ms. MetadataCache implements it.
type MetadataNotifier interface {
	Changed() <-chan struct{}
}

// NewMetadataCache returns an empty cache: no brokers, no topics, and no
// controller (-1).
func NewMetadataCache(clusterID string) *MetadataCache {
	return &MetadataCache{
		clusterID:    clusterID,
		controllerID: -1,
		brokers:      make(map[int32]cluster.Broker),
		topics:       make(map[string]map[int32]cluster.PartitionInfo),
		changed:      make(chan struct{}),
	}
}

// Changed returns a channel closed by the next Apply.
func (c *MetadataCache) Changed() <-chan struct{} {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.changed
}

// Apply applies one UpdateMetadata request. The live brokers and the
// controller id are replaced wholesale; the partition states it carries
// are merged in, because an update may cover only some partitions. A
// partition whose leader is -2 (deleted) is removed, and a topic left
// without partitions disappears. Apply does not check the controller
// epoch: the server has already fenced the request. It closes the channel
// Changed returned, waking the requests waiting on the metadata.
func (c *MetadataCache) Apply(req cluster.UpdateMetadataRequest) {
	brokers := make(map[int32]cluster.Broker, len(req.LiveBrokers))
	for _, b := range req.LiveBrokers {
		brokers[b.ID] = b.Clone()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	close(c.changed)
	c.changed = make(chan struct{})
	c.controllerID = req.ControllerID
	c.brokers = brokers
	for _, p := range req.Partitions {
		parts := c.topics[p.Topic]
		if p.State.Leader == leaderDuringDelete {
			if parts != nil {
				delete(parts, p.Partition)
				if len(parts) == 0 {
					delete(c.topics, p.Topic)
				}
			}
			continue
		}
		if parts == nil {
			parts = make(map[int32]cluster.PartitionInfo)
			c.topics[p.Topic] = parts
		}
		parts[p.Partition] = copyPartition(p.PartitionInfo)
	}
}

// ClusterID returns the id given to NewMetadataCache.
func (c *MetadataCache) ClusterID() string { return c.clusterID }

// ControllerID is the controller of the last update, or -1 before one.
func (c *MetadataCache) ControllerID() int32 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.controllerID
}

// Broker returns one live broker.
func (c *MetadataCache) Broker(id int32) (cluster.Broker, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	b, ok := c.brokers[id]
	if !ok {
		return cluster.Broker{}, false
	}
	return b.Clone(), true
}

// Brokers lists the live brokers sorted by id.
func (c *MetadataCache) Brokers() []cluster.Broker {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]cluster.Broker, 0, len(c.brokers))
	for _, b := range c.brokers {
		out = append(out, b.Clone())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Topics lists every topic sorted by name, partitions sorted by id.
func (c *MetadataCache) Topics() []cluster.TopicInfo {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]cluster.TopicInfo, 0, len(c.topics))
	for name, parts := range c.topics {
		out = append(out, topicInfoLocked(name, parts))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Topic returns one topic with its partitions sorted by id.
func (c *MetadataCache) Topic(name string) (cluster.TopicInfo, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	parts, ok := c.topics[name]
	if !ok {
		return cluster.TopicInfo{}, false
	}
	return topicInfoLocked(name, parts), true
}

// HasPartition reports whether tp's topic is in the cache, and whether tp
// is, copying nothing (PartitionLookup).
func (c *MetadataCache) HasPartition(tp cluster.TopicPartition) (topicExists, partitionExists bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	parts, ok := c.topics[tp.Topic]
	if !ok {
		return false, false
	}
	_, ok = parts[tp.Partition]
	return true, ok
}

var (
	_ Metadata         = (*MetadataCache)(nil)
	_ PartitionLookup  = (*MetadataCache)(nil)
	_ MetadataNotifier = (*MetadataCache)(nil)
)

// topicInfoLocked copies one topic out. Caller holds c.mu. UpdateMetadata
// carries no topic configs, so Config is nil.
func topicInfoLocked(name string, parts map[int32]cluster.PartitionInfo) cluster.TopicInfo {
	t := cluster.TopicInfo{Name: name, Internal: cluster.IsInternalTopic(name), Partitions: make([]cluster.PartitionInfo, 0, len(parts))}
	for _, p := range parts {
		t.Partitions = append(t.Partitions, copyPartition(p))
	}
	sort.Slice(t.Partitions, func(i, j int) bool { return t.Partitions[i].Partition < t.Partitions[j].Partition })
	return t
}

func copyPartition(p cluster.PartitionInfo) cluster.PartitionInfo {
	p.Replicas = slices.Clone(p.Replicas)
	p.State.Isr = slices.Clone(p.State.Isr)
	p.Offline = slices.Clone(p.Offline)
	return p
}
