package protocol

// Incremental fetch sessions (KIP-227), server side: the cache of
// sessions, as Kafka's FetchSessionCache (FetchSession.scala).
//
// A session remembers, for each of its partitions, what the fetcher last
// asked (fetch offset, its log start offset, leader epoch, max bytes) and
// what the broker last answered (high watermark, last stable offset, log
// start offset). An incremental fetch then names only the partitions whose
// request data changed (plus ForgottenTopics), and its response only the
// partitions with records, an error, or an offset the fetcher has not seen.
//
// The cache holds at most max.incremental.fetch.session.cache.slots
// sessions. When it is full, a new session takes a slot by evicting, in
// Kafka's order (tryEvict):
//  1. the least recently used session, if it has been idle longer than the
//     minimum eviction time (Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS,
//     120 s): stale sessions go first, whoever asks;
//  2. else the least valuable evictable session, if the new one is worth
//     more: sessions order by (privileged, partition count, id), a
//     follower's session being privileged, so a larger session displaces
//     a smaller one (KIP-227's size-weighted eviction) and a follower's a
//     consumer's; the newcomer must be strictly more valuable. A session
//     is evictable this way once it was older than the minimum eviction
//     time at its last use, except that a new privileged session may also
//     evict an unprivileged one of any age.
//
// Sessions are never expired by a timer (no goroutine, no per-session
// timer): an idle one stays until a new session needs its slot, as in
// Kafka. The cache is small (Kafka's default 1,000 slots), so eviction scans
// the sessions rather than keep Kafka's sorted indexes; it only runs when
// the cache is full.
//
// Lock order: fetchSession.mu -> fetchSessionCache.mu (a session is touched
// while its mu is held). A session's partitions are read with neither held.

import (
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/kafkazk/broker/cluster"
)

// DefaultFetchSessionCacheSlots is Kafka's default of
// max.incremental.fetch.session.cache.slots.
const DefaultFetchSessionCacheSlots = 1000

// fetchSessionEvictionAge is Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS:
// a session idle this long may be evicted by anyone, and one created this
// long ago by a more valuable one.
const fetchSessionEvictionAge = 120 * time.Second

// The session ids and epochs of KIP-227's FetchMetadata.
const (
	invalidSessionID int32 = 0  // INVALID_SESSION_ID: no session
	initialEpoch     int32 = 0  // INITIAL_EPOCH: a full fetch that creates a session
	finalEpoch       int32 = -1 // FINAL_EPOCH: a full fetch without a session
)

// nextSessionEpoch is FetchMetadata.nextEpoch: epochs go 1, 2, ...,
// MaxInt32, 1, ...; the initial and final epochs map to themselves and 1.
func nextSessionEpoch(e int32) int32 {
	switch {
	case e < 0:
		return finalEpoch
	case e == math.MaxInt32:
		return 1
	default:
		return e + 1
	}
}

// cachedPartition is one partition of a session (Kafka's CachedPartition):
// the request data the fetcher last sent and the offsets the broker last
// answered.
type cachedPartition struct {
	tp                 cluster.TopicPartition
	maxBytes           int32
	fetchOffset        int64
	fetcherLogStart    int64
	currentLeaderEpoch int32
	// Last answered: -1 (never answered, or an error) makes the next
	// response carry the partition.
	highWatermark    int64
	lastStableOffset int64
	logStartOffset   int64
}

// fetchSession is one session (Kafka's FetchSession). mu guards every
// field but id, privileged and creation; the cache's mu guards lastUsed
// and size, its eviction keys.
type fetchSession struct {
	id         int32
	privileged bool // a follower's
	creation   time.Time

	// lastUsed and size are the session's eviction keys, and the two
	// flags whether it may be evicted by a more valuable newcomer, all as
	// of its last touch (Kafka's touch: evictable by all once older than
	// the eviction age; by privileged newcomers also while unprivileged).
	// Guarded by fetchSessionCache.mu.
	lastUsed              time.Time
	size                  int
	evictableByAll        bool
	evictableByPrivileged bool

	mu    sync.Mutex
	epoch int32 // the epoch the next incremental request must carry
	// parts is the session's partitions in fetch order: a partition that
	// returns records moves to the end, so that when the response's
	// MaxBytes cuts it short, the others go first next time.
	parts []*cachedPartition
	index map[cluster.TopicPartition]int // position in parts
}

// fetchSessionCache is Kafka's FetchSessionCache (one shard).
type fetchSessionCache struct {
	maxEntries int
	evictAge   time.Duration
	now        func() time.Time

	mu        sync.Mutex
	sessions  map[int32]*fetchSession
	evictions int64 // IncrementalFetchSessionEvictionsPerSec's count
}

func newFetchSessionCache(maxEntries int, evictAge time.Duration, now func() time.Time) *fetchSessionCache {
	if now == nil {
		now = time.Now
	}
	return &fetchSessionCache{maxEntries: max(maxEntries, 0), evictAge: evictAge, now: now,
		sessions: map[int32]*fetchSession{}}
}

// get returns the session id, or nil.
func (c *fetchSessionCache) get(id int32) *fetchSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessions[id]
}

// len is the number of sessions (NumIncrementalFetchSessions).
func (c *fetchSessionCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sessions)
}

// totalPartitions is the number of partitions cached over every session
// (NumIncrementalFetchPartitionsCached), as of each one's last touch.
func (c *fetchSessionCache) totalPartitions() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.sessions {
		n += s.size
	}
	return n
}

// remove drops session id, reporting whether it was there.
func (c *fetchSessionCache) remove(id int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.sessions[id]
	delete(c.sessions, id)
	return ok
}

// removeSession drops s if it is still the session of its id.
func (c *fetchSessionCache) removeSession(s *fetchSession) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sessions[s.id] == s {
		delete(c.sessions, s.id)
	}
}

// maybeCreate makes a session of parts when the cache has a free slot or
// can evict one (tryEvict), and returns its id, or invalidSessionID.
// The new session's next epoch is 1.
func (c *fetchSessionCache) maybeCreate(privileged bool, parts []*cachedPartition) int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if len(c.sessions) >= c.maxEntries && !c.tryEvictLocked(privileged, len(parts), now) {
		return invalidSessionID
	}
	s := &fetchSession{id: c.newIDLocked(), privileged: privileged, creation: now,
		epoch: nextSessionEpoch(initialEpoch), parts: parts,
		index: make(map[cluster.TopicPartition]int, len(parts))}
	c.touchLocked(s, len(parts), now)
	for i, p := range parts {
		s.index[p.tp] = i
	}
	c.sessions[s.id] = s
	return s.id
}

// newIDLocked picks a random unused id in [1, MaxInt32). Caller holds c.mu.
func (c *fetchSessionCache) newIDLocked() int32 {
	for {
		id := rand.Int32N(math.MaxInt32-1) + 1
		if _, used := c.sessions[id]; !used {
			return id
		}
	}
}

// evictKeyLess orders sessions by value: (privileged, size, id), as
// Kafka's EvictableKey. Caller holds c.mu.
func evictKeyLess(aPriv bool, aSize int, aID int32, bPriv bool, bSize int, bID int32) bool {
	if aPriv != bPriv {
		return !aPriv
	}
	if aSize != bSize {
		return aSize < bSize
	}
	return aID < bID
}

// tryEvictLocked frees a slot for a new session of size partitions, if
// Kafka's rules let it (see the file comment), and reports whether it
// did. Caller holds c.mu.
func (c *fetchSessionCache) tryEvictLocked(privileged bool, size int, now time.Time) bool {
	// The least recently used session, ties broken by id.
	var lru *fetchSession
	for _, s := range c.sessions {
		if lru == nil || s.lastUsed.Before(lru.lastUsed) || (s.lastUsed.Equal(lru.lastUsed) && s.id < lru.id) {
			lru = s
		}
	}
	if lru == nil {
		return false
	}
	if now.Sub(lru.lastUsed) > c.evictAge {
		delete(c.sessions, lru.id)
		c.evictions++
		return true
	}
	// The least valuable session the new one may evict: for a privileged
	// newcomer, one evictable by privileged sessions, else one evictable
	// by all (as each stood at its last touch).
	var victim *fetchSession
	for _, s := range c.sessions {
		if !s.evictableByAll && !(privileged && s.evictableByPrivileged) {
			continue
		}
		if victim == nil || evictKeyLess(s.privileged, s.size, s.id, victim.privileged, victim.size, victim.id) {
			victim = s
		}
	}
	if victim == nil {
		return false
	}
	// The newcomer's key has id 0, below every session's, so it evicts
	// only a session strictly below it on (privileged, size).
	if evictKeyLess(privileged, size, 0, victim.privileged, victim.size, victim.id) {
		return false
	}
	delete(c.sessions, victim.id)
	c.evictions++
	return true
}

// touch records a use of s now, with its current size. Caller holds s.mu.
func (c *fetchSessionCache) touch(s *fetchSession) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.touchLocked(s, len(s.parts), c.now())
}

// touchLocked sets s's eviction keys. Caller holds c.mu.
func (c *fetchSessionCache) touchLocked(s *fetchSession, size int, now time.Time) {
	s.lastUsed = now
	s.size = size
	old := now.Sub(s.creation) > c.evictAge
	s.evictableByAll = old
	s.evictableByPrivileged = old || !s.privileged
}

// updateLocked applies an incremental request to s (Kafka's
// FetchSession.update): each named partition is added or has its request
// data replaced; each forgotten one is removed. It reports how many were
// added, updated and removed. Caller holds s.mu.
func (s *fetchSession) updateLocked(named []cachedPartition, forgotten []cluster.TopicPartition) (added, updated, removed int) {
	for _, p := range named {
		if i, ok := s.index[p.tp]; ok {
			cp := s.parts[i]
			if cp.currentLeaderEpoch != p.currentLeaderEpoch {
				// A follower that applied a new leader epoch forgot the
				// leader's HW (it learns it only from an answer naming the
				// partition): answer it again even while idle, as for a
				// partition just added.
				cp.highWatermark, cp.lastStableOffset, cp.logStartOffset = -1, -1, -1
			}
			cp.maxBytes, cp.fetchOffset = p.maxBytes, p.fetchOffset
			cp.fetcherLogStart, cp.currentLeaderEpoch = p.fetcherLogStart, p.currentLeaderEpoch
			updated++
			continue
		}
		cp := p
		cp.highWatermark, cp.lastStableOffset, cp.logStartOffset = -1, -1, -1
		s.index[p.tp] = len(s.parts)
		s.parts = append(s.parts, &cp)
		added++
	}
	if len(forgotten) == 0 {
		return added, updated, 0
	}
	gone := make(map[cluster.TopicPartition]bool, len(forgotten))
	for _, tp := range forgotten {
		if _, ok := s.index[tp]; ok {
			gone[tp] = true
		}
	}
	if len(gone) == 0 {
		return added, updated, 0
	}
	kept := s.parts[:0]
	for _, p := range s.parts {
		if !gone[p.tp] {
			kept = append(kept, p)
		}
	}
	clear(s.parts[len(kept):])
	s.parts = kept
	s.reindexLocked()
	return added, updated, len(gone)
}

// reindexLocked rebuilds index from parts. Caller holds s.mu.
func (s *fetchSession) reindexLocked() {
	clear(s.index)
	for i, p := range s.parts {
		s.index[p.tp] = i
	}
}

// moveToEndLocked moves the partitions at the positions in moved (in
// increasing order) to the end of parts, keeping the order within each
// group. Caller holds s.mu.
func (s *fetchSession) moveToEndLocked(moved []int) {
	if len(moved) == 0 {
		return
	}
	if moved[0] == len(s.parts)-len(moved) {
		return // already the tail, in order
	}
	out := make([]*cachedPartition, 0, len(s.parts))
	j := 0
	for i, p := range s.parts {
		if j < len(moved) && moved[j] == i {
			j++
			continue
		}
		out = append(out, p)
	}
	for _, i := range moved {
		out = append(out, s.parts[i])
	}
	s.parts = out
	s.reindexLocked()
}

// fetchSessionSlots is Config.FetchSessionCacheSlots as a cache size.
func fetchSessionSlots(n int) int {
	switch {
	case n == 0:
		return DefaultFetchSessionCacheSlots
	case n < 0:
		return 0
	}
	return n
}

// ServerFetchSessionCacheSlots is Config.FetchSessionCacheSlots for
// Kafka's max.incremental.fetch.session.cache.slots value n: 0 keeps no
// session, as in Kafka.
func ServerFetchSessionCacheSlots(n int) int {
	if n == 0 {
		return -1
	}
	return n
}
