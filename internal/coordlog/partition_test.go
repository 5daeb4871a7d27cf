package coordlog

import "testing"

// TestPartitionFor pins Java's String.hashCode with Kafka's Utils.abs:
// values computed with the JDK, a surrogate pair hashed as two UTF-16
// units, MinInt32 mapped to 0, and no division by n <= 0.
func TestPartitionFor(t *testing.T) {
	for _, c := range []struct {
		key  string
		n    int32
		want int32
	}{
		{"hello", 50, 22},             // "hello".hashCode() = 99162322
		{"polygenelubricants", 50, 0}, // hashCode() = Integer.MIN_VALUE
		{"", 50, 0},                   // hashCode() = 0
		{"a", 50, 47},                 // 97
		{"\U0001F600", 1000, 899},     // "😀" is \uD83D\uDE00: 31*0xD83D + 0xDE00 = 1772899
		{"hello", 0, 0},
		{"hello", -3, 0},
	} {
		if got := PartitionFor(c.key, c.n); got != c.want {
			t.Errorf("PartitionFor(%q, %d) = %d, want %d", c.key, c.n, got, c.want)
		}
	}
}
