package protocol

// Incremental fetch sessions (KIP-227), follower side: Kafka's
// FetchSessionHandler, one per leader the BrokerClient fetches from.

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
)

// fetchSessionHandler is the follower's side of its session with one
// leader. It knows what the leader's session holds for each partition
// (the request data of the last fetch that succeeded) and the next
// epoch; build turns the fetcher's full wish list into a full or an
// incremental request, and the outcome of the round trip moves the
// handler on (handled, failed).
//
// A full fetch (epoch 0) names every partition; it creates a session when
// the leader answers a session id (SessionID 0: the leader's cache had no
// slot, and the next fetch is full again). An incremental one (epoch >= 1)
// names only the partitions whose fetch offset, log start offset, leader
// epoch or max bytes changed, and lists in ForgottenTopics those no longer
// wanted. When a fetch fails as a whole (FETCH_SESSION_ID_NOT_FOUND,
// INVALID_FETCH_SESSION_EPOCH, a connection error), the next one is full:
// with the old session id and epoch 0 after an epoch error or a lost
// answer (the leader closes that session and opens a new one), with id 0
// when the leader no longer knows the session.
type fetchSessionHandler struct {
	mu    sync.Mutex // one fetch at a time: held from build to handled/failed
	id    int32      // the session, or invalidSessionID
	epoch int32      // the epoch of the next fetch; initialEpoch for a full one
	// parts is what the leader's session holds: the request data of each
	// partition as of the last fetch that succeeded.
	parts map[cluster.TopicPartition]partition.FetchPartition

	// The fetch in flight, adopted by handled: a full fetch's wish list,
	// or an incremental one's changed and forgotten partitions.
	pending        []partition.FetchPartition
	pendingChanged []partition.FetchPartition
	pendingGone    []cluster.TopicPartition

	// last is a copy of the wish list of the last fetch that succeeded,
	// which parts holds, in its order (valid while lastOK); wish is this
	// fetch's, the caller's slice. A fetcher asks for the same partitions
	// in the same order round after round, so build compares position by
	// position and looks nothing up in parts while that holds.
	last   []partition.FetchPartition
	lastOK bool
	wish   []partition.FetchPartition
}

func newFetchSessionHandler() *fetchSessionHandler {
	return &fetchSessionHandler{parts: map[cluster.TopicPartition]partition.FetchPartition{}}
}

// build fills kreq's session metadata and partitions for a fetch of want
// (every partition the fetcher wants now). It reports whether the fetch
// is incremental. Caller holds h.mu until handled or failed.
func (h *fetchSessionHandler) build(kreq *kmsg.FetchRequest, want []partition.FetchPartition) (incremental bool) {
	h.pending, h.pendingChanged, h.pendingGone = nil, h.pendingChanged[:0], h.pendingGone[:0]
	h.wish = want
	kreq.SessionID = h.id
	kreq.SessionEpoch = h.epoch
	if h.id == invalidSessionID || h.epoch == initialEpoch {
		kreq.SessionEpoch = initialEpoch
		h.pending = want
		appendFetchTopics(kreq, want)
		return false
	}
	if h.sameOrder(want) {
		// The partitions the session holds, in the same order: only
		// changed ones are sent, and none is gone.
		for i, p := range want {
			if p != h.last[i] {
				h.pendingChanged = append(h.pendingChanged, p)
			}
		}
		appendFetchTopics(kreq, h.pendingChanged)
		return true
	}
	// want comes from the fetcher's map: no partition twice. When every
	// one of them is in the session and the counts match, none is gone.
	found := 0
	for _, p := range want {
		old, ok := h.parts[p.TopicPartition]
		if ok {
			found++
		}
		if !ok || old != p {
			h.pendingChanged = append(h.pendingChanged, p)
		}
	}
	appendFetchTopics(kreq, h.pendingChanged)
	if found == len(h.parts) {
		return true
	}
	wanted := make(map[cluster.TopicPartition]struct{}, len(want))
	for _, p := range want {
		wanted[p.TopicPartition] = struct{}{}
	}
	for tp := range h.parts {
		if _, ok := wanted[tp]; !ok {
			h.pendingGone = append(h.pendingGone, tp)
		}
	}
	topics, byTopic := topicOrder(h.pendingGone, func(tp cluster.TopicPartition) string { return tp.Topic })
	for _, t := range topics {
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.Topic = t
		for _, tp := range byTopic[t] {
			ft.Partitions = append(ft.Partitions, tp.Partition)
		}
		kreq.ForgottenTopics = append(kreq.ForgottenTopics, ft)
	}
	return true
}

// sameOrder reports whether want names the partitions of the last
// successful fetch, which the session holds, in the same order.
func (h *fetchSessionHandler) sameOrder(want []partition.FetchPartition) bool {
	if !h.lastOK || len(want) != len(h.last) || len(want) != len(h.parts) {
		return false
	}
	for i := range want {
		if want[i].TopicPartition != h.last[i].TopicPartition {
			return false
		}
	}
	return true
}

// appendFetchTopics adds parts to kreq, grouped by topic.
func appendFetchTopics(kreq *kmsg.FetchRequest, parts []partition.FetchPartition) {
	topics, byTopic := topicOrder(parts, func(p partition.FetchPartition) string { return p.TopicPartition.Topic })
	for _, t := range topics {
		kt := kmsg.NewFetchRequestTopic()
		kt.Topic = t
		for _, p := range byTopic[t] {
			kp := kmsg.NewFetchRequestTopicPartition()
			kp.Partition = p.TopicPartition.Partition
			kp.CurrentLeaderEpoch = p.CurrentLeaderEpoch
			kp.FetchOffset = p.FetchOffset
			kp.LogStartOffset = p.LogStartOffset
			kp.PartitionMaxBytes = p.MaxBytes
			kt.Partitions = append(kt.Partitions, kp)
		}
		kreq.Topics = append(kreq.Topics, kt)
	}
}

// handled moves the handler on after a fetch the leader answered without
// a top-level error, with the session id it answered. It reports false
// when the answer does not fit the session (an incremental fetch answered
// for another session): the fetch is then treated as failed. Caller holds
// h.mu.
func (h *fetchSessionHandler) handled(incremental bool, respSessionID int32) bool {
	want, changed, gone := h.pending, h.pendingChanged, h.pendingGone
	h.pending = nil
	wish := h.wish
	h.wish, h.lastOK = nil, false
	if respSessionID == invalidSessionID {
		// No session (the cache was full, or the session closed):
		// every fetch is full until one is created.
		h.id, h.epoch = invalidSessionID, initialEpoch
		clear(h.parts)
		return true
	}
	if incremental && respSessionID != h.id {
		h.failed(false)
		return false
	}
	h.epoch = nextSessionEpoch(h.epoch)
	h.last, h.lastOK = append(h.last[:0], wish...), true
	if incremental {
		for _, p := range changed {
			h.parts[p.TopicPartition] = p
		}
		for _, tp := range gone {
			delete(h.parts, tp)
		}
		return true
	}
	h.id = respSessionID
	h.epoch = nextSessionEpoch(initialEpoch)
	clear(h.parts)
	for _, p := range want {
		h.parts[p.TopicPartition] = p
	}
	return true
}

// failed makes the next fetch a full one after a fetch that failed as a
// whole. unknown says the leader does not know the session
// (FETCH_SESSION_ID_NOT_FOUND): the next fetch asks for a new one without
// naming it. Otherwise it names the old session with epoch 0, which the
// leader closes. Caller holds h.mu.
func (h *fetchSessionHandler) failed(unknown bool) {
	h.pending, h.pendingChanged, h.pendingGone = nil, h.pendingChanged[:0], h.pendingGone[:0]
	h.wish, h.lastOK = nil, false
	if unknown {
		h.id = invalidSessionID
	}
	h.epoch = initialEpoch
	clear(h.parts)
}

// sessionHandler returns the session handler of leader, creating it.
func (c *BrokerClient) sessionHandler(leader int32) *fetchSessionHandler {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.sessions[leader]
	if h == nil {
		h = newFetchSessionHandler()
		c.sessions[leader] = h
	}
	return h
}
