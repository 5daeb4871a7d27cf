package protocol

// The fetch session cache, after Kafka's FetchSessionTest: slots, the
// eviction of stale sessions, privileged (follower) sessions,
// size-weighted eviction, epochs.

import (
	"math"
	"testing"
	"time"

	"github.com/kafkazk/broker/cluster"
)

// sessionClock is a settable clock for the cache.
type sessionClock struct{ t time.Time }

func (c *sessionClock) now() time.Time          { return c.t }
func (c *sessionClock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newSessionClock() *sessionClock            { return &sessionClock{t: time.Unix(1_000_000, 0)} }
func (c *sessionClock) cache(n int, age time.Duration) *fetchSessionCache {
	return newFetchSessionCache(n, age, c.now)
}

// someParts is n cached partitions of topic "t".
func someParts(n int) []*cachedPartition {
	out := make([]*cachedPartition, n)
	for i := range out {
		out[i] = &cachedPartition{tp: cluster.TopicPartition{Topic: "t", Partition: int32(i)}, highWatermark: -1, lastStableOffset: -1, logStartOffset: -1}
	}
	return out
}

func mustCreate(t *testing.T, c *fetchSessionCache, privileged bool, n int) int32 {
	t.Helper()
	id := c.maybeCreate(privileged, someParts(n))
	if id == invalidSessionID {
		t.Fatalf("no session created (privileged %v, %d partitions, %d cached)", privileged, n, c.len())
	}
	return id
}

func expectNoSession(t *testing.T, c *fetchSessionCache, privileged bool, n int) {
	t.Helper()
	if id := c.maybeCreate(privileged, someParts(n)); id != invalidSessionID {
		t.Fatalf("session %d created (privileged %v, %d partitions), want none", id, privileged, n)
	}
}

func present(c *fetchSessionCache, ids ...int32) bool {
	for _, id := range ids {
		if c.get(id) == nil {
			return false
		}
	}
	return true
}

func TestNextSessionEpoch(t *testing.T) {
	for _, c := range []struct{ in, want int32 }{{0, 1}, {1, 2}, {41, 42}, {math.MaxInt32, 1}, {-1, -1}} {
		if got := nextSessionEpoch(c.in); got != c.want {
			t.Errorf("nextSessionEpoch(%d) = %d, want %d", c.in, got, c.want)
		}
	}
}

// Kafka's testSessionCache: a cache of three; a fourth session gets no
// slot while the others are fresh, and takes the least recently used one
// once it is stale, whoever asks.
func TestFetchSessionCacheStaleEviction(t *testing.T) {
	clk := newSessionClock()
	c := clk.cache(3, 100*time.Millisecond)
	id1 := mustCreate(t, c, false, 10)
	clk.advance(10 * time.Millisecond)
	id2 := mustCreate(t, c, false, 20)
	clk.advance(10 * time.Millisecond)
	id3 := mustCreate(t, c, false, 30)
	if c.len() != 3 || c.totalPartitions() != 60 {
		t.Fatalf("cache holds %d sessions, %d partitions; want 3, 60", c.len(), c.totalPartitions())
	}
	expectNoSession(t, c, false, 40) // nothing stale, nothing older than the eviction age
	if !present(c, id1, id2, id3) {
		t.Fatal("a refused session evicted one")
	}
	// Session 1 is used again: session 2 becomes the least recently used.
	clk.advance(50 * time.Millisecond)
	c.touch(c.get(id1))
	clk.advance(60 * time.Millisecond) // session 2 idle 110 ms, session 1 60 ms
	id4 := mustCreate(t, c, false, 1)  // a smaller, unprivileged one: staleness alone decides
	if present(c, id2) || !present(c, id1, id3, id4) {
		t.Fatalf("after the stale eviction: 1 %v 2 %v 3 %v 4 %v; want session 2 gone",
			present(c, id1), present(c, id2), present(c, id3), present(c, id4))
	}
	if c.evictions != 1 {
		t.Errorf("evictions = %d, want 1", c.evictions)
	}
}

// Kafka's testPrivilegedSessionHandling: a follower's session evicts a
// consumer's at once, however young; a consumer's never evicts a fresh
// follower's; nor does a follower's evict a fresh follower's.
func TestFetchSessionCachePrivileged(t *testing.T) {
	clk := newSessionClock()
	c := clk.cache(2, time.Minute)
	consumer := mustCreate(t, c, false, 100)
	follower1 := mustCreate(t, c, true, 5)
	follower2 := mustCreate(t, c, true, 1) // evicts the consumer's, though larger
	if present(c, consumer) || !present(c, follower1, follower2) {
		t.Fatal("a follower's session did not evict a consumer's")
	}
	expectNoSession(t, c, false, 1000)
	expectNoSession(t, c, true, 1000) // fresh followers' sessions are not evictable
	if !present(c, follower1, follower2) {
		t.Fatal("a refused session evicted one")
	}
	// Past the eviction age, at their next use the followers' sessions
	// become evictable by a more valuable newcomer, still not by a
	// consumer's (less valuable whatever its size).
	clk.advance(time.Minute + time.Second)
	c.touch(c.get(follower1))
	c.touch(c.get(follower2))
	expectNoSession(t, c, false, 1000)
	expectNoSession(t, c, true, 1) // not more valuable than the 1-partition one
	follower3 := mustCreate(t, c, true, 2)
	if present(c, follower2) || !present(c, follower1, follower3) {
		t.Fatal("want the smallest follower session evicted by a larger one")
	}
}

// Kafka's size-weighted eviction (KIP-227): a session older than the
// eviction age is evicted by a larger newcomer, the smallest first, but
// never by one of the same size or smaller; a session younger than the
// age, even if recently used, is not.
func TestFetchSessionCacheSizeWeighted(t *testing.T) {
	clk := newSessionClock()
	c := clk.cache(3, 100*time.Millisecond)
	small := mustCreate(t, c, false, 2)
	medium := mustCreate(t, c, false, 5)
	clk.advance(90 * time.Millisecond)
	young := mustCreate(t, c, false, 1)
	clk.advance(20 * time.Millisecond) // small and medium 110 ms old, young 20 ms
	for _, id := range []int32{small, medium, young} {
		c.touch(c.get(id)) // none is stale
	}
	expectNoSession(t, c, false, 2) // same size as the smallest evictable: not more valuable
	big := mustCreate(t, c, false, 3)
	if present(c, small) || !present(c, medium, young, big) {
		t.Fatal("want the smallest old session (2 partitions) evicted by a 3-partition one")
	}
	expectNoSession(t, c, false, 4) // medium (5) is the only old one left; young (1) is not evictable yet
	if !present(c, medium, young, big) {
		t.Fatal("a refused session evicted one")
	}
}

// A cache of zero slots (max.incremental.fetch.session.cache.slots=0)
// never creates a session.
func TestFetchSessionCacheNoSlots(t *testing.T) {
	clk := newSessionClock()
	c := clk.cache(0, time.Millisecond)
	expectNoSession(t, c, true, 1)
	if got := fetchSessionSlots(ServerFetchSessionCacheSlots(0)); got != 0 {
		t.Errorf("slots for max.incremental.fetch.session.cache.slots=0: %d, want 0", got)
	}
	if got := fetchSessionSlots(0); got != DefaultFetchSessionCacheSlots {
		t.Errorf("slots for an unset Config: %d, want %d", got, DefaultFetchSessionCacheSlots)
	}
}

// Session ids are never 0 and never reused while the session lives.
func TestFetchSessionIDs(t *testing.T) {
	clk := newSessionClock()
	c := clk.cache(500, time.Minute)
	seen := map[int32]bool{}
	for range 500 {
		id := mustCreate(t, c, false, 1)
		if id <= 0 || seen[id] {
			t.Fatalf("session id %d: zero, negative or reused", id)
		}
		seen[id] = true
	}
	if s := c.get(mustCreateAfterRemove(t, c)); s == nil || s.epoch != 1 {
		t.Fatalf("new session's next epoch: want 1")
	}
}

func mustCreateAfterRemove(t *testing.T, c *fetchSessionCache) int32 {
	t.Helper()
	for id := range c.sessions {
		if !c.remove(id) {
			t.Fatalf("remove(%d) = false", id)
		}
		break
	}
	return mustCreate(t, c, false, 1)
}

// The session's partitions: updates add, alter and remove; order moves.
func TestFetchSessionUpdate(t *testing.T) {
	s := &fetchSession{index: map[cluster.TopicPartition]int{}}
	s.parts = someParts(3)
	s.reindexLocked()
	tp := func(p int32) cluster.TopicPartition { return cluster.TopicPartition{Topic: "t", Partition: p} }
	s.parts[1].highWatermark = 7
	added, updated, removed := s.updateLocked(
		[]cachedPartition{{tp: tp(1), fetchOffset: 5, maxBytes: 9}, {tp: tp(3), fetchOffset: 1}},
		[]cluster.TopicPartition{tp(0), tp(9)})
	if added != 1 || updated != 1 || removed != 1 {
		t.Fatalf("added %d updated %d removed %d, want 1 1 1", added, updated, removed)
	}
	var got []int32
	for _, p := range s.parts {
		got = append(got, p.tp.Partition)
	}
	if len(got) != 3 || got[0] != 1 || got[1] != 2 || got[2] != 3 {
		t.Fatalf("partitions %v, want [1 2 3]", got)
	}
	p1 := s.parts[s.index[tp(1)]]
	if p1.fetchOffset != 5 || p1.maxBytes != 9 || p1.highWatermark != 7 {
		t.Errorf("altered partition %+v: want the new request data and the old answer", *p1)
	}
	if p3 := s.parts[s.index[tp(3)]]; p3.highWatermark != -1 {
		t.Errorf("added partition answered HW %d, want -1 (never answered)", p3.highWatermark)
	}
	s.moveToEndLocked([]int{0})
	got = got[:0]
	for i, p := range s.parts {
		got = append(got, p.tp.Partition)
		if s.index[p.tp] != i {
			t.Fatalf("index of %v is %d, want %d", p.tp, s.index[p.tp], i)
		}
	}
	if got[0] != 2 || got[1] != 3 || got[2] != 1 {
		t.Fatalf("after moving partition 1 to the end: %v, want [2 3 1]", got)
	}
}
