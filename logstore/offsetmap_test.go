package logstore

import (
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
