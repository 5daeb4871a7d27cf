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
//
// It is indexed by topic, and each topic keeps its partitions sorted by
// id, so that answering for a few topics costs what those topics hold,
// not what the cluster holds: Topic copies one topic out with two
// allocations, whatever its size, and sorts nothing. Apply costs what the
// update carries plus, for each topic it touches, that topic's size.
type MetadataCache struct {
	clusterID string

	mu           sync.RWMutex
	controllerID int32
	brokers      map[int32]cluster.Broker
	topics       map[string]*cachedTopic
	changed      chan struct{} // closed by the next Apply, then replaced
}

// cachedTopic is one topic of the cache: its partitions by id, and the
// same sorted by id (rebuilt by Apply for each topic it touched). The
// partitions' slices are the cache's own and never written after Apply.
type cachedTopic struct {
	byID   map[int32]cluster.PartitionInfo
	sorted []cluster.PartitionInfo
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
		topics:       make(map[string]*cachedTopic),
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
	// One allocation holds the replica, ISR and offline lists of every
	// partition the request carries.
	total := 0
	for _, p := range req.Partitions {
		total += len(p.Replicas) + len(p.State.Isr) + len(p.Offline)
	}
	arena := make([]int32, 0, total)
	c.mu.Lock()
	defer c.mu.Unlock()
	close(c.changed)
	c.changed = make(chan struct{})
	c.controllerID = req.ControllerID
	c.brokers = brokers
	var touched map[string]*cachedTopic
	if len(req.Partitions) > 0 {
		touched = map[string]*cachedTopic{}
	}
	var last *cachedTopic // requests come grouped by topic
	lastName := ""
	for _, p := range req.Partitions {
		t := last
		if t == nil || p.Topic != lastName {
			t = c.topics[p.Topic]
		}
		if p.State.Leader == leaderDuringDelete {
			if t != nil {
				delete(t.byID, p.Partition)
				touched[p.Topic] = t
			}
			last, lastName = t, p.Topic
			continue
		}
		if t == nil {
			t = &cachedTopic{byID: make(map[int32]cluster.PartitionInfo)}
			c.topics[p.Topic] = t
		}
		touched[p.Topic] = t
		last, lastName = t, p.Topic
		info := p.PartitionInfo
		info.Replicas, arena = arenaClone(arena, p.Replicas)
		info.State.Isr, arena = arenaClone(arena, p.State.Isr)
		info.Offline, arena = arenaClone(arena, p.Offline)
		t.byID[p.Partition] = info
	}
	for name, t := range touched {
		if len(t.byID) == 0 {
			delete(c.topics, name)
			continue
		}
		t.sorted = sortedPartitions(t.byID, t.sorted)
	}
}

// arenaClone appends s to arena and returns the copy, capped so that
// nothing appended to it can reach a neighbour; nil stays nil.
func arenaClone(arena, s []int32) ([]int32, []int32) {
	if s == nil {
		return nil, arena
	}
	start := len(arena)
	arena = append(arena, s...)
	return arena[start:len(arena):len(arena)], arena
}

// sortedPartitions lists byID sorted by partition id, reusing buf's
// memory. Partition ids are usually 0..n-1: then each goes to its index
// and nothing is sorted.
func sortedPartitions(byID map[int32]cluster.PartitionInfo, buf []cluster.PartitionInfo) []cluster.PartitionInfo {
	n := len(byID)
	if cap(buf) >= n && cap(buf) <= 2*n {
		buf = buf[:n]
	} else {
		buf = make([]cluster.PartitionInfo, n)
	}
	dense := true
	for id := range byID {
		if id < 0 || int(id) >= n {
			dense = false
			break
		}
	}
	if dense {
		for id, p := range byID {
			buf[id] = p
		}
		return buf
	}
	buf = buf[:0]
	for _, p := range byID {
		buf = append(buf, p)
	}
	slices.SortFunc(buf, func(a, b cluster.PartitionInfo) int { return int(a.Partition) - int(b.Partition) })
	return buf
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
	for name, t := range c.topics {
		out = append(out, topicInfoLocked(name, t))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Topic returns one topic with its partitions sorted by id.
func (c *MetadataCache) Topic(name string) (cluster.TopicInfo, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	t, ok := c.topics[name]
	if !ok {
		return cluster.TopicInfo{}, false
	}
	return topicInfoLocked(name, t), true
}

// HasPartition reports whether tp's topic is in the cache, and whether tp
// is, copying nothing (PartitionLookup).
func (c *MetadataCache) HasPartition(tp cluster.TopicPartition) (topicExists, partitionExists bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	t, ok := c.topics[tp.Topic]
	if !ok {
		return false, false
	}
	_, ok = t.byID[tp.Partition]
	return true, ok
}

var (
	_ Metadata         = (*MetadataCache)(nil)
	_ PartitionLookup  = (*MetadataCache)(nil)
	_ MetadataNotifier = (*MetadataCache)(nil)
)

// topicInfoLocked copies one topic out: its partitions in one slice and
// their replica, ISR and offline lists in another. Caller holds c.mu.
// UpdateMetadata carries no topic configs, so Config is nil.
func topicInfoLocked(name string, t *cachedTopic) cluster.TopicInfo {
	total := 0
	for i := range t.sorted {
		p := &t.sorted[i]
		total += len(p.Replicas) + len(p.State.Isr) + len(p.Offline)
	}
	arena := make([]int32, 0, total)
	parts := make([]cluster.PartitionInfo, len(t.sorted))
	for i, p := range t.sorted {
		p.Replicas, arena = arenaClone(arena, p.Replicas)
		p.State.Isr, arena = arenaClone(arena, p.State.Isr)
		p.Offline, arena = arenaClone(arena, p.Offline)
		parts[i] = p
	}
	return cluster.TopicInfo{Name: name, Internal: cluster.IsInternalTopic(name), Partitions: parts}
}
