package logstore

import (
	"math"
	"strconv"
	"testing"
)

// TestOffsetMapProbeStartCoversEvenSlots: a key's probe starts anywhere in
// the table, not only at odd slots (the identity hash has its low bit set,
// so starting from it on an even slot count would leave every even slot to
// collisions and double the probe lengths).
func TestOffsetMapProbeStartCoversEvenSlots(t *testing.T) {
	m := NewOffsetMap(1024 * offsetMapSlotBytes)
	if len(m.slots)%2 != 0 {
		t.Fatalf("slot count %d, want even", len(m.slots))
	}
	even := 0
	const keys = 200
	for i := 0; i < keys; i++ {
		m.Clear()
		if !m.Put([]byte("key-"+strconv.Itoa(i)), int64(i)) {
			t.Fatal("put into an empty map failed")
		}
		for j := range m.slots {
			if m.slots[j].h1 != 0 && j%2 == 0 {
				even++
			}
		}
	}
	if even < keys/4 {
		t.Fatalf("%d of %d keys landed on an even slot of an empty map, want about half", even, keys)
	}
}

// TestOffsetMapBudgetClamped: a budget beyond Int.MaxValue bytes (a huge
// log.cleaner.dedupe.buffer.size) sizes the largest map rather than an
// allocation that cannot succeed (make panicked on MaxInt64, and a few
// GiB was a fatal out-of-memory), and one of zero or less the smallest.
func TestOffsetMapBudgetClamped(t *testing.T) {
	for _, b := range []int64{math.MaxInt64, 1 << 40, math.MaxInt32 + 1} {
		if got := OffsetMapBytes(b); got > MaxOffsetMapBytes || got < MaxOffsetMapBytes-offsetMapSlotBytes {
			t.Errorf("OffsetMapBytes(%d) = %d, want the largest map below %d", b, got, int64(MaxOffsetMapBytes))
		}
	}
	for _, b := range []int64{0, -1, math.MinInt64} {
		m := NewOffsetMap(b)
		if len(m.slots) != 2 || m.Bytes() != OffsetMapBytes(b) {
			t.Errorf("NewOffsetMap(%d): %d slots, %d bytes (OffsetMapBytes %d), want 2 slots", b, len(m.slots), m.Bytes(), OffsetMapBytes(b))
		}
	}
}
