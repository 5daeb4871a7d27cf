package zkcoord

import (
	"cmp"
	"maps"
	"slices"
	"sort"

	"github.com/kafkazk/broker/cluster"
)

// The session's cache: the registered brokers and each topic's config. The
// session goroutine fills it from watches; these methods serve it under
// s.mu without touching ZooKeeper, and return copies the caller owns.
// Partition states are not in it (see topicEntry): a broker serves
// metadata from the protocol's MetadataCache, which the controller's
// UpdateMetadata fills.

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

// liveBrokerRacks returns the registered brokers with their broker.rack
// ("" for none), sorted by id: what replica assignment places replicas on.
func (s *Session) liveBrokerRacks() []cluster.BrokerRack {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]cluster.BrokerRack, 0, len(s.brokers))
	for id, b := range s.brokers {
		br := cluster.BrokerRack{ID: id}
		if b.Rack != nil {
			br.Rack = *b.Rack
		}
		out = append(out, br)
	}
	slices.SortFunc(out, func(a, b cluster.BrokerRack) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// rackBrokerIDs returns the ids of brokers, in their order.
func rackBrokerIDs(brokers []cluster.BrokerRack) []int32 {
	ids := make([]int32, len(brokers))
	for i, b := range brokers {
		ids[i] = b.ID
	}
	return ids
}
