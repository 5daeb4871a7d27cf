package logstore

import (
	"hash/maphash"
	"math"
)

// offsetMapSlotBytes is the memory of one slot: a 128-bit hash of the key
// and the offset (Kafka's SkimpyOffsetMap stores a 16-byte MD5 and an
// 8-byte offset).
const offsetMapSlotBytes = 24

// offsetMapLoadFactor is Kafka's log.cleaner.io.buffer.load.factor default:
// the map counts as full at 90% of its slots.
const offsetMapLoadFactor = 0.9

type offsetMapSlot struct {
	h1, h2 uint64 // both zero: empty (h1 always has its low bit set)
	offset int64
}

// OffsetMap is the cleaner's map from key to the last offset that holds it,
// in a fixed memory budget (log.cleaner.dedupe.buffer.size): an
// open-addressing table of 24-byte slots, each a 128-bit hash of the key
// (two maphash sums with independent seeds; a collision, at about 2^-128
// per pair, would make the cleaner keep or drop a record wrongly, as an
// MD5 collision would in Kafka) and the offset. The map is full at 90% of
// its slots. One map is meant to be reused pass after pass by one cleaner
// goroutine: it is not safe for concurrent use.
type OffsetMap struct {
	slots        []offsetMapSlot
	maxEntries   int
	entries      int
	seed1, seed2 maphash.Seed
	latest       int64
}

// MaxOffsetMapBytes bounds a map's budget: Kafka's SkimpyOffsetMap is one
// ByteBuffer of at most Int.MaxValue bytes.
const MaxOffsetMapBytes = math.MaxInt32

// offsetMapSlots is the slot count of a budget, clamped to [2 slots,
// MaxOffsetMapBytes].
func offsetMapSlots(budgetBytes int64) int64 {
	return max(min(budgetBytes, MaxOffsetMapBytes)/offsetMapSlotBytes, 2)
}

// NewOffsetMap allocates a map of budgetBytes, clamped to at least 2
// slots and at most MaxOffsetMapBytes (a budget beyond it gets the
// largest map, not an allocation that cannot succeed). Its memory is
// allocated once, here.
func NewOffsetMap(budgetBytes int64) *OffsetMap {
	n := offsetMapSlots(budgetBytes)
	m := &OffsetMap{
		slots:      make([]offsetMapSlot, n),
		maxEntries: max(int(float64(n)*offsetMapLoadFactor), 1),
		seed1:      maphash.MakeSeed(),
		seed2:      maphash.MakeSeed(),
		latest:     -1,
	}
	return m
}

// OffsetMapBytes is the Bytes of NewOffsetMap(budgetBytes), without
// allocating it (the cleaner compares it to reuse a map).
func OffsetMapBytes(budgetBytes int64) int64 {
	return offsetMapSlots(budgetBytes) * offsetMapSlotBytes
}

// Bytes is the memory the slots take.
func (m *OffsetMap) Bytes() int64 { return int64(len(m.slots)) * offsetMapSlotBytes }

// Len is the number of keys in the map.
func (m *OffsetMap) Len() int { return m.entries }

// MaxEntries is how many keys fit before the map is full.
func (m *OffsetMap) MaxEntries() int { return m.maxEntries }

// Utilization is Len over the slot count, Kafka's utilization figure.
func (m *OffsetMap) Utilization() float64 { return float64(m.entries) / float64(len(m.slots)) }

// LatestOffset is the largest offset put since the last Clear, or -1.
func (m *OffsetMap) LatestOffset() int64 { return m.latest }

// Clear empties the map for the next pass.
func (m *OffsetMap) Clear() {
	clear(m.slots)
	m.entries, m.latest = 0, -1
}

func (m *OffsetMap) hash(key []byte) (uint64, uint64) {
	return maphash.Bytes(m.seed1, key) | 1, maphash.Bytes(m.seed2, key)
}

// find returns the slot of key's hash, or the empty slot where it would go.
// The probe starts at h2, not h1: h1's low bit is always set (it marks a
// slot used), so on an even slot count h1 would start every probe on an
// odd slot.
func (m *OffsetMap) find(h1, h2 uint64) *offsetMapSlot {
	n := uint64(len(m.slots))
	for i := h2 % n; ; i = (i + 1) % n {
		s := &m.slots[i]
		if s.h1 == 0 || (s.h1 == h1 && s.h2 == h2) {
			return s
		}
	}
}

// Put records offset as the latest of key. It returns false, changing
// nothing, when key is new and the map is full.
func (m *OffsetMap) Put(key []byte, offset int64) bool {
	h1, h2 := m.hash(key)
	s := m.find(h1, h2)
	if s.h1 == 0 {
		if m.entries >= m.maxEntries {
			return false
		}
		m.entries++
		s.h1, s.h2 = h1, h2
	}
	s.offset = offset
	m.latest = max(m.latest, offset)
	return true
}

// Get returns the offset stored for key, or -1.
func (m *OffsetMap) Get(key []byte) int64 {
	h1, h2 := m.hash(key)
	if s := m.find(h1, h2); s.h1 != 0 {
		return s.offset
	}
	return -1
}
