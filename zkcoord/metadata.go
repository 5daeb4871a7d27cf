package zkcoord

import (
	"maps"
	"slices"
	"sort"

	"github.com/kafkazk/broker/cluster"
)

// The metadata cache. The session goroutine fills it from watches; these
// methods serve it under s.mu without touching ZooKeeper, and return copies
// the caller owns. Together they satisfy protocol.Metadata.

// Brokers lists the registered brokers sorted by id, with the endpoints of
// their registration and Epoch = the registration's czxid.
func (s *Session) Brokers() []cluster.Broker {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]cluster.Broker, 0, len(s.brokers))
	for _, b := range s.brokers {
		out = append(out, b.Clone())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Broker returns broker id as registered, if it is.
func (s *Session) Broker(id int32) (cluster.Broker, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.brokers[id]
	if !ok {
		return cluster.Broker{}, false
	}
	return b.Clone(), true
}

// Topics lists every topic sorted by name, each with its partitions sorted.
func (s *Session) Topics() []cluster.TopicInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.topics))
	for t := range s.topics {
		names = append(names, t)
	}
	sort.Strings(names)
	out := make([]cluster.TopicInfo, 0, len(names))
	for _, t := range names {
		out = append(out, s.topicInfoLocked(t, s.topics[t]))
	}
	return out
}

// Topic returns one topic, or false if it does not exist.
func (s *Session) Topic(name string) (cluster.TopicInfo, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.topics[name]
	if !ok {
		return cluster.TopicInfo{}, false
	}
	return s.topicInfoLocked(name, e), true
}

// TopicConfig returns the topic's config overrides from /config/topics/<t>
// (empty if it has none), or false for an unknown topic.
func (s *Session) TopicConfig(name string) (map[string]string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.topics[name]
	if !ok {
		return nil, false
	}
	cfg := maps.Clone(e.config)
	if cfg == nil {
		cfg = map[string]string{}
	}
	return cfg, true
}

// topicInfoLocked copies one topic out of the cache. A partition without a
// readable state znode has leader -1, leader epoch -1 and ZkVersion -1.
// Caller holds s.mu.
func (s *Session) topicInfoLocked(name string, e *topicEntry) cluster.TopicInfo {
	ti := cluster.TopicInfo{
		Name:       name,
		Partitions: make([]cluster.PartitionInfo, 0, len(e.assignment)),
		Config:     maps.Clone(e.config),
		Internal:   cluster.IsInternalTopic(name),
	}
	if ti.Config == nil {
		ti.Config = map[string]string{}
	}
	for p, replicas := range e.assignment {
		pi := cluster.PartitionInfo{Partition: p, Replicas: slices.Clone(replicas)}
		if st, ok := e.states[p]; ok {
			st.Isr = slices.Clone(st.Isr)
			pi.State = st
		} else {
			pi.State = cluster.LeaderAndIsr{Leader: cluster.NoLeader, LeaderEpoch: -1, ControllerEpoch: -1, ZkVersion: -1}
		}
		for _, r := range replicas {
			if _, live := s.brokers[r]; !live {
				pi.Offline = append(pi.Offline, r)
			}
		}
		ti.Partitions = append(ti.Partitions, pi)
	}
	sort.Slice(ti.Partitions, func(i, j int) bool { return ti.Partitions[i].Partition < ti.Partitions[j].Partition })
	return ti
}

// liveBrokerIDs returns the registered broker ids, sorted.
func (s *Session) liveBrokerIDs() []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]int32, 0, len(s.brokers))
	for id := range s.brokers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
